package devstack

// Issue 13, "flat and fast": a step's Valkey reads do not grow with the
// number of earlier turns beyond the transcript window.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// readBytes sums the sizes of the replies the platform's Valkey client
// reads, by command name. Reads of the capability cache (keys under
// capcache:) are kept apart in cache: when they happen depends on the
// cache's freshness, not on the step, so they are not part of total.
type readBytes struct {
	mu    sync.Mutex
	total int64
	cache int64
	by    map[string]int64
}

func (r *readBytes) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *readBytes) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		r.add(cmd)
		return err
	}
}
func (r *readBytes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			r.add(c)
		}
		return err
	}
}

func (r *readBytes) add(cmd redis.Cmder) {
	n := int64(replySize(cmdVal(cmd)))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = map[string]int64{}
	}
	r.by[cmd.Name()] += n
	if capCacheCmd(cmd) {
		r.cache += n
		return
	}
	r.total += n
}

// capCacheCmd reports whether cmd names a capability cache key (the agent
// cards' and the MCP tool lists', pkg/agents and pkg/mcp).
func capCacheCmd(cmd redis.Cmder) bool {
	for _, a := range cmd.Args()[1:] {
		if s, ok := a.(string); ok && strings.HasPrefix(s, "capcache:") {
			return true
		}
	}
	return false
}

// take returns and resets the step bytes, the capability cache bytes and
// the bytes by command since the last take.
func (r *readBytes) take() (step, cache int64, by map[string]int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	step, cache, by = r.total, r.cache, r.by
	r.total, r.cache, r.by = 0, 0, nil
	return step, cache, by
}

func cmdVal(cmd redis.Cmder) any {
	switch c := cmd.(type) {
	case *redis.MapStringStringCmd:
		return c.Val()
	case *redis.StringCmd:
		return c.Val()
	case *redis.SliceCmd:
		return c.Val()
	case *redis.StringSliceCmd:
		return c.Val()
	case *redis.Cmd:
		return c.Val()
	}
	return nil
}

// replySize approximates the bytes of a reply: the lengths of its strings.
func replySize(v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case []string:
		n := 0
		for _, s := range x {
			n += len(s)
		}
		return n
	case []any:
		n := 0
		for _, e := range x {
			n += replySize(e)
		}
		return n
	case map[string]string:
		n := 0
		for k, s := range x {
			n += len(k) + len(s)
		}
		return n
	case map[any]any:
		n := 0
		for k, e := range x {
			n += replySize(k) + replySize(e)
		}
		return n
	}
	return 8
}

// TestStepReadsAreFlat runs Popelnase turns one after another in one
// conversation and compares the bytes read from Valkey by the platform
// (API and step handlers) once the transcript window (80 entries, about 14
// of these turns) is full: turn 200 must not read more than turn 20
// (issue 13: ≤ 1.2×). Before, every step read the whole conversation.
//
// The bytes compared are the turn's own reads, which depend only on the
// conversation's content: the capability cache is read whenever its
// freshness runs out, a matter of wall-clock time on a slow run (issue 31),
// so its reads are counted apart, and the test gives the cache a freshness
// longer than any run so it is not read again after the first turn either.
func TestStepReadsAreFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("200 turns")
	}
	t.Parallel()
	st, c := stack(t, nil, func(cfg *Config) { cfg.CardTTL, cfg.CatalogTTL = 24*time.Hour, 24*time.Hour })
	rb := &readBytes{}
	st.Redis.AddHook(rb)
	cid := c.newConversation()
	at := map[int]int64{}
	for i := 1; i <= 200; i++ {
		rb.take()
		tid := c.send(cid, fmt.Sprintf("Create a PNG image with the word Flat%d", i))
		if _, err := st.history(t.Context(), tid); err != nil {
			t.Fatal(err)
		}
		n, cache, by := rb.take()
		switch i {
		case 1, 10, 20, 50, 200:
			at[i] = n
			t.Logf("turn %d: %d bytes read by the turn, %d by the capability cache %v", i, n, cache, by)
		}
		if i > 1 && cache != 0 {
			t.Errorf("turn %d read the capability cache (%d bytes) although it is fresh for 24h", i, cache)
		}
	}
	if float64(at[200]) > 1.2*float64(at[20]) {
		t.Errorf("turn 200 read %d bytes, turn 20 %d: more than 1.2×", at[200], at[20])
	}
}
