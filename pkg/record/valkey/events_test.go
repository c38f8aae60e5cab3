package valkey_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
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
// by Emit.
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

// countXReads returns a new conversation id and the count of c's XREADs
// of its log.
func countXReads(t *testing.T, c redis.UniversalClient) (string, *xreads) {
	cid := valkeytest.ID(t, "c")
	x := &xreads{key: eventsKeys([]string{cid})[0]}
	c.AddHook(x)
	return cid, x
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
		cid, x := countXReads(t, c)
		s := valkey.New(c, valkey.Options{})
		ctx := t.Context()
		got := make(chan record.Event, 10)
		go streamAll(ctx, s, cid, "", got)
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
		// The first read finds the log empty; every batch after it comes
		// with its publication.
		if n := x.n.Load(); n > 1 {
			t.Errorf("%d XREADs for %d batches, want the first alone", n, batches)
		}
	})
}

// A stream that collects a step's events waits a few milliseconds for the
// ones that follow before it sends them (pkg/api's batch). Such a short
// wait that times out does not make its next call read the log: the next
// events still come with their publication.
func TestAStreamsShortWaitsKeepWhatThePublicationsTold(t *testing.T) {
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		cid, x := countXReads(t, c)
		s := valkey.New(c, valkey.Options{})
		ctx := t.Context()
		at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
		after := ""
		if evs, err := s.Events(ctx, cid, after, 10, time.Millisecond); err != nil || len(evs) != 0 {
			t.Fatalf("an empty log: %v, %v", evs, err)
		}
		const steps = 5
		for i := range steps {
			if err := s.Emit(ctx, cid, record.Event{Type: record.EventStepStarted, TurnID: "t1", At: at.Add(time.Duration(i) * time.Second)}); err != nil {
				t.Fatal(err)
			}
			evs, err := s.Events(ctx, cid, after, 10, 10*time.Second)
			if err != nil || len(evs) != 1 {
				t.Fatalf("step %d: %v, %v; want its event", i, evs, err)
			}
			after = evs[0].ID
			// The batch's end: nothing more within 2 ms.
			if evs, err := s.Events(ctx, cid, after, 10, 2*time.Millisecond); err != nil || len(evs) != 0 {
				t.Fatalf("step %d, the batch's wait: %v, %v; want nothing", i, evs, err)
			}
		}
		// One read when the stream began (the log was empty); each step's
		// event came with its publication, and no short wait read again.
		if n := x.n.Load(); n != 1 {
			t.Errorf("%d XREADs for %d steps whose waits for more timed out, want the first alone", n, steps)
		}
	})
}

// streamAll reads cid's log the way a stream does, one Events call per
// batch, sending every event it gets on got until ctx ends.
func streamAll(ctx context.Context, s *valkey.Store, cid, after string, got chan<- record.Event) {
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
}

// received is the next n events a stream sent on got, as "id raw" lines
// (logOf's form); the test fails when they do not come within 10 s.
func received(t *testing.T, got <-chan record.Event, n int) []string {
	t.Helper()
	var have []string
	for len(have) < n {
		select {
		case e := <-got:
			have = append(have, e.ID+" "+string(e.Raw))
		case <-time.After(10 * time.Second):
			t.Fatalf("the stream got %d of the %d events:\n%s", len(have), n, strings.Join(have, "\n"))
		}
	}
	return have
}

// logOf is cid's whole event log as "id raw" lines, read with XRANGE.
func logOf(t *testing.T, c redis.UniversalClient, cid string) []string {
	t.Helper()
	msgs, err := c.XRange(t.Context(), eventsKeys([]string{cid})[0], "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range msgs {
		out = append(out, m.ID+" "+m.Values["e"].(string))
	}
	return out
}

