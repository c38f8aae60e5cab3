package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/api"
	"github.com/clientagent/clientagent/pkg/auth"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey"
)

// scriptedLog is an event log whose reads return the batches given, each
// after its delay, then nothing until the reader's wait ends.
type scriptedLog struct {
	mu      sync.Mutex
	batches []scriptedBatch
}

type scriptedBatch struct {
	after time.Duration
	evs   []record.Event
}

func (l *scriptedLog) Emit(context.Context, string, ...record.Event) error { return nil }

func (l *scriptedLog) Events(ctx context.Context, _, _ string, _ int, block time.Duration) ([]record.Event, error) {
	l.mu.Lock()
	if len(l.batches) == 0 {
		l.mu.Unlock()
		select {
		case <-time.After(block):
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	b := l.batches[0]
	if b.after > block {
		l.batches[0].after -= block
		l.mu.Unlock()
		time.Sleep(block)
		return nil, nil
	}
	l.batches = l.batches[1:]
	l.mu.Unlock()
	time.Sleep(b.after)
	return b.evs, nil
}

// flushes records what a response had written at each of its flushes.
type flushes struct {
	*httptest.ResponseRecorder
	mu  sync.Mutex
	out []string
}

func (f *flushes) Flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.out = append(f.out, f.Body.String())
}

// The events of a step come a fraction of a millisecond apart: an event
// stream sends the ones that come within a moment of its last flush
// together, at most that moment later, and a turn's end at once.
func TestEventStreamSendsAStepsEventsTogether(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	store := valkey.New(rdb, valkey.Options{})
	ctx := t.Context()
	if err := store.Create(ctx, record.Meta{ID: "c1", Owner: "dev", CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if err := store.SaveTurn(ctx, "c1", &record.Turn{ID: "t1", StartedAt: time.Now().UTC(), Status: record.StatusRunning}); err != nil {
		t.Fatal(err)
	}
	ev := func(id, typ string) record.Event {
		return record.Event{ID: id, Type: typ, TurnID: "t1", Raw: []byte(`{"type":"` + typ + `"}`)}
	}
	log := &scriptedLog{batches: []scriptedBatch{
		{0, []record.Event{ev("1-1", "turn.started")}},                // the first goes at once
		{time.Millisecond, []record.Event{ev("1-2", "step.started")}}, // held…
		{time.Millisecond, []record.Event{ev("1-3", "step.ended")}},   // …with this one
		{time.Second, []record.Event{ev("1-4", "artifact")}},          // long after: at once
		{time.Millisecond, []record.Event{ev("1-5", "turn.ended")}},   // a turn's end: at once
	}}
	local := &auth.Local{Key: []byte("0123456789abcdef0123456789abcdef")}
	// A batch far longer than the script's gaps, so a busy machine does
	// not split the pair it holds.
	s := &api.Server{Store: store, Events: log, Auth: local, EventsFor: 10 * time.Second, LiveBatch: 300 * time.Millisecond}
	tok, _ := local.Mint("dev")
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/v1/conversations/c1/events?turn=t1&last_event_id=1-0", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	w := &flushes{ResponseRecorder: httptest.NewRecorder()}
	start := time.Now()
	s.Handler().ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("GET events = %d %s", w.Code, w.Body)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the stream took %v, want it to end at turn.ended", took)
	}
	var sent [][]string // the event ids each flush sent
	prev := ""
	for _, out := range w.out {
		var ids []string
		for _, line := range strings.Split(strings.TrimPrefix(out, prev), "\n") {
			if id, ok := strings.CutPrefix(line, "id: "); ok {
				ids = append(ids, id)
			}
		}
		if len(ids) > 0 {
			sent = append(sent, ids)
		}
		prev = out
	}
	want := [][]string{{"1-1"}, {"1-2", "1-3"}, {"1-4"}, {"1-5"}}
	if len(sent) != len(want) || strings.Join(flat(sent), ",") != strings.Join(flat(want), ",") {
		t.Fatalf("flushes sent %v, want %v", sent, want)
	}
	for i := range want {
		if strings.Join(sent[i], ",") != strings.Join(want[i], ",") {
			t.Errorf("flush %d sent %v, want %v", i, sent[i], want[i])
		}
	}
}

func flat(xs [][]string) []string {
	var out []string
	for _, x := range xs {
		out = append(out, x...)
	}
	return out
}
