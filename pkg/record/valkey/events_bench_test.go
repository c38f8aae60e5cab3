package valkey_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey"
)

// BenchmarkReadEvents reads a turn's 40 events from the log, as the page's
// stream does after a wake-up.
func BenchmarkReadEvents(b *testing.B) {
	mr := miniredis.RunT(b)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer c.Close()
	s := valkey.New(c, valkey.Options{})
	at := time.Now()
	var evs []record.Event
	for i := range 40 {
		evs = append(evs, record.Event{Type: record.EventStepEnded, TurnID: "t1", At: at, Data: map[string]any{
			"tool": "create_svg_artifact", "call_id": "call_t1_1", "status": "succeeded", "started_at": at.Format(time.RFC3339Nano),
			"ended_at": at.Format(time.RFC3339Nano), "duration_ms": i, "llm_call": 1}})
	}
	if err := s.Emit(b.Context(), "c1", evs...); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		got, err := s.Events(b.Context(), "c1", "", 100, 0)
		if err != nil || len(got) != 40 {
			b.Fatalf("Events() = %d, %v", len(got), err)
		}
	}
}
