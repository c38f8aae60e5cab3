package gopool

import (
	"bytes"
	"runtime"
	"sync"
	"testing"
	"time"
)

// goroutineID is the running goroutine's number, from its stack header.
func goroutineID() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	id, _, _ := bytes.Cut(bytes.TrimPrefix(b, []byte("goroutine ")), []byte(" "))
	return string(id)
}

// The pool's goroutines are kept for the next function: functions run
// one after another run on the same few goroutines, whose stacks have
// already grown.
func TestTheNextFunctionRunsOnAKeptGoroutine(t *testing.T) {
	t.Parallel()
	w := New(time.Minute)
	defer w.Stop()
	const runs = 20
	seen := map[string]bool{}
	for range runs {
		ran := make(chan string)
		w.Go(func() { ran <- goroutineID() })
		seen[<-ran] = true
		time.Sleep(time.Millisecond) // the worker is back waiting
	}
	if len(seen) > runs/2 {
		t.Errorf("%d functions run one after another ran on %d goroutines, want a few", runs, len(seen))
	}
}

// There is no limit: functions that wait for each other all run at once.
func TestEveryFunctionRunsAtOnce(t *testing.T) {
	t.Parallel()
	w := New(time.Minute)
	defer w.Stop()
	const n = 50
	var all sync.WaitGroup
	all.Add(n)
	release := make(chan struct{})
	var done sync.WaitGroup
	for range n {
		done.Add(1)
		w.Go(func() {
			defer done.Done()
			all.Done()
			<-release
		})
	}
	all.Wait() // every function started while the others still wait
	close(release)
	done.Wait()
}

// Idle workers end after their idle time, and at stop.
func TestWorkersEndWhenIdleAndAtStop(t *testing.T) {
	before := runtime.NumGoroutine()
	ended := func(w *Pool, within time.Duration) bool {
		for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if runtime.NumGoroutine() <= before {
				return true
			}
		}
		return false
	}
	start := func(w *Pool) {
		var wg sync.WaitGroup
		for range 10 {
			wg.Add(1)
			w.Go(wg.Done)
		}
		wg.Wait()
	}
	idle := New(20 * time.Millisecond)
	start(idle)
	if !ended(idle, 5*time.Second) {
		t.Errorf("%d goroutines 5s after the workers went idle for 20ms, want %d", runtime.NumGoroutine(), before)
	}
	kept := New(time.Hour)
	start(kept)
	kept.Stop()
	if !ended(kept, 5*time.Second) {
		t.Errorf("%d goroutines 5s after stop, want %d", runtime.NumGoroutine(), before)
	}
}

// deep uses about n KB of stack, as a step's call chain does.
//
//go:noinline
func deep(n int) byte {
	var pad [1024]byte
	pad[n%1024] = byte(n)
	if n == 0 {
		return pad[0]
	}
	return deep(n-1) + pad[n%1024]
}

// A function with a step's depth of stack (64 KB) on a new goroutine
// against on a kept one (a pool's).
func BenchmarkDeepFunction(b *testing.B) {
	run := func(b *testing.B, spawn func(func())) {
		done := make(chan struct{})
		for b.Loop() {
			spawn(func() { deep(64); done <- struct{}{} })
			<-done
		}
	}
	b.Run("goroutine", func(b *testing.B) { run(b, func(f func()) { go f() }) })
	b.Run("workers", func(b *testing.B) {
		w := New(time.Minute)
		defer w.Stop()
		run(b, w.Go)
	})
}
