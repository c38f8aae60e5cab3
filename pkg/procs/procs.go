// Package procs sets how many processors run the local stack's Go code
// (GOMAXPROCS) by how many of its steps overlap: one while steps run one
// at a time, every processor as soon as two overlap, and one again once
// they have run one at a time for a while.
//
// Why: on a virtual machine a goroutine woken on another processor costs
// a wake-up of another vCPU. A turn at a time is a chain of short waits
// (each Valkey round trip, each model and A2A call), and with two
// processors each wait ends with such a wake-up: a PING to a Valkey server
// 100 µs after the last took 103–112 µs with GOMAXPROCS=2 and 46–49 µs
// with 1 on the 2-vCPU host of docs/benchmarks.md
// (BenchmarkRoundTripAfterIdle). Under load the
// processors are busy and there is nothing to wake, while the work needs
// them all. A Lambda function below 1,769 MB has one vCPU, so one
// processor at low load is also how the functions run on AWS.
//
// It is for a process that runs the whole stack (clientagent dev); it
// changes nothing while its Adapter is not used.
package procs

import (
	"runtime"
	"sync"
	"time"
)

// DefaultQuiet is how long the steps must have run one at a time before
// the Adapter goes back to one processor.
const DefaultQuiet = 300 * time.Millisecond

// FromEnv is the Adapter of a process that runs the whole stack, nil when
// the environment fixes the processors (GOMAXPROCS is set).
func FromEnv(getenv func(string) string) *Adapter {
	if getenv("GOMAXPROCS") != "" {
		return nil
	}
	return New(Options{})
}

// Options configures an Adapter. Every field is optional.
type Options struct {
	// Max is the processors used when steps overlap (default
	// runtime.NumCPU()).
	Max int
	// Quiet is DefaultQuiet when zero.
	Quiet time.Duration
	// Set sets the number of processors and returns the previous one
	// (default runtime.GOMAXPROCS; tests record the calls instead).
	Set func(n int) int
}

// Adapter counts the steps that run and sets the processors by it. Its
// methods may be called from any goroutine.
type Adapter struct {
	max   int
	quiet time.Duration
	set   func(int) int

	mu     sync.Mutex
	cur    int
	busy   int // steps running now
	peak   int // the most at once since the last check
	timer  *time.Timer
	closed bool
}

// New returns an Adapter that has set one processor (none is set on a
// machine with one CPU).
func New(o Options) *Adapter {
	a := &Adapter{max: o.Max, quiet: o.Quiet, set: o.Set}
	if a.max <= 0 {
		a.max = runtime.NumCPU()
	}
	if a.quiet <= 0 {
		a.quiet = DefaultQuiet
	}
	if a.set == nil {
		a.set = runtime.GOMAXPROCS
	}
	a.cur = a.max
	if a.max > 1 {
		a.set(1)
		a.cur = 1
	}
	return a
}

// Procs is the number of processors the Adapter has set.
func (a *Adapter) Procs() int {
	if a == nil {
		return runtime.GOMAXPROCS(0)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cur
}

// Enter tells that a step starts; the step calls the returned function
// when it ends. A step that overlaps another gives the stack every
// processor at once.
func (a *Adapter) Enter() (leave func()) {
	a.mu.Lock()
	a.busy++
	a.peak = max(a.peak, a.busy)
	if a.busy > 1 && a.cur < a.max && !a.closed {
		a.set(a.max)
		a.cur = a.max
		a.timer = time.AfterFunc(a.quiet, a.check)
	}
	a.mu.Unlock()
	return a.leave
}

func (a *Adapter) leave() {
	a.mu.Lock()
	a.busy--
	a.mu.Unlock()
}

// check runs every Quiet while the stack has every processor: when no two
// steps overlapped since the last check, it goes back to one.
func (a *Adapter) check() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed || a.cur == 1 {
		return
	}
	if a.peak <= 1 {
		a.set(1)
		a.cur = 1
		a.timer = nil
		return
	}
	a.peak = a.busy
	a.timer.Reset(a.quiet)
}

// Close gives the process every processor back and stops adapting. A nil
// Adapter has nothing to close.
func (a *Adapter) Close() {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	a.closed = true
	if a.timer != nil {
		a.timer.Stop()
	}
	if a.cur != a.max {
		a.set(a.max)
		a.cur = a.max
	}
}