// A write's publication carries the events it appended, so a stream that
// has read its log to the end gets the next ones without reading it
// again. Writers racing on one conversation (each kind of write that
// appends events) still reach every stream as the log has them: the same
// ids, the same JSON, in the log's order, with no event twice.
func TestStreamsGetTheEventsFromThePublication(t *testing.T) {
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		cid, x := countXReads(t, c)
		s := valkey.New(c, valkey.Options{})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
		if err := s.Create(ctx, record.Meta{ID: cid, Owner: "u", CreatedAt: at, UpdatedAt: at}); err != nil {
			t.Fatal(err)
		}
		const streams = 3
		got := make([]chan record.Event, streams)
		for i := range got {
			got[i] = make(chan record.Event, 1000)
			go streamAll(ctx, s, cid, "", got[i])
		}
		waitFor(t, 10*time.Second, "the streams waiting", func() bool {
			n, _ := c.PubSubNumSub(ctx, x.key).Result()
			return n[x.key] == 1 && x.n.Load() >= 1
		})

		ev := func(typ string, i int) record.Event {
			return record.Event{Type: typ, TurnID: "t1", At: at.Add(time.Duration(i) * time.Millisecond), Data: map[string]any{"n": i, "text": "line one\nline two"}}
		}
		const rounds = 15
		var wg sync.WaitGroup
		for i := range rounds {
			wg.Go(func() {
				if err := s.Emit(ctx, cid, ev(record.EventStepStarted, i), ev(record.EventLLMDelta, i)); err != nil {
					t.Error(err)
				}
			})
			wg.Go(func() {
				if err := s.AddSpend(ctx, cid, "t1", record.Spend{Calls: 1, Tokens: 2, Events: []record.Event{ev(record.EventStepEnded, i)}}); err != nil {
					t.Error(err)
				}
			})
			wg.Go(func() {
				if _, err := s.StartCall(ctx, cid, "t1", "k"+strconv.Itoa(i), ev(record.EventStepStarted, 100+i)); err != nil {
					t.Error(err)
				}
			})
			wg.Go(func() {
				o := record.CallOutcome{CallID: "k" + strconv.Itoa(i), Events: []record.Event{ev(record.EventStepEnded, 100+i)}}
				if _, err := s.PutOutcome(ctx, cid, "t1", o); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		want := logOf(t, c, cid)
		if len(want) != 5*rounds {
			t.Fatalf("the log holds %d events, want %d", len(want), 5*rounds)
		}
		for i, ch := range got {
			if have := received(t, ch, len(want)); !slices.Equal(have, want) {
				t.Errorf("stream %d got\n%s\nwant the log's\n%s", i, strings.Join(have, "\n"), strings.Join(want, "\n"))
			}
		}
		// Each stream reads the log once, when it starts (or not at all,
		// when another had just found it empty): every batch after that
		// comes with its publication.
		if n := x.n.Load(); n > streams {
			t.Errorf("%d XREADs for %d writes to %d streams, want at most one per stream", n, 4*rounds, streams)
		}
	})
}

// What the publications told a stream is dropped when events leave the
// log: a stream then reads the log, and never gets the turn.started the
// guardian had forgotten (ForgetText), nor an event of a deleted
// conversation.
func TestStreamsDropThePublishedEventsThatLeftTheLog(t *testing.T) {
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		cid := valkeytest.ID(t, "c")
		key := eventsKeys([]string{cid})[0]
		s := valkey.New(c, valkey.Options{})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
		if err := s.Create(ctx, record.Meta{ID: cid, Owner: "u", CreatedAt: at, UpdatedAt: at}); err != nil {
			t.Fatal(err)
		}
		if err := s.Emit(ctx, cid, record.Event{Type: record.EventTurnEnded, TurnID: "t0", At: at}); err != nil {
			t.Fatal(err)
		}
		before := logOf(t, c, cid)[0]
		before = before[:strings.IndexByte(before, ' ')]

		// A stream waits after the first event, and keeps the channel
		// subscribed (so what it was told stays) while the others read.
		waiting := make(chan record.Event, 10)
		go streamAll(ctx, s, cid, before, waiting)
		waitFor(t, 10*time.Second, "the stream waiting", func() bool {
			n, _ := c.PubSubNumSub(ctx, key).Result()
			return n[key] == 1
		})
		const text = "draw the word forbidden"
		if err := s.Emit(ctx, cid, record.Event{Type: record.EventTurnStarted, TurnID: "t1", At: at, Data: map[string]any{"text": text}},
			record.Event{Type: record.EventStepStarted, TurnID: "t1", At: at}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			select {
			case <-waiting:
			case <-time.After(10 * time.Second):
				t.Fatal("the waiting stream did not get the events")
			}
		}
		if err := s.ForgetText(ctx, cid, "t1", text); err != nil {
			t.Fatal(err)
		}
		// A stream that resumes after the first event now: the blocked
		// message's turn.started is no longer its to get.
		evs, err := s.Events(ctx, cid, before, 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 1 || evs[0].Type != record.EventStepStarted {
			t.Errorf("a stream resuming after the forgetting got %+v, want the step.started alone", evs)
		}

		// A deleted conversation's events are not served from what the
		// publications told: its log is empty.
		if err := s.Delete(ctx, cid); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // the deletion's wake-up reaches the subscription (the log is read either way)
		short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancelShort()
		evs, err = s.Events(short, cid, before, 10, 200*time.Millisecond)
		if err != nil && short.Err() == nil {
			t.Fatal(err)
		}
		if len(evs) != 0 {
			t.Errorf("a stream of a deleted conversation got %+v, want nothing", evs)
		}
	})
}

