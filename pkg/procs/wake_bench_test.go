package procs

import (
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// BenchmarkRoundTripAfterIdle is the round trip a turn's step makes: a
// Valkey PING after the process had nothing to do for a moment (gap), as
// between the waits of a turn. Run it with GOMAXPROCS=1 and 2 to see what
// the wake-up of another processor costs on a host (docs/benchmarks.md):
//
//	VALKEY_URL=redis://127.0.0.1:6379/0 GOMAXPROCS=2 go test -run '^$' -bench RoundTripAfterIdle ./pkg/procs/
func BenchmarkRoundTripAfterIdle(b *testing.B) {
	url := os.Getenv("VALKEY_URL")
	if url == "" {
		b.Skip("VALKEY_URL is not set: this benchmark needs a Valkey or Redis server")
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		b.Fatal(err)
	}
	c := redis.NewClient(opts)
	b.Cleanup(func() { c.Close() })
	for _, gap := range []time.Duration{0, 100 * time.Microsecond} {
		b.Run("gap="+gap.String(), func(b *testing.B) {
			var rt time.Duration
			for b.Loop() {
				if gap > 0 {
					time.Sleep(gap)
				}
				start := time.Now()
				if err := c.Ping(b.Context()).Err(); err != nil {
					b.Fatal(err)
				}
				rt += time.Since(start)
			}
			b.ReportMetric(float64(rt.Nanoseconds())/float64(b.N)/1000, "µs/ping")
		})
	}
}
