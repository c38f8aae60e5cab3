package turn_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/guardian"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/turn"
)

// turnWrites is the fixture's store counting the turn's writes.
type turnWrites struct {
	*valkey.Store
	n atomic.Int32
}

func (s *turnWrites) SaveTurn(ctx context.Context, cid string, t *record.Turn, arts ...artifact.Artifact) error {
	s.n.Add(1)
	return s.Store.SaveTurn(ctx, cid, t, arts...)
}

func (s *turnWrites) SaveTurnAhead(ctx context.Context, cid string, t *record.Turn, q record.Query, arts ...artifact.Artifact) (string, error) {
	s.n.Add(1)
	return s.Store.SaveTurnAhead(ctx, cid, t, q, arts...)
}

// checksCalls is a guardian that checks tool calls and allows them.
type checksCalls struct{}

func (checksCalls) Enabled(k guardian.Kind) bool { return k == guardian.ToolCall }
func (checksCalls) Check(context.Context, guardian.Input) (guardian.Verdict, error) {
	return guardian.Verdict{Decision: guardian.Decision{Action: guardian.Allow}}, nil
}

// A batch is validated in the write that asked for it
// (docs/architecture.md): the LLM step whose answer holds a batch that
// cannot pause stores it validated, and ValidateBatch, finding it so,
// writes nothing and hands the same calls on. A batch that pauses for an
// approval, or whose calls the guardian checks, is validated and written
// by ValidateBatch as before.
func TestABatchIsValidatedInTheWriteThatAskedFor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		call     llm.ToolCall
		guardian turn.Guardian
		early    bool   // the LLM step stores the batch validated
		next     string // ValidateBatch's way on
		calls    int    // the calls ValidateBatch hands on
	}{
		{"a call that runs", llm.ToolCall{ID: "x", Name: "create_svg_artifact", Arguments: `{"word":"hi"}`}, nil, true, turn.NextInvoke, 1},
		{"an invalid call", llm.ToolCall{ID: "x", Name: "create_svg_artifact", Arguments: `{"word":42}`}, nil, true, turn.NextAppend, 0},
		{"a call that needs approval", llm.ToolCall{ID: "x", Name: "publish_artifact", Arguments: `{"artifact_id":"art_x","channel":"web"}`}, nil, false, turn.NextAwait, 0},
		{"a call the guardian checks", llm.ToolCall{ID: "x", Name: "create_svg_artifact", Arguments: `{"word":"hi"}`}, checksCalls{}, false, turn.NextInvoke, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, func(llm.Request) *llm.Response { return &llm.Response{ToolCalls: []llm.ToolCall{tc.call}} })
			store := &turnWrites{Store: f.store}
			f.h.Store = store
			if tc.guardian != nil {
				f.h.Guardian = tc.guardian
			}
			ctx := t.Context()
			if err := f.store.PutArtifacts(ctx, "c1", artifact.Artifact{ID: "art_x", Name: "x.png", MimeType: "image/png"}); err != nil {
				t.Fatal(err)
			}
			if out, err := f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref}); err != nil || out.Next != turn.NextTools {
				t.Fatalf("LLMStep() = %+v, %v", out, err)
			}
			if n := store.n.Load(); n != 1 {
				t.Fatalf("the LLM step wrote the turn %d times, want once", n)
			}
			if got := len(f.turn(t).Pending) > 0; got != tc.early {
				t.Errorf("after the LLM step, the batch is stored validated: %v, want %v", got, tc.early)
			}
			out, err := f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref})
			if err != nil || out.Next != tc.next || len(out.Calls) != tc.calls {
				t.Fatalf("Validate() = %+v, %v; want %s with %d calls", out, err, tc.next, tc.calls)
			}
			wantWrites := int32(2)
			if tc.early {
				wantWrites = 1
			}
			if n := store.n.Load(); n != wantWrites {
				t.Errorf("the turn was written %d times by the two steps, want %d", n, wantWrites)
			}
			// Either way the stored batch is the one ValidateBatch hands on.
			pending := f.turn(t).Pending
			if len(pending) != 1 {
				t.Fatalf("stored batch = %+v, want the one call", pending)
			}
			if ready := pending[0].State == record.CallReady; ready != (tc.calls == 1) {
				t.Errorf("stored call state = %s with %d calls handed on", pending[0].State, tc.calls)
			}
			// A retried ValidateBatch finds the same and writes nothing more
			// when nothing pauses and nothing is checked.
			again, err := f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref})
			if err != nil || again.Next != out.Next || len(again.Calls) != len(out.Calls) {
				t.Fatalf("retried Validate() = %+v, %v; want %+v", again, err, out)
			}
		})
	}
}
