// Package gopool runs functions on goroutines kept for the next one.
//
// A step's call chain (a handler, the store's client, its encoders, an
// A2A server's JSON) grows a new goroutine's stack several times over,
// each growth a copy of the whole stack: 7% of the local stack's CPU at
// c=20 when the engine started a goroutine per task, and 3% at c=1 for
// the goroutines that serve the demo specialists in process and tell the
// owner's list of a turn (docs/benchmarks.md). A kept goroutine's stack
// has already grown.
package gopool

import (
	"sync"
	"time"
)

// Idle is how long a shared worker (Go) waits for its next function.
const Idle = 30 * time.Second

// Pool runs functions on goroutines kept for the next one. A worker idle
// for the pool's idle time ends, and every idle worker ends at Stop;
// there is no limit on how many run at once (each function runs where a
// goroutine of its own would have).
type Pool struct {
	work     chan func()
	idle     time.Duration
	done     chan struct{}
	stopOnce sync.Once
}

// New returns a pool whose workers end after idle without work.
func New(idle time.Duration) *Pool {
	return &Pool{work: make(chan func()), idle: idle, done: make(chan struct{})}
}

// Go runs f on an idle worker, or on a new one when none is idle.
func (p *Pool) Go(f func()) {
	select {
	case p.work <- f:
	default:
		go p.run(f)
	}
}

// Stop ends the idle workers, and each busy one when its function returns.
func (p *Pool) Stop() { p.stopOnce.Do(func() { close(p.done) }) }

func (p *Pool) run(f func()) {
	t := time.NewTimer(p.idle)
	defer t.Stop()
	for {
		f()
		f = nil // not kept alive while idle
		t.Reset(p.idle)
		select {
		case f = <-p.work:
		case <-t.C:
			return
		case <-p.done:
			return
		}
	}
}

// shared is the process's pool for Go; it is never stopped.
var shared = New(Idle)

// Go runs f on the process's shared pool, whose idle workers end after
// Idle: for goroutines a request or a step starts and that go deep.
func Go(f func()) { shared.Go(f) }
