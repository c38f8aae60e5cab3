package valkey_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/valkeytest"
)

// A batch of one call is appended by its call: the call's outcome and the
// turn with its result appended go in one round trip, the outcome first,
// and the turn is written only when the turn's results hold that outcome
// as the call sent it. Anything else (an outcome stored first by another
// try that answered otherwise, a cancel, a file over the quota) stores
// what PutOutcome would and leaves the turn as it was, for AppendResults.
// The scripts' first use on a server that does not know them is loaded
// and run again.
func TestABatchOfOneIsAppendedWithItsOutcome(t *testing.T) {
	t.Parallel()
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		rt := &valkeytest.RoundTrips{}
		c.AddHook(rt)
		s := valkey.New(c, valkey.Options{ReadBack: true})
		other := valkey.New(c, valkey.Options{}) // another process's Store
		cid := create(t, s, valkeytest.ID(t, "u"))
		ctx := t.Context()

		// running is turn i waiting for its one call; appended, that turn
		// with the call's result appended, as AppendResults writes it.
		running := func(i int) (*record.Turn, *record.Turn, record.CallOutcome) {
			t.Helper()
			tr, call := askingOne(i)
			if err := s.SaveTurn(ctx, cid, tr); err != nil {
				t.Fatal(err)
			}
			o := record.CallOutcome{CallID: call, Tool: "tool1", Result: record.ToolResult{Status: record.ResultSucceeded, Summary: "done"}, StartedAt: t0, EndedAt: t0}
			at := *tr
			at.Messages = append(slices.Clip(tr.Messages), llm.ToolResultMessage(call, "done"))
			at.Pending = nil
			return tr, &at, o
		}
		stored := func(id string) (*record.Turn, map[string]record.CallOutcome) {
			t.Helper()
			conv, outcomes, err := other.LoadStep(ctx, cid, record.Query{TurnID: id, Outcomes: true})
			if err != nil {
				t.Fatal(err)
			}
			return mustTurn(t, conv, id), outcomes
		}
		llmQuery := func(id string) record.Query { return record.Query{TurnID: id, Window: 100} }

		// A server that knows neither script (a new or restarted one).
		if err := c.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		tr, at, o := running(1)
		put, appended, token, err := s.PutOutcomeAppending(ctx, cid, o, at, llmQuery(tr.ID))
		if err != nil || !put.Stored || put.Cancelled || !appended || token == "" {
			t.Fatalf("PutOutcomeAppending() on a server without the scripts = %+v, appended %v, token %q, %v; want stored and appended, with a token", put, appended, token, err)
		}
		if got, outcomes := stored(tr.ID); len(got.Pending) != 0 || len(got.Messages) != len(at.Messages) || outcomes[o.CallID].Result.Summary != "done" {
			t.Errorf("after the appending put: pending %v, %d messages (want %d), outcome %+v", got.Pending, len(got.Messages), len(at.Messages), outcomes[o.CallID])
		}

		// One round trip, and the next LLM step reads none.
		tr, at, o = running(2)
		n := rt.N.Load()
		put, appended, token, err = s.PutOutcomeAppending(ctx, cid, o, at, llmQuery(tr.ID))
		if err != nil || !put.Stored || !appended {
			t.Fatalf("PutOutcomeAppending() = %+v, appended %v, %v", put, appended, err)
		}
		if d := rt.N.Load() - n; d != 1 {
			t.Errorf("the appending put took %d round trips, want 1", d)
		}
		q := llmQuery(tr.ID)
		q.After = []string{token}
		n = rt.N.Load()
		conv, _, err := s.LoadStep(ctx, cid, q)
		if err != nil {
			t.Fatal(err)
		}
		if d := rt.N.Load() - n; d != 0 {
			t.Errorf("the LLM step after the appending put read in %d round trips, want 0 (its read ahead)", d)
		}
		fresh, _, err := other.LoadStep(ctx, cid, llmQuery(tr.ID))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(mustTurn(t, fresh, tr.ID), mustTurn(t, conv, tr.ID)); diff != "" {
			t.Errorf("the read ahead differs from a read of its own (-fresh +ahead):\n%s", diff)
		}

		// The same put again (a try that timed out had stored both):
		// nothing stored twice, and the turn is the appended one.
		put, appended, _, err = s.PutOutcomeAppending(ctx, cid, o, at, llmQuery(tr.ID))
		if err != nil || put.Stored || !appended {
			t.Errorf("the put again = %+v, appended %v, %v; want not stored, appended", put, appended, err)
		}

		// Another outcome stored first: the turn is left for AppendResults.
		tr, at, o = running(3)
		first := o
		first.Result.Summary = "the first try's"
		if _, err := s.PutOutcome(ctx, cid, tr.ID, first); err != nil {
			t.Fatal(err)
		}
		put, appended, token, err = s.PutOutcomeAppending(ctx, cid, o, at, llmQuery(tr.ID))
		if err != nil || put.Stored || appended || token != "" {
			t.Errorf("after another outcome = %+v, appended %v, token %q, %v; want neither stored nor appended", put, appended, token, err)
		}
		if got, outcomes := stored(tr.ID); len(got.Pending) != 1 || outcomes[o.CallID].Result.Summary != "the first try's" {
			t.Errorf("after another outcome: pending %v, outcome %+v; want the turn as it was and the first outcome", got.Pending, outcomes[o.CallID])
		}

		// A cancel: the outcome is stored (the call ran), the turn is not
		// written over.
		tr, at, o = running(4)
		if _, err := s.MarkCancelled(ctx, cid, tr.ID); err != nil {
			t.Fatal(err)
		}
		put, appended, _, err = s.PutOutcomeAppending(ctx, cid, o, at, llmQuery(tr.ID))
		if err != nil || !put.Stored || !put.Cancelled || appended {
			t.Errorf("after a cancel = %+v, appended %v, %v; want stored, cancelled, not appended", put, appended, err)
		}
		if got, _ := stored(tr.ID); len(got.Pending) != 1 {
			t.Errorf("after a cancel: pending %v, want the turn as it was", got.Pending)
		}

		// A file over the quota: nothing stored, the turn as it was.
		tr, at, o = running(5)
		o.Reserve = []artifact.Reservation{{ID: "f1", Bytes: 200, Limit: 100}}
		put, appended, _, err = s.PutOutcomeAppending(ctx, cid, o, at, llmQuery(tr.ID))
		if err != nil || put.OverQuota == nil || put.Stored || appended {
			t.Errorf("over the quota = %+v, appended %v, %v; want refused, not appended", put, appended, err)
		}
		if got, outcomes := stored(tr.ID); len(got.Pending) != 1 || len(outcomes) != 0 {
			t.Errorf("over the quota: pending %v, outcomes %v; want the turn as it was, no outcome", got.Pending, outcomes)
		}

		// A Store that keeps nothing (a Lambda function's) appends too,
		// and names no read ahead.
		tr, at, o = running(6)
		lambda := valkey.New(c, valkey.Options{})
		put, appended, token, err = lambda.PutOutcomeAppending(ctx, cid, o, at, llmQuery(tr.ID))
		if err != nil || !put.Stored || !appended || token != "" {
			t.Errorf("a Store that keeps nothing = %+v, appended %v, token %q, %v; want stored and appended, no token", put, appended, token, err)
		}
	})
}
