package devstack

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/procs"
)

// procsRecorder stands in for runtime.GOMAXPROCS: the stack's tests share
// one process, so the adapter under test records what it would set.
type procsRecorder struct {
	mu  sync.Mutex
	set []int
}

func (r *procsRecorder) Set(n int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.set = append(r.set, n)
	return 0
}

func (r *procsRecorder) calls() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.set)
}

// The local stack runs on one processor while its steps run one at a
// time, takes every processor once two overlap, and goes back to one when
// they no longer do (pkg/procs; its row in docs/architecture.md).
// The steps are counted where the engine invokes them: two turns whose
// calls are held at their specialist are two invoke steps at once.
func TestStepsSetTheProcessors(t *testing.T) {
	t.Parallel()
	rec := &procsRecorder{}
	// The process's scheduling waits are the other tests' too: none are
	// counted, so only the steps decide.
	adapter := procs.New(procs.Options{Max: 2, Quiet: 20 * time.Millisecond, Set: rec.Set, Waits: func() uint64 { return 0 }})
	t.Cleanup(adapter.Close)
	slow, agentURL := startSlowAgent(t, time.Minute)
	slow.hold = make(chan struct{})
	_, c := stack(t, oneToolModel, func(cfg *Config) {
		cfg.Agents = []string{agentURL}
		cfg.Procs = adapter
	})

	// One turn: its steps run one after another.
	cid := c.newConversation()
	first := c.send(cid, "echo once")
	eventuallyTrue(t, time.Minute, "the first turn's call at the specialist", func() bool { return slow.started.Load() == 1 })
	if got := rec.calls(); !slices.Equal(got, []int{1}) {
		t.Fatalf("one turn running: set %v, want [1] (one processor from the start)", got)
	}

	// A second turn whose call is held too: two invoke steps at once.
	cid2 := c.newConversation()
	second := c.send(cid2, "echo twice")
	eventuallyTrue(t, time.Minute, "the second turn's call at the specialist", func() bool { return slow.started.Load() == 2 })
	if n := adapter.Procs(); n != 2 {
		t.Errorf("two steps at once: Procs() = %d, want 2; set %v", n, rec.calls())
	}
	close(slow.hold)
	for _, tt := range []struct{ cid, tid string }{{cid, first}, {cid2, second}} {
		if v := c.wait(tt.cid, tt.tid); v.Status != "succeeded" {
			t.Fatalf("turn %s = %s %q, want succeeded", tt.tid, v.Status, v.Reply)
		}
	}
	eventuallyTrue(t, time.Minute, "one processor again once the steps no longer overlap", func() bool { return adapter.Procs() == 1 })
	if got := rec.calls(); !slices.Equal(got, []int{1, 2, 1}) {
		t.Errorf("set %v, want [1 2 1]", got)
	}
}
