package agents

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/alicebob/miniredis/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/catalog"
)

// cardServer serves an agent card that a test can change or take down.
type cardServer struct {
	*httptest.Server
	mu      sync.Mutex
	skills  []string
	down    atomic.Bool
	fetches atomic.Int32
	gate    func() // optional hook run before answering
}

func newCardServer(t *testing.T, skills ...string) *cardServer {
	t.Helper()
	cs := &cardServer{skills: skills}
	cs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != AgentCardPath {
			http.NotFound(w, r)
			return
		}
		cs.fetches.Add(1)
		if cs.gate != nil {
			cs.gate()
		}
		if cs.down.Load() {
			http.Error(w, "<html><body>503 Service Unavailable</body></html>", http.StatusServiceUnavailable)
			return
		}
		cs.mu.Lock()
		card := a2a.AgentCard{Name: "agent " + cs.URL, URL: cs.URL + "/rpc", ProtocolVersion: "0.3.0", Version: "1"}
		for _, s := range cs.skills {
			card.Skills = append(card.Skills, a2a.AgentSkill{ID: s, Name: s, Description: "does " + s})
		}
		cs.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(card)
	}))
	t.Cleanup(cs.Close)
	return cs
}

func (cs *cardServer) setSkills(skills ...string) {
	cs.mu.Lock()
	cs.skills = skills
	cs.mu.Unlock()
}

func newMiniredis(t *testing.T) (*miniredis.Miniredis, redis.UniversalClient) {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return mr, rdb
}

type toolState struct {
	Tool, URL   string
	Unavailable bool
}

func toolStates(caps []catalog.Capability) []toolState {
	var out []toolState
	for _, c := range caps {
		out = append(out, toolState{c.Tool, c.AgentURL, c.Unavailable})
	}
	return out
}

// docs/design.md §5: cards are cached with a TTL and fetched again when stale.
func TestRegistryTTLRefresh(t *testing.T) {
	t.Parallel()
	mr, rdb := newMiniredis(t)
	a := newCardServer(t, "draw")
	reg := NewRegistry(RegistryOptions{URLs: []string{a.URL}, Redis: rdb, TTL: time.Minute})

	for range 3 {
		caps, err := reg.Capabilities(t.Context())
		if err != nil {
			t.Fatalf("Capabilities() error = %v", err)
		}
		if diff := cmp.Diff([]toolState{{"draw", a.URL + "/rpc", false}}, toolStates(caps)); diff != "" {
			t.Fatalf("Capabilities() mismatch (-want +got):\n%s", diff)
		}
	}
	if got := a.fetches.Load(); got != 1 {
		t.Errorf("card fetches within TTL = %d, want 1", got)
	}

	a.setSkills("draw", "paint")
	mr.FastForward(61 * time.Second)
	caps, err := reg.Capabilities(t.Context())
	if err != nil {
		t.Fatalf("Capabilities() error = %v", err)
	}
	want := []toolState{{"draw", a.URL + "/rpc", false}, {"paint", a.URL + "/rpc", false}}
	if diff := cmp.Diff(want, toolStates(caps)); diff != "" {
		t.Errorf("Capabilities() after TTL mismatch (-want +got):\n%s", diff)
	}
	if got := a.fetches.Load(); got != 2 {
		t.Errorf("card fetches after TTL = %d, want 2", got)
	}

	// Key layout: one hash tag; the card itself never expires, freshness does.
	cardKey, freshKey := "capcache:{agents}:card:"+a.URL, "capcache:{agents}:fresh:"+a.URL
	if !mr.Exists(cardKey) || mr.TTL(cardKey) != 0 {
		t.Errorf("card key %s exists=%v ttl=%v, want present without TTL", cardKey, mr.Exists(cardKey), mr.TTL(cardKey))
	}
	if ttl := mr.TTL(freshKey); ttl <= 0 || ttl > time.Minute {
		t.Errorf("fresh key TTL = %v, want (0, 1m]", ttl)
	}
	var cc cachedCard
	v, _ := mr.Get(cardKey)
	if err := json.Unmarshal([]byte(v), &cc); err != nil || cc.FetchedAt.IsZero() || len(cc.Card) == 0 {
		t.Errorf("cached value = %s, want raw card and fetched_at (err %v)", v, err)
	}
}

