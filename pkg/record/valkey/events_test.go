package valkey_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/valkeytest"
)

// Issue 15: a conversation's event log keeps its events in order, each
// with an id; a reader resumes after an id and waits for the next event.
func TestEventLog(t *testing.T) {
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		s := valkey.New(c, valkey.Options{})
		ctx := t.Context()
		c1, other := valkeytest.ID(t, "c"), valkeytest.ID(t, "c")
		at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
		if err := s.Emit(ctx, c1,
			record.Event{Type: record.EventTurnStarted, TurnID: "t1", At: at, Data: map[string]any{"text": "hi"}},
			record.Event{Type: record.EventLLMDelta, TurnID: "t1", At: at, Data: map[string]any{"text": "Hel", "offset": 0}},
		); err != nil {
			t.Fatal(err)
		}
		evs, err := s.Events(ctx, c1, "", 10, 0)
		if err != nil || len(evs) != 2 {
			t.Fatalf("Events = %v, %v; want 2 events", evs, err)
		}
		if evs[0].Type != record.EventTurnStarted || evs[0].Fields()["text"] != "hi" || evs[1].Fields()["offset"] != float64(0) || evs[0].ID == "" || evs[0].ID >= evs[1].ID || !evs[1].At.Equal(at) {
			t.Errorf("events = %+v", evs)
		}
		if more, err := s.Events(ctx, c1, evs[1].ID, 10, 0); err != nil || len(more) != 0 {
			t.Errorf("Events after the last = %v, %v; want none", more, err)
		}
		done := make(chan []record.Event)
		go func() {
			more, _ := s.Events(ctx, c1, evs[1].ID, 10, 5*time.Second)
			done <- more
		}()
		time.Sleep(50 * time.Millisecond)
		if err := s.Emit(ctx, c1, record.Event{Type: record.EventTurnEnded, TurnID: "t1", At: at}); err != nil {
			t.Fatal(err)
		}
		select {
		case more := <-done:
			if len(more) != 1 || more[0].Type != record.EventTurnEnded {
				t.Errorf("a waiting reader got %+v, want turn.ended", more)
			}
		case <-time.After(4 * time.Second):
			t.Fatal("a waiting reader did not get the new event")
		}
		if evs, err := s.Events(ctx, other, "", 10, 0); err != nil || len(evs) != 0 {
			t.Errorf("another conversation's log = %v, %v; want empty", evs, err)
		}
	})
}

// Issue 25: a blocked message is forgotten where the conversation keeps it
// besides its turn: the title it gave (only that one) and its turn's
// turn.started; the other events stay.
func TestForgetText(t *testing.T) {
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		s := valkey.New(c, valkey.Options{})
		ctx := t.Context()
		at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
		for _, tc := range []struct {
			name, title, want string
		}{
			{"titled by the message", "", record.BlockedText},
			{"titled before", "My title", "My title"},
		} {
			cid := valkeytest.ID(t, "c")
			if err := s.Create(ctx, record.Meta{ID: cid, Owner: "u", CreatedAt: at, UpdatedAt: at, Title: tc.title}); err != nil {
				t.Fatal(err)
			}
			const text = "draw the word forbidden"
			tr := &record.Turn{ID: "t1", StartedAt: at, UpdatedAt: at, Status: record.StatusRunning, Text: text,
				Events: []record.Event{{Type: record.EventTurnStarted, TurnID: "t1", At: at, Data: map[string]any{"text": text}}}}
			if err := s.SaveTurn(ctx, cid, tr); err != nil {
				t.Fatal(err)
			}
			if err := s.Emit(ctx, cid, record.Event{Type: record.EventTurnStarted, TurnID: "t0", At: at, Data: map[string]any{"text": "other"}},
				record.Event{Type: record.EventStepStarted, TurnID: "t1", At: at, Data: map[string]any{"tool": "llm"}}); err != nil {
				t.Fatal(err)
			}
			for range 2 { // idempotent
				if err := s.ForgetText(ctx, cid, "t1", text); err != nil {
					t.Fatal(err)
				}
			}
			conv, _, err := s.Load(ctx, cid, "")
			if err != nil {
				t.Fatal(err)
			}
			if conv.Meta.Title != tc.want {
				t.Errorf("%s: title = %q, want %q", tc.name, conv.Meta.Title, tc.want)
			}
			evs, err := s.Events(ctx, cid, "", 10, 0)
			if err != nil {
				t.Fatal(err)
			}
			var kept []string
			for _, e := range evs {
				kept = append(kept, e.TurnID+":"+e.Type)
			}
			if got := strings.Join(kept, ","); got != "t0:turn.started,t1:step.started" {
				t.Errorf("%s: events = %s, want the blocked turn's turn.started gone and the rest kept", tc.name, got)
			}
		}
	})
}

