package sfnlocal

import (
	"sync"
	"time"
)

// workerIdle is how long a worker waits for its next function.
const workerIdle = 30 * time.Second

// workers runs the engine's goroutines — executions, Map iterations and
// task invocations — on goroutines kept for the next one. A step's call
// chain (the handler, the store's client, its encoders) grows a new
// goroutine's stack several times over, each growth a copy of the whole
// stack: 7% of the local stack's CPU at c=20. A kept goroutine's stack
// has already grown. A worker idle for idle ends, and every idle worker
// ends at stop; there is no limit on how many run at once (each function
// runs where a goroutine of its own would have).
type workers struct {
	work     chan func()
	idle     time.Duration
	done     chan struct{}
	stopOnce sync.Once
}

func newWorkers(idle time.Duration) *workers {
	return &workers{work: make(chan func()), idle: idle, done: make(chan struct{})}
}

// Go runs f on an idle worker, or on a new one when none is idle.
func (w *workers) Go(f func()) {
	select {
	case w.work <- f:
	default:
		go w.run(f)
	}
}

// stop ends the idle workers, and each busy one when its function returns.
func (w *workers) stop() { w.stopOnce.Do(func() { close(w.done) }) }

func (w *workers) run(f func()) {
	t := time.NewTimer(w.idle)
	defer t.Stop()
	for {
		f()
		f = nil // not kept alive while idle
		t.Reset(w.idle)
		select {
		case f = <-w.work:
		case <-t.C:
			return
		case <-w.done:
			return
		}
	}
}