// docs/design.md §5: an agent that is down at refresh keeps its last good card, its
// capabilities marked unavailable, and the catalog does not fail.
func TestRegistryAgentDownKeepsLastGoodCard(t *testing.T) {
	t.Parallel()
	mr, rdb := newMiniredis(t)
	a := newCardServer(t, "draw")
	reg := NewRegistry(RegistryOptions{URLs: []string{a.URL}, Redis: rdb, TTL: time.Minute, DownRetry: 10 * time.Second})
	if _, err := reg.Capabilities(t.Context()); err != nil {
		t.Fatal(err)
	}

	a.down.Store(true)
	mr.FastForward(61 * time.Second)
	caps, err := reg.Capabilities(t.Context())
	if err != nil {
		t.Fatalf("Capabilities() with agent down error = %v, want nil", err)
	}
	if diff := cmp.Diff([]toolState{{"draw", a.URL + "/rpc", true}}, toolStates(caps)); diff != "" {
		t.Errorf("Capabilities() with agent down mismatch (-want +got):\n%s", diff)
	}
	// Within the down retry the dead agent is not fetched again.
	if _, err := reg.Capabilities(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := a.fetches.Load(); got != 2 {
		t.Errorf("fetches within down retry = %d, want 2", got)
	}

	a.down.Store(false)
	mr.FastForward(11 * time.Second)
	caps, err = reg.Capabilities(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]toolState{{"draw", a.URL + "/rpc", false}}, toolStates(caps)); diff != "" {
		t.Errorf("Capabilities() after recovery mismatch (-want +got):\n%s", diff)
	}
}

// docs/design.md §5: an agent never seen and down is simply absent.
func TestRegistryNeverSeenDownAgentAbsent(t *testing.T) {
	t.Parallel()
	_, rdb := newMiniredis(t)
	a := newCardServer(t, "draw")
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	broken := newCardServer(t, "x")
	broken.down.Store(true)

	reg := NewRegistry(RegistryOptions{URLs: []string{deadURL, broken.URL, a.URL}, Redis: rdb, FetchTimeout: 2 * time.Second})
	caps, err := reg.Capabilities(t.Context())
	if err != nil {
		t.Fatalf("Capabilities() error = %v, want nil", err)
	}
	if diff := cmp.Diff([]toolState{{"draw", a.URL + "/rpc", false}}, toolStates(caps)); diff != "" {
		t.Errorf("Capabilities() mismatch (-want +got):\n%s", diff)
	}
	if err := reg.Refresh(t.Context()); err == nil {
		t.Errorf("Refresh() error = nil, want the failed fetches")
	}
}

// Duplicate tool names across agents: the first configured agent keeps the
// name, later ones get _2 (docs/design.md §3.2 requires unique tool names).
func TestRegistryDuplicateToolsFollowURLOrder(t *testing.T) {
	t.Parallel()
	a := newCardServer(t, "echo")
	b := newCardServer(t, "echo", "other")
	for _, order := range [][]*cardServer{{a, b}, {b, a}} {
		reg := NewRegistry(RegistryOptions{URLs: []string{order[0].URL, order[1].URL}}) // no cache
		caps, err := reg.Capabilities(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, c := range caps {
			got[c.Tool] = c.AgentURL
		}
		if got["echo"] != order[0].URL+"/rpc" || got["echo_2"] != order[1].URL+"/rpc" {
			t.Errorf("Capabilities() tools = %v, want echo → %s and echo_2 → %s", got, order[0].URL, order[1].URL)
		}
	}
}

// Agents are fetched concurrently: each card server answers only once both
// requests have arrived, which a sequential fetch would never satisfy.
func TestRegistryFetchesConcurrently(t *testing.T) {
	t.Parallel()
	var arrived sync.WaitGroup
	arrived.Add(2)
	gate := func() {
		arrived.Done()
		done := make(chan struct{})
		go func() { arrived.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
		}
	}
	a := newCardServer(t, "one")
	b := newCardServer(t, "two")
	a.gate, b.gate = gate, gate
	// A sequential fetch meets the fetch deadline waiting for the other
	// request; concurrent ones get both cards however long the second takes
	// to arrive within it (issue 31: 2 s, short on a loaded machine).
	reg := NewRegistry(RegistryOptions{URLs: []string{a.URL, b.URL}, FetchTimeout: 30 * time.Second})
	caps, err := reg.Capabilities(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(caps) != 2 {
		t.Errorf("Capabilities() = %d capabilities, want 2 (fetches not concurrent?)", len(caps))
	}
}

// Refresh fetches even when the cache is fresh.
func TestRegistryRefreshForces(t *testing.T) {
	t.Parallel()
	_, rdb := newMiniredis(t)
	a := newCardServer(t, "draw")
	reg := NewRegistry(RegistryOptions{URLs: []string{a.URL}, Redis: rdb, TTL: time.Hour})
	if _, err := reg.Capabilities(t.Context()); err != nil {
		t.Fatal(err)
	}
	a.setSkills("paint")
	if err := reg.Refresh(t.Context()); err != nil {
		t.Fatalf("Refresh() error = %v", err)
	}
	caps, err := reg.Capabilities(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(caps) != 1 || caps[0].Tool != "paint" {
		t.Errorf("Capabilities() after Refresh = %v, want [paint]", toolStates(caps))
	}
}
