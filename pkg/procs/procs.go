// Package procs sets how many processors run the local stack's Go code
// (GOMAXPROCS) by how busy it is: one while its steps run one at a time,
// every processor as soon as two overlap or goroutines keep waiting for
// the one (many pages' event streams beside one turn, say), and one again
// after a period with neither.
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

// DefaultQuiet is how often the Adapter looks again at how busy the stack
// was: once a period has passed without two steps overlapping and without
// goroutines waiting for a processor, it goes back to one.
const DefaultQuiet = 300 * time.Millisecond

// Goroutines ready to run that waited longWait or more for a processor,
// per period: from raiseWaits on, one processor is too few, whatever the
// steps do (many pages' event streams, say); below lowerWaits, every
// processor is more than the stack needs.
const (
	raiseWaits = 20
	lowerWaits = 5
)

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
	// Waits counts, since the process started, the goroutines ready to run
	// that waited a millisecond or more for a processor (default: the
	// runtime's scheduling latencies; tests count their own).
	Waits func() uint64
}

// Adapter counts the steps that run and sets the processors by it. Its
// methods may be called from any goroutine.
type Adapter struct {
	max   int
	quiet time.Duration
	set   func(int) int
	waits func() uint64

	mu     sync.Mutex
	cur    int
	busy   int    // steps running now
	peak   int    // the most at once since the last tick
	waited uint64 // waits() at the last tick
	timer  *time.Timer
	closed bool
}

// New returns an Adapter that has set one processor and looks again every
// Quiet (nothing is set, nor looked at, on a machine with one CPU).
func New(o Options) *Adapter {
	a := &Adapter{max: o.Max, quiet: o.Quiet, set: o.Set, waits: o.Waits}
	if a.max <= 0 {
		a.max = runtime.NumCPU()
	}
	if a.quiet <= 0 {
		a.quiet = DefaultQuiet
	}
	if a.set == nil {
		a.set = runtime.GOMAXPROCS
	}
	if a.waits == nil {
		a.waits = schedWaits
	}
	a.cur = a.max
	if a.max > 1 {
		a.set(1)
		a.cur = 1
		a.waited = a.waits()
		a.timer = time.AfterFunc(a.quiet, a.tick)
	}
	return a
}

// Procs is the number of processors the Adapter has set.
func (a *Adapter) Procs() int {
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
	}
	a.mu.Unlock()
	return a.leave
}

func (a *Adapter) leave() {
	a.mu.Lock()
	a.busy--
	a.mu.Unlock()
}

// tick runs every Quiet. On one processor, goroutines that kept waiting
// for it give the stack every processor; on every processor, a period
// without overlapping steps and without such waits gives it one again.
func (a *Adapter) tick() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed || a.max <= 1 {
		return
	}
	w := a.waits()
	waited := w - a.waited
	a.waited = w
	switch {
	case a.cur == 1 && waited >= raiseWaits:
		a.set(a.max)
		a.cur = a.max
	case a.cur == a.max && a.peak <= 1 && waited < lowerWaits:
		a.set(1)
		a.cur = 1
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
