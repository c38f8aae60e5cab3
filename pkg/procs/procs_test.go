package procs

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// setter records what an Adapter sets instead of changing the runtime,
// and counts the waits for a processor the test says there were.
type setter struct {
	mu    sync.Mutex
	calls []int
	cur   int
	waits atomic.Uint64
}

func (s *setter) set(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.cur
	s.cur = n
	s.calls = append(s.calls, n)
	return prev
}

func (s *setter) got() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// newAdapter returns an Adapter over a recording setter whose timer never
// fires by itself within a test: the tests call check.
func newAdapter(t *testing.T, max int) (*Adapter, *setter) {
	t.Helper()
	s := &setter{cur: max}
	a := New(Options{Max: max, Quiet: time.Hour, Set: s.set, Waits: s.waits.Load})
	t.Cleanup(a.Close)
	return a, s
}

func TestFromEnvLeavesASetGOMAXPROCSAlone(t *testing.T) {
	t.Parallel()
	if a := FromEnv(func(k string) string { return map[string]string{"GOMAXPROCS": "2"}[k] }); a != nil {
		a.Close()
		t.Error("FromEnv with GOMAXPROCS=2 returned an Adapter, want nil")
	}
	var none *Adapter
	none.Close() // a nil Adapter closes as nothing
}

func TestStartsWithOneProcessor(t *testing.T) {
	t.Parallel()
	a, s := newAdapter(t, 4)
	if got := s.got(); !slices.Equal(got, []int{1}) || a.Procs() != 1 {
		t.Errorf("New sets %v, Procs() = %d; want [1] and 1", got, a.Procs())
	}
}

func TestOneStepAtATimeKeepsOneProcessor(t *testing.T) {
	t.Parallel()
	a, s := newAdapter(t, 2)
	for range 100 {
		a.Enter()()
	}
	a.tick()
	if got := s.got(); !slices.Equal(got, []int{1}) {
		t.Errorf("sets %v after steps one at a time, want only the first [1]", got)
	}
}

func TestOverlappingStepsGetEveryProcessorAtOnce(t *testing.T) {
	t.Parallel()
	a, s := newAdapter(t, 2)
	leave := a.Enter()
	if a.Procs() != 1 {
		t.Fatalf("one step: Procs() = %d, want 1", a.Procs())
	}
	leave2 := a.Enter()
	if got := s.got(); !slices.Equal(got, []int{1, 2}) || a.Procs() != 2 {
		t.Errorf("two steps at once: sets %v, Procs() = %d; want [1 2] and 2", got, a.Procs())
	}
	leave2()
	leave()
}

func TestGoesBackToOneAfterAQuietWhile(t *testing.T) {
	t.Parallel()
	a, s := newAdapter(t, 2)
	l1, l2 := a.Enter(), a.Enter()
	a.tick() // the overlap is in this window
	if a.Procs() != 2 {
		t.Fatalf("after the window of the overlap: Procs() = %d, want 2", a.Procs())
	}
	l2()
	a.tick() // the window began with both running
	if a.Procs() != 2 {
		t.Fatalf("after the window the second step ended in: Procs() = %d, want 2", a.Procs())
	}
	a.tick() // one step ran through this window: still busy, no overlap
	if a.Procs() != 1 {
		t.Errorf("after a window without overlap: Procs() = %d, want 1", a.Procs())
	}
	l1()
	if got := s.got(); !slices.Equal(got, []int{1, 2, 1}) {
		t.Errorf("sets %v, want [1 2 1]", got)
	}
}

func TestStepsStillOverlappingKeepEveryProcessor(t *testing.T) {
	t.Parallel()
	a, _ := newAdapter(t, 2)
	l1, l2 := a.Enter(), a.Enter()
	defer l1()
	defer l2()
	for range 3 {
		a.tick() // no new step entered, but two still run
		if a.Procs() != 2 {
			t.Fatalf("two steps running through the window: Procs() = %d, want 2", a.Procs())
		}
	}
}

// Goroutines that keep waiting for the one processor (many pages'
// streams, with one turn running) give the stack every processor, and it
// stays so while they would have waited.
func TestWaitsForTheProcessorGetEveryProcessor(t *testing.T) {
	t.Parallel()
	a, s := newAdapter(t, 2)
	s.waits.Add(raiseWaits - 1)
	a.tick()
	if a.Procs() != 1 {
		t.Fatalf("%d waits in a period: Procs() = %d, want 1", raiseWaits-1, a.Procs())
	}
	s.waits.Add(raiseWaits)
	a.tick()
	if a.Procs() != 2 {
		t.Fatalf("%d waits in a period: Procs() = %d, want 2", raiseWaits, a.Procs())
	}
	s.waits.Add(lowerWaits)
	a.tick()
	if a.Procs() != 2 {
		t.Errorf("%d waits on every processor: Procs() = %d, want 2 still", lowerWaits, a.Procs())
	}
	s.waits.Add(lowerWaits - 1)
	a.tick()
	if a.Procs() != 1 {
		t.Errorf("%d waits on every processor and no steps overlapping: Procs() = %d, want 1", lowerWaits-1, a.Procs())
	}
	if got := s.got(); !slices.Equal(got, []int{1, 2, 1}) {
		t.Errorf("sets %v, want [1 2 1]", got)
	}
}

func TestCloseGivesEveryProcessorBack(t *testing.T) {
	t.Parallel()
	a, s := newAdapter(t, 2)
	a.Close()
	a.Enter()() // nothing changes after Close
	a.Enter()
	a.Enter()
	if got := s.got(); !slices.Equal(got, []int{1, 2}) || a.Procs() != 2 {
		t.Errorf("sets %v, Procs() = %d after Close; want [1 2] and 2", got, a.Procs())
	}
}

func TestOneCPUChangesNothing(t *testing.T) {
	t.Parallel()
	a, s := newAdapter(t, 1)
	a.Enter()
	a.Enter()
	a.tick()
	a.Close()
	if got := s.got(); len(got) != 0 {
		t.Errorf("sets %v on one CPU, want nothing", got)
	}
}

// The timer does its work by itself: with a short period the adapter goes
// back to one processor once the overlap is over.
func TestTimerGoesBackToOne(t *testing.T) {
	t.Parallel()
	s := &setter{cur: 2}
	a := New(Options{Max: 2, Quiet: 5 * time.Millisecond, Set: s.set, Waits: s.waits.Load})
	defer a.Close()
	l1, l2 := a.Enter(), a.Enter()
	l2()
	l1()
	deadline := time.Now().Add(30 * time.Second)
	for a.Procs() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("Procs() = %d 30 s after the overlap ended, want 1", a.Procs())
		}
		time.Sleep(time.Millisecond)
	}
	if got := s.got(); !slices.Equal(got, []int{1, 2, 1}) {
		t.Errorf("sets %v, want [1 2 1]", got)
	}
}
