package valkey_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/valkeytest"
)

// A step's read rides on the write before it: the write reads what the
// next step reads, in its own round trip, and the step whose input names
// that write takes it without a round trip of its own, getting exactly
// what a read of its own would have got. After the calls of a batch, the
// newest outcome's read (which saw every other) answers; anything else (no
// token, another Store's newer write, another query, a token taken
// already) reads.
func TestAStepsReadRidesOnTheWriteBeforeIt(t *testing.T) {
	t.Parallel()
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		rt := &valkeytest.RoundTrips{}
		c.AddHook(rt)
		s := valkey.New(c, valkey.Options{ReadBack: true})
		other := valkey.New(c, valkey.Options{ReadBack: true}) // another process's Store
		cid := create(t, s, valkeytest.ID(t, "u"))
		ctx := t.Context()
		// An earlier turn, in the window (its write loads the scripts).
		if _, err := s.SaveTurnAhead(ctx, cid, finished(1), record.Query{TurnID: finished(1).ID}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.PutOutcomeAhead(ctx, cid, finished(1).ID, record.CallOutcome{CallID: "c0"}, record.Query{TurnID: finished(1).ID}); err != nil {
			t.Fatal(err)
		}
		tr := progress(2, 1)
		tr.Pending = []record.PendingCall{{CallID: "c1", Tool: "tool1", State: record.CallReady}, {CallID: "c2", Tool: "tool2", State: record.CallReady}}
		batch := record.Query{TurnID: tr.ID, Outcomes: true}
		llm := record.Query{TurnID: tr.ID, Window: 100}

		// fresh is what another process reads now.
		fresh := func(q record.Query) (*record.Conversation, map[string]record.CallOutcome) {
			t.Helper()
			conv, outcomes, err := other.LoadStep(ctx, cid, q)
			if err != nil {
				t.Fatal(err)
			}
			return conv, outcomes
		}
		// step reads q after the writes named, and reports its round trips.
		step := func(q record.Query, after ...string) (*record.Conversation, map[string]record.CallOutcome, int64) {
			t.Helper()
			q.After = after
			n := rt.N.Load()
			conv, outcomes, err := s.LoadStep(ctx, cid, q)
			if err != nil {
				t.Fatal(err)
			}
			return conv, outcomes, rt.N.Load() - n
		}
		same := func(what string, q record.Query, conv *record.Conversation, outcomes map[string]record.CallOutcome) {
			t.Helper()
			wantConv, wantOutcomes := fresh(q)
			if diff := cmp.Diff(wantConv, conv); diff != "" {
				t.Errorf("%s: the conversation differs from a read of its own (-read +ahead):\n%s", what, diff)
			}
			if diff := cmp.Diff(wantOutcomes, outcomes); diff != "" {
				t.Errorf("%s: the outcomes differ from a read of its own (-read +ahead):\n%s", what, diff)
			}
		}

		// The LLM step's write reads ahead for ValidateBatch.
		n := rt.N.Load()
		tok, err := s.SaveTurnAhead(ctx, cid, tr, batch)
		if err != nil || tok == "" {
			t.Fatalf("SaveTurnAhead() = %q, %v", tok, err)
		}
		if got := rt.N.Load() - n; got != 1 {
			t.Errorf("the write and its read ahead took %d round trips, want 1", got)
		}
		conv, outcomes, n := step(batch, tok)
		if n != 0 {
			t.Errorf("the step after the write took %d round trips, want 0", n)
		}
		same("ValidateBatch", batch, conv, outcomes)
		if _, _, n := step(batch, tok); n != 1 {
			t.Errorf("a token taken already: %d round trips, want a read of its own", n)
		}

		// Each call's outcome reads ahead for AppendResults; the newest answers.
		var toks []string
		for _, id := range []string{"c1", "c2"} {
			put, tok, err := s.PutOutcomeAhead(ctx, cid, tr.ID, record.CallOutcome{CallID: id, Tool: "tool", Result: record.ToolResult{Status: record.ResultSucceeded, Summary: id}}, batch)
			if err != nil || !put.Stored || tok == "" {
				t.Fatalf("PutOutcomeAhead(%s) = %+v, %q, %v", id, put, tok, err)
			}
			toks = append(toks, tok)
		}
		conv, outcomes, n = step(batch, toks[1], toks[0]) // in any order
		if n != 0 {
			t.Errorf("AppendResults after the batch took %d round trips, want 0", n)
		}
		if len(outcomes) != 2 {
			t.Errorf("AppendResults read %d outcomes, want both calls'", len(outcomes))
		}
		same("AppendResults", batch, conv, outcomes)

		// AppendResults' write reads ahead for the next LLM step (the window).
		tr = progress(2, 2)
		tok, err = s.SaveTurnAhead(ctx, cid, tr, llm)
		if err != nil {
			t.Fatal(err)
		}
		conv, outcomes, n = step(llm, tok)
		if n != 0 {
			t.Errorf("the LLM step took %d round trips, want 0", n)
		}
		same("LLMStep", llm, conv, outcomes)
		conv.Turns[0].Status = record.StatusFailed // the reader's to change
		if conv, _, _ := step(llm); conv.Turns[0].Status == record.StatusFailed {
			t.Error("a read shares its turn with the read ahead before it")
		}

		// What does not answer: the step reads.
		for _, c := range []struct {
			what  string
			write record.Query
			read  record.Query
			after func(tok string) []string
		}{
			{"no token", llm, llm, func(string) []string { return nil }},
			{"another query", batch, llm, func(tok string) []string { return []string{tok} }},
			{"an older token", llm, llm, func(tok string) []string { return []string{toks[0]} }},
			{"another Store's newer write", llm, llm, func(tok string) []string { return []string{tok, otherToken(t, other, cid, tr)} }},
			{"a token of nothing", llm, llm, func(string) []string { return []string{"x", "-", "y-z", ""} }},
		} {
			tok, err := s.SaveTurnAhead(ctx, cid, tr, c.write)
			if err != nil {
				t.Fatal(err)
			}
			conv, outcomes, n := step(c.read, c.after(tok)...)
			if n != 1 {
				t.Errorf("%s: %d round trips, want a read of its own", c.what, n)
			}
			same(c.what, c.read, conv, outcomes)
		}
	})
}

