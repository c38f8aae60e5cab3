package procs

import (
	"runtime/metrics"
	"time"
)

// longWait is how long a goroutine ready to run may wait for a processor
// before the wait counts as the processor being short.
const longWait = time.Millisecond

// schedWaits returns how many times since the process started a goroutine
// ready to run waited longWait or more for a processor (the runtime's
// /sched/latencies:seconds histogram, from the first bucket that starts
// at longWait or later).
func schedWaits() uint64 {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	h := s[0].Value.Float64Histogram()
	var n uint64
	for i, c := range h.Counts {
		if h.Buckets[i] >= longWait.Seconds() {
			n += c
		}
	}
	return n
}
