package valkey_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/valkeytest"
)

// The only call starts in the write that asked for it: the turn with its
// batch of one ready call and the call's start go in one round trip, the
// start's events after the turn's; the call's LoadStart then takes that
// write's read, without a round trip, and says the call started. The start
// is LoadStart's, ordered by the store: a cancel marked after the write
// finds the call started, one marked before refuses the write and starts
// nothing. A Store that keeps no reads only saves. The scripts' first use
// on a server that does not know them is loaded and run again.
func TestTheOnlyCallStartsInTheWriteThatAskedForIt(t *testing.T) {
	t.Parallel()
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		rt := &valkeytest.RoundTrips{}
		c.AddHook(rt)
		s := valkey.New(c, valkey.Options{ReadBack: true})
		other := valkey.New(c, valkey.Options{}) // another process's Store
		cid := create(t, s, valkeytest.ID(t, "u"))
		ctx := t.Context()
		batchQuery := func(id string) record.Query { return record.Query{TurnID: id, Outcomes: true} }

		// asking is turn i with the model's call, validated and ready.
		asking := func(i int) (*record.Turn, record.Start) {
			tr, call := askingOne(i)
			tr.Events = []record.Event{{Type: record.EventStepEnded, TurnID: tr.ID, At: t0, Data: map[string]any{"tool": "llm"}}}
			return tr, record.Start{CallID: call, Events: []record.Event{{Type: record.EventStepStarted, TurnID: tr.ID, At: t0, Data: map[string]any{"tool": "tool1", "call_id": call}}}}
		}
		events := func() []string {
			t.Helper()
			evs, err := s.Events(ctx, cid, "0", 1000, 0)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, e := range evs {
				out = append(out, e.Type+"/"+e.TurnID)
			}
			return out
		}

		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		tr, start := asking(1)
		n := rt.N.Load()
		token, started, err := s.SaveTurnStarting(ctx, cid, tr, batchQuery(tr.ID), start)
		if err != nil || !started || token == "" {
			t.Fatalf("SaveTurnStarting() = %q, %v, %v; want a token, started", token, started, err)
		}
		if got := rt.N.Load() - n; got > 3 { // one, and the two of loading the unknown script
			t.Errorf("SaveTurnStarting took %d round trips on a server without its script", got)
		}
		if got, want := events(), []string{record.EventStepEnded + "/t01", record.EventStepStarted + "/t01"}; !slices.Equal(got, want) {
			t.Errorf("events after the write = %v, want the turn's, then the start's: %v", got, want)
		}
		// The step that follows takes the read ahead; the call's read takes
		// it too, and makes no round trip.
		if conv, _, err := s.LoadStep(ctx, cid, record.Query{TurnID: tr.ID, Outcomes: true, After: []string{token}}); err != nil || len(mustTurn(t, conv, tr.ID).Pending) != 1 {
			t.Fatalf("the next step's LoadStep() = %v", err)
		}
		n = rt.N.Load()
		conv, outcomes, began, err := s.LoadStart(ctx, cid, batchQuery(tr.ID), record.Start{CallID: start.CallID})
		if err != nil || !began || len(outcomes) != 0 {
			t.Fatalf("LoadStart() of the started call = began %v, outcomes %v, %v; want began, none", began, outcomes, err)
		}
		if got := rt.N.Load() - n; got != 0 {
			t.Errorf("LoadStart of the call the write started took %d round trips, want none", got)
		}
		if got := mustTurn(t, conv, tr.ID); len(got.Pending) != 1 || got.Pending[0].State != record.CallReady {
			t.Errorf("LoadStart's turn: pending %+v, want the call ready", got.Pending)
		}
		// Taken once: another read of it reads, and finds it started.
		n = rt.N.Load()
		if _, _, began, err := other.LoadStart(ctx, cid, batchQuery(tr.ID), record.Start{CallID: start.CallID}); err != nil || !began {
			t.Errorf("a second LoadStart() = began %v, %v; want it started before", began, err)
		}
		if rt.N.Load() == n {
			t.Error("a second LoadStart made no round trip")
		}
		if got := events(); len(got) != 2 {
			t.Errorf("events after the reads = %v, want no step.started more", got)
		}
		// A cancel marked after the write finds the call started.
		if ids, err := s.MarkCancelled(ctx, cid, tr.ID); err != nil || !slices.Equal(ids, []string{start.CallID}) {
			t.Errorf("MarkCancelled() after the write = %v, %v; want the started call", ids, err)
		}

		// A cancel marked before the write refuses it, and starts nothing.
		tr, start = asking(2)
		if err := s.SaveTurn(ctx, cid, progress(2, 1)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.MarkCancelled(ctx, cid, tr.ID); err != nil {
			t.Fatal(err)
		}
		if _, started, err := s.SaveTurnStarting(ctx, cid, tr, batchQuery(tr.ID), start); !errors.Is(err, record.ErrCancelled) || started {
			t.Fatalf("SaveTurnStarting() of a cancelled turn = started %v, %v; want refused", started, err)
		}
		if _, _, began, err := s.LoadStart(ctx, cid, batchQuery(tr.ID), record.Start{CallID: start.CallID}); err != nil || began {
			t.Errorf("LoadStart() after the refused write = began %v, %v; want the call not started", began, err)
		}
		if got := events(); slices.Contains(got, record.EventStepStarted+"/t02") {
			t.Errorf("events = %v: the refused write's start was told", got)
		}

		// A Store that keeps no reads only saves: the call starts in its
		// own read, as ever.
		tr, start = asking(3)
		if token, started, err := other.SaveTurnStarting(ctx, cid, tr, batchQuery(tr.ID), start); err != nil || started || token != "" {
			t.Fatalf("SaveTurnStarting() of a Store without reads = %q, %v, %v; want saved only", token, started, err)
		}
		if got := events(); slices.Contains(got, record.EventStepStarted+"/t03") {
			t.Errorf("events = %v: a start was told that did not happen", got)
		}
		if ids, err := s.MarkCancelled(ctx, cid, tr.ID); err != nil || len(ids) != 0 {
			t.Errorf("MarkCancelled() = %v, %v; want no call started", ids, err)
		}
	})
}
