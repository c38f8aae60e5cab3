package capcache_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/capcache"
	"github.com/clientagent/clientagent/pkg/record"
)

// fakeSources answers a fetch with the source's name and a counter, or
// fails for a source marked down.
type fakeSources struct {
	mu      sync.Mutex
	down    map[string]bool
	fetches map[string]int
	block   chan struct{} // when set, every fetch waits on it
	running atomic.Int32
	maxRun  atomic.Int32
}

type value struct {
	Name string `json:"name"`
	N    int    `json:"n"`
}

func (f *fakeSources) fetch(ctx context.Context, name string) (value, error) {
	n := f.running.Add(1)
	defer f.running.Add(-1)
	for {
		m := f.maxRun.Load()
		if n <= m || f.maxRun.CompareAndSwap(m, n) {
			break
		}
	}
	if f.block != nil {
		select {
		case <-f.block:
		case <-ctx.Done():
			return value{}, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetches[name]++
	if f.down[name] {
		return value{}, errors.New(name + " is down")
	}
	return value{Name: name, N: f.fetches[name]}, nil
}

func (f *fakeSources) setDown(name string, down bool) {
	f.mu.Lock()
	f.down[name] = down
	f.mu.Unlock()
}

func (f *fakeSources) count(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fetches[name]
}

func newCache(t *testing.T, rdb redis.UniversalClient, f *fakeSources, timeout time.Duration) *capcache.Cache[string, value] {
	t.Helper()
	return capcache.New(capcache.Options{Redis: rdb, Namespace: "test", ValueKey: "v", What: "test value",
		TTL: time.Minute, DownRetry: 10 * time.Second, FetchTimeout: timeout},
		func(s string) string { return s }, f.fetch)
}

type state struct {
	N    int // 0: no value
	Down bool
}

func states(es []*capcache.Entry[string, value]) map[string]state {
	out := map[string]state{}
	for _, e := range es {
		s := state{Down: e.Down}
		if e.Value != nil {
			s.N = e.Value.N
		}
		out[e.Source] = s
	}
	return out
}

// One cache for every source of capabilities: fresh values are not fetched
// again, stale ones are, a source that goes down keeps its last good value
// (marked down) and is left alone for the down retry, one never seen and
// down has no value.
func TestCacheFreshnessAndLastGood(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	f := &fakeSources{down: map[string]bool{"never": true}, fetches: map[string]int{}}
	c := newCache(t, rdb, f, time.Second)
	srcs := []string{"a", "never"}

	steps := []struct {
		name    string
		forward time.Duration
		down    bool // "a" is down from this step on
		want    map[string]state
		fetches int // of "a", so far
	}{
		{"first fetch", 0, false, map[string]state{"a": {N: 1}, "never": {Down: true}}, 1},
		{"within the TTL", 30 * time.Second, false, map[string]state{"a": {N: 1}, "never": {Down: true}}, 1},
		{"after the TTL, down", 31 * time.Second, true, map[string]state{"a": {N: 1, Down: true}, "never": {Down: true}}, 2},
		{"within the down retry", 5 * time.Second, false, map[string]state{"a": {N: 1, Down: true}, "never": {Down: true}}, 2},
		{"after the down retry, back", 6 * time.Second, false, map[string]state{"a": {N: 3}, "never": {Down: true}}, 3},
	}
	for _, st := range steps {
		mr.FastForward(st.forward)
		f.setDown("a", st.down)
		es, err := c.Get(t.Context(), srcs)
		if err != nil {
			t.Fatalf("%s: Get() error = %v", st.name, err)
		}
		if got := states(es); got["a"] != st.want["a"] || got["never"] != st.want["never"] {
			t.Errorf("%s: Get() = %v, want %v", st.name, got, st.want)
		}
		if got := f.count("a"); got != st.fetches {
			t.Errorf("%s: fetches of a = %d, want %d", st.name, got, st.fetches)
		}
	}
	if !mr.Exists("capcache:{test}:v:a") || mr.TTL("capcache:{test}:v:a") != 0 {
		t.Errorf("value key: want it kept without TTL")
	}
	if ttl := mr.TTL("capcache:{test}:fresh:a"); ttl <= 0 || ttl > time.Minute {
		t.Errorf("fresh key TTL = %v, want (0, 1m]", ttl)
	}

	// Refresh fetches whatever the cache says and reports the failures.
	f.setDown("a", true)
	if err := c.Refresh(t.Context(), srcs); err == nil {
		t.Error("Refresh() with sources down = nil error, want their failures")
	}
	if got := f.count("a"); got != 4 {
		t.Errorf("fetches of a after Refresh = %d, want 4", got)
	}
}

// Stale sources are fetched concurrently, each within the fetch timeout.
func TestCacheFetchesConcurrentlyWithinTimeout(t *testing.T) {
	t.Parallel()
	f := &fakeSources{down: map[string]bool{}, fetches: map[string]int{}, block: make(chan struct{})}
	c := newCache(t, nil, f, 200*time.Millisecond)
	done := make(chan []*capcache.Entry[string, value])
	go func() {
		es, _ := c.Get(context.Background(), []string{"a", "b", "c"})
		done <- es
	}()
	deadline := time.After(10 * time.Second)
	for f.maxRun.Load() < 3 {
		select {
		case <-deadline:
			t.Fatalf("concurrent fetches = %d, want 3", f.maxRun.Load())
		case <-time.After(time.Millisecond):
		}
	}
	// Nobody unblocks: each fetch ends at the cache's fetch timeout.
	select {
	case es := <-done:
		for _, e := range es {
			if !e.Down || e.Value != nil {
				t.Errorf("source %s after a timed-out fetch: down=%v value=%v, want down without value", e.Source, e.Down, e.Value)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Get() did not return after the fetch timeout")
	}
}

// A cache that does not answer is record.ErrUnavailable (503, not 500).
func TestCacheUnavailable(t *testing.T) {
	t.Parallel()
	// Nothing listens on port 1 (a port a test's listener never gets,
	// unlike a free one probed and closed, which another may take).
	addr := "127.0.0.1:1"
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	c := newCache(t, rdb, &fakeSources{down: map[string]bool{}, fetches: map[string]int{}}, time.Second)
	if _, err := c.Get(t.Context(), []string{"a"}); !errors.Is(err, record.ErrUnavailable) {
		t.Errorf("Get() with the cache down = %v, want record.ErrUnavailable", err)
	}
}