// otherToken is a read ahead of Store o, newer than any before it.
func otherToken(t *testing.T, o *valkey.Store, cid string, tr *record.Turn) string {
	t.Helper()
	tok, err := o.SaveTurnAhead(t.Context(), cid, tr, record.Query{TurnID: tr.ID})
	if err != nil || tok == "" {
		t.Fatalf("another Store's SaveTurnAhead() = %q, %v", tok, err)
	}
	return tok
}

// A read ahead is the record as the write left it: a cancel that comes
// after it is one that came just after the step's read, and the step's
// write is refused as it would be then. A write refused reads nothing
// ahead, and a Store that keeps nothing (a Lambda function's) only writes.
func TestAReadAheadIsTheRecordAsTheWriteLeftIt(t *testing.T) {
	t.Parallel()
	valkeytest.Each(t, func(t *testing.T, c redis.UniversalClient) {
		s := valkey.New(c, valkey.Options{ReadBack: true})
		cid := create(t, s, valkeytest.ID(t, "u"))
		ctx := t.Context()
		tr := progress(1, 1)
		q := record.Query{TurnID: tr.ID, Outcomes: true}
		tok, err := s.SaveTurnAhead(ctx, cid, tr, q)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.MarkCancelled(ctx, cid, tr.ID); err != nil {
			t.Fatal(err)
		}
		conv, _, err := s.LoadStep(ctx, cid, record.Query{TurnID: tr.ID, Outcomes: true, After: []string{tok}})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := conv.Turn(tr.ID); got.CancelRequested {
			t.Error("the read ahead saw the cancel that came after it")
		}
		if _, err := s.SaveTurnAhead(ctx, cid, tr, q); !errors.Is(err, record.ErrCancelled) {
			t.Errorf("the step's write after the cancel = %v, want ErrCancelled", err)
		}
		if conv, _, _ := s.LoadStep(ctx, cid, q); !mustTurn(t, conv, tr.ID).CancelRequested {
			t.Error("a read of its own after the cancel does not see it")
		}

		lambda := valkey.New(c, valkey.Options{})
		tr2 := progress(2, 1)
		if tok, err := lambda.SaveTurnAhead(ctx, cid, tr2, record.Query{TurnID: tr2.ID}); tok != "" || err != nil {
			t.Errorf("SaveTurnAhead() of a Store that keeps nothing = %q, %v; want a plain write", tok, err)
		}
		if put, tok, err := lambda.PutOutcomeAhead(ctx, cid, tr2.ID, record.CallOutcome{CallID: "c1"}, record.Query{TurnID: tr2.ID}); tok != "" || err != nil || !put.Stored {
			t.Errorf("PutOutcomeAhead() of a Store that keeps nothing = %+v, %q, %v; want a plain put", put, tok, err)
		}
	})
}

func mustTurn(t *testing.T, conv *record.Conversation, id string) *record.Turn {
	t.Helper()
	if conv == nil {
		t.Fatal("no conversation")
	}
	tr, ok := conv.Turn(id)
	if !ok {
		t.Fatalf("no turn %s", id)
	}
	return tr
}