// Issue 29: readers that wait hold no connection of the server's (no
// blocked XREAD, no connection each), leave at once when their context
// ends, and are woken by the event writes of the step scripts as well as
// by Emit's pipeline.
func TestWaitingReadersHoldNoConnection(t *testing.T) {
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		s := valkey.New(c, valkey.Options{})
		ctx := t.Context()
		at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
		const n = 20
		rctx, cancel := context.WithCancel(ctx)
		defer cancel()
		cids := make([]string, n)
		done := make(chan error, n)
		for i := range cids {
			cids[i] = valkeytest.ID(t, "c")
			go func() {
				_, err := s.Events(rctx, cids[i], "", 10, time.Minute)
				done <- err
			}()
		}
		// All subscribed (what the server says), none blocked on the server.
		waitFor(t, 10*time.Second, "20 readers subscribed", func() bool {
			res, err := c.PubSubNumSub(ctx, eventsKeys(cids)...).Result()
			if err != nil {
				return false
			}
			for _, k := range eventsKeys(cids) {
				if res[k] != 1 {
					return false
				}
			}
			return true
		})
		// Their first reads done, the waiting readers hold at most the
		// Pub/Sub connection.
		waitFor(t, 5*time.Second, "at most one connection in use while 20 readers wait", func() bool {
			st := c.PoolStats()
			return st.TotalConns-st.IdleConns <= 1
		})
		if b := blockedClients(t, c); b != 0 {
			t.Errorf("%d clients blocked on the server while readers wait, want 0", b)
		}
		cancel()
		deadline := time.After(2 * time.Second)
		for range n {
			select {
			case <-done:
			case <-deadline:
				t.Fatal("readers did not leave within 2 s of their context's end")
			}
		}
		waitFor(t, 10*time.Second, "the channels unsubscribed", func() bool {
			res, err := c.PubSubNumSub(ctx, eventsKeys(cids)...).Result()
			if err != nil {
				return false
			}
			for _, v := range res {
				if v != 0 {
					return false
				}
			}
			return true
		})

		// A step's script (PutOutcome with events) wakes a waiting reader.
		cid := valkeytest.ID(t, "c")
		if err := s.Create(ctx, record.Meta{ID: cid, Owner: "u", CreatedAt: at, UpdatedAt: at}); err != nil {
			t.Fatal(err)
		}
		got := make(chan []record.Event, 1)
		go func() {
			evs, _ := s.Events(ctx, cid, "", 10, time.Minute)
			got <- evs
		}()
		waitFor(t, 10*time.Second, "the reader subscribed", func() bool {
			res, err := c.PubSubNumSub(ctx, eventsKeys([]string{cid})...).Result()
			return err == nil && res[eventsKeys([]string{cid})[0]] == 1
		})
		if _, err := s.PutOutcome(ctx, cid, "t1", record.CallOutcome{CallID: "k1", Events: []record.Event{{Type: record.EventStepEnded, TurnID: "t1", At: at}}}); err != nil {
			t.Fatal(err)
		}
		select {
		case evs := <-got:
			if len(evs) != 1 || evs[0].Type != record.EventStepEnded {
				t.Errorf("woken reader got %+v, want the outcome's step.ended", evs)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a write by a step's script did not wake the waiting reader")
		}
	})
}

func eventsKeys(cids []string) []string {
	out := make([]string, len(cids))
	for i, c := range cids {
		out[i] = "conv:{" + c + "}:events"
	}
	return out
}