// A publication the streams cannot read (a bare wake-up, as an older
// version's writes sent, or a damaged one) is a wake-up: they read the log.
func TestStreamsReadTheLogAfterAPublicationTheyCannotRead(t *testing.T) {
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		cid := valkeytest.ID(t, "c")
		key := eventsKeys([]string{cid})[0]
		s := valkey.New(c, valkey.Options{})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
		got := make(chan record.Event, 10)
		go streamAll(ctx, s, cid, "", got)
		waitFor(t, 10*time.Second, "the stream waiting", func() bool {
			n, _ := c.PubSubNumSub(ctx, key).Result()
			return n[key] == 1
		})
		for i, payload := range []string{"", "0\n1-1", "garbage", "0\n9-9\n{not json"} {
			b, _ := json.Marshal(record.Event{Type: record.EventStepStarted, TurnID: "t1", At: at})
			id, err := c.XAdd(ctx, &redis.XAddArgs{Stream: key, Values: []any{"e", b}}).Result()
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Publish(ctx, key, payload).Err(); err != nil {
				t.Fatal(err)
			}
			select {
			case e := <-got:
				if e.ID != id {
					t.Errorf("publication %d (%q): the stream got %s, want the log's %s", i, payload, e.ID, id)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("publication %d (%q): the stream did not read the log", i, payload)
			}
		}
	})
}

// A stream that loses its wake-ups' connection loses no event: the
// publications made while go-redis dials again never reach it, so what
// its channel was told cannot be trusted past the loss, and the stream
// reads the log again. The Pub/Sub connection of the stream's Store is
// killed on the server, between writes, three times.
func TestStreamsKeepEveryEventAcrossALostConnection(t *testing.T) {
	base := valkeytest.Real(t)
	o := *base.(*redis.Client).Options()
	o.ClientName = valkeytest.ID(t, "n")
	c := redis.NewClient(&o)
	defer c.Close()
	s := valkey.New(c, valkey.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cid := valkeytest.ID(t, "c")
	key := eventsKeys([]string{cid})[0]
	got := make(chan record.Event, 100)
	go streamAll(ctx, s, cid, "", got)
	subscribed := func() bool {
		n, _ := base.PubSubNumSub(ctx, key).Result()
		return n[key] == 1
	}
	waitFor(t, 10*time.Second, "the stream subscribed", subscribed)
	// killSub kills the connection of c that holds a subscription.
	killSub := func() {
		list, err := base.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(list, "\n") {
			if !strings.Contains(line, " name="+o.ClientName+" ") || strings.Contains(line, " sub=0 ") {
				continue
			}
			for _, f := range strings.Fields(line) {
				if id, ok := strings.CutPrefix(f, "id="); ok {
					if err := base.Do(ctx, "CLIENT", "KILL", "ID", id).Err(); err != nil {
						t.Fatal(err)
					}
					return
				}
			}
		}
		t.Fatal("no subscribed connection of the stream's Store found")
	}
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	n := 0
	emit := func() {
		n++
		if err := s.Emit(ctx, cid, record.Event{Type: record.EventStepStarted, TurnID: "t1", At: at.Add(time.Duration(n) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		emit()
		emit()
		killSub()
		emit() // published while the stream's Store has no subscription, or before it knows
		waitFor(t, 10*time.Second, "the stream subscribed again", subscribed)
		emit()
	}
	want := logOf(t, c, cid)
	if len(want) != n {
		t.Fatalf("the log holds %d events, want %d", len(want), n)
	}
	if have := received(t, got, len(want)); !slices.Equal(have, want) {
		t.Errorf("the stream got\n%s\nwant the log's\n%s", strings.Join(have, "\n"), strings.Join(want, "\n"))
	}
	select {
	case e := <-got:
		t.Errorf("the stream got %s once more", e.ID)
	case <-time.After(200 * time.Millisecond):
	}
}