// blockedClients reads INFO clients (0 where the server has none, as the
// embedded one).
func blockedClients(t *testing.T, c redis.UniversalClient) int {
	t.Helper()
	v, _ := infoClients(t, c, "blocked_clients")
	return v
}

func infoClients(t *testing.T, c redis.UniversalClient, field string) (int, bool) {
	t.Helper()
	info, err := c.Info(t.Context(), "clients").Result()
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			n, err := strconv.Atoi(v)
			return n, err == nil
		}
	}
	return 0, false
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A stream reads its log one Events call per batch of events: the channel
// of its wake-ups stays subscribed between the calls (lingerFor), so the
// next call waits for no SUBSCRIBE, and is unsubscribed once no reader
// came back.
func TestNextReadFindsItsChannelSubscribed(t *testing.T) {
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		s := valkey.New(c, valkey.Options{})
		ctx := t.Context()
		cid := valkeytest.ID(t, "c")
		key := eventsKeys([]string{cid})[0]
		numsub := func() int64 {
			res, err := c.PubSubNumSub(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			return res[key]
		}
		at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
		after := ""
		for i := range 3 {
			got := make(chan []record.Event, 1)
			go func() {
				evs, _ := s.Events(ctx, cid, after, 10, time.Minute)
				got <- evs
			}()
			waitFor(t, 10*time.Second, "the reader subscribed", func() bool { return numsub() == 1 })
			if err := s.Emit(ctx, cid, record.Event{Type: record.EventStepStarted, TurnID: "t1", At: at}); err != nil {
				t.Fatal(err)
			}
			var evs []record.Event
			select {
			case evs = <-got:
			case <-time.After(10 * time.Second):
				t.Fatalf("read %d: not woken by the event", i+1)
			}
			if len(evs) != 1 {
				t.Fatalf("read %d = %d events, want the one emitted", i+1, len(evs))
			}
			after = evs[0].ID
			if n := numsub(); n != 1 {
				t.Fatalf("after read %d: %d subscribers of the log's channel, want it still subscribed for the next read", i+1, n)
			}
		}
		waitFor(t, 10*time.Second, "the channel unsubscribed once no reader came back", func() bool { return numsub() == 0 })
	})
}

// xreads counts the XREADs of one key.
type xreads struct {
	key string
	n   atomic.Int64
}

func (x *xreads) DialHook(next redis.DialHook) redis.DialHook { return next }
func (x *xreads) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if a := cmd.Args(); strings.EqualFold(cmd.Name(), "xread") && slices.Contains(a, any(x.key)) {
			x.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (x *xreads) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A stream reads its log once per batch of events: coming back for the
// next batch, it does not read again to find nothing new when nothing was
// published since its last read, and still gets every event.
func TestStreamReadsItsLogOncePerBatch(t *testing.T) {
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		cid := valkeytest.ID(t, "c")
		x := &xreads{key: eventsKeys([]string{cid})[0]}
		c.AddHook(x)
		s := valkey.New(c, valkey.Options{})
		ctx := t.Context()
		got := make(chan record.Event, 10)
		go func() {
			after := ""
			for ctx.Err() == nil {
				evs, err := s.Events(ctx, cid, after, 10, time.Minute)
				if err != nil {
					return
				}
				for _, e := range evs {
					after = e.ID
					got <- e
				}
			}
		}()
		const batches = 6
		at := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
		for i := range batches {
			waitFor(t, 10*time.Second, "the reader waiting", func() bool {
				n, _ := c.PubSubNumSub(ctx, x.key).Result()
				return n[x.key] == 1
			})
			if err := s.Emit(ctx, cid, record.Event{Type: record.EventStepStarted, TurnID: "t1", At: at.Add(time.Duration(i) * time.Second)}); err != nil {
				t.Fatal(err)
			}
			select {
			case e := <-got:
				if !e.At.Equal(at.Add(time.Duration(i) * time.Second)) {
					t.Fatalf("batch %d: got the event of %v", i, e.At)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("batch %d: the event never reached the stream", i)
			}
		}
		// The first read finds the log empty; then one read per batch.
		if n := x.n.Load(); n > batches+1 {
			t.Errorf("%d XREADs for %d batches, want at most %d", n, batches, batches+1)
		}
	})
}
