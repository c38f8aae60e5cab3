package turn_test

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

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

func (s *turnWrites) SaveTurnStarting(ctx context.Context, cid string, t *record.Turn, q record.Query, start record.Start, arts ...artifact.Artifact) (string, bool, error) {
	s.n.Add(1)
	return s.Store.SaveTurnStarting(ctx, cid, t, q, start, arts...)
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
			// A validated batch goes straight to its calls: the step says
			// where the batch goes as ValidateBatch would, or leaves it to
			// ValidateBatch (tools).
			step, err := f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref, Direct: true})
			if err != nil {
				t.Fatalf("LLMStep() error = %v", err)
			}
			if wantNext, wantCalls := turn.NextTools, 0; !tc.early && (step.Next != wantNext || len(step.Calls) != wantCalls) ||
				tc.early && (step.Next != tc.next || len(step.Calls) != tc.calls) {
				t.Errorf("LLMStep() = %+v; want %s with %d calls (ValidateBatch's way on when the batch is stored validated, else tools)", step, tc.next, tc.calls)
			}
			if n := store.n.Load(); n != 1 {
				t.Fatalf("the LLM step wrote the turn %d times, want once", n)
			}
			if got := len(f.turn(t).Pending) > 0; got != tc.early {
				t.Errorf("after the LLM step, the batch is stored validated: %v, want %v", got, tc.early)
			}
			// ValidateBatch, run anyway (a step retried after a crash says
			// tools), hands on the same.
			out, err := f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref})
			if err != nil || out.Next != tc.next || len(out.Calls) != tc.calls {
				t.Fatalf("Validate() = %+v, %v; want %s with %d calls", out, err, tc.next, tc.calls)
			}
			if tc.early && !slices.Equal(step.Calls, out.Calls) {
				t.Errorf("LLMStep's calls %v, ValidateBatch's %v: want the same", step.Calls, out.Calls)
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

// The only call starts in the write that asked for it (docs/architecture.md):
// on a Store that keeps its reads, the LLM step whose answer is one call
// ready to run starts it in its own write, with the call's step.started;
// ValidateBatch and InvokeCall then read nothing, and InvokeCall tells no
// step.started of its own.
func TestTheOnlyCallStartsInTheLLMStepsWrite(t *testing.T) {
	t.Parallel()
	f := newFixture(t, drawsThenAnswers)
	store := valkey.New(f.rdb, valkey.Options{ReadBack: true})
	f.h.Store, f.h.Events = store, store
	rt := &alone{}
	f.rdb.AddHook(rt)
	ctx := t.Context()
	step, err := f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref})
	if err != nil || step.Next != turn.NextTools || step.After == "" {
		t.Fatalf("LLMStep() = %+v, %v; want tools, with a token", step, err)
	}
	n := rt.N.Load()
	ref := f.ref
	ref.After = []string{step.After}
	v, err := f.h.Validate(ctx, turn.ValidateInput{Ref: ref})
	if err != nil || v.Next != turn.NextInvoke || len(v.Calls) != 1 {
		t.Fatalf("Validate() = %+v, %v", v, err)
	}
	out, err := f.h.Invoke(ctx, turn.InvokeInput{Ref: f.ref, CallID: v.Calls[0]})
	if err != nil || out.Status != record.ResultSucceeded {
		t.Fatalf("Invoke() = %+v, %v", out, err)
	}
	if got := rt.N.Load() - n; got != 0 {
		t.Errorf("ValidateBatch and InvokeCall sent %d commands alone, want none: no read of their own (the outcome's write goes in its pipeline)", got)
	}
	if n := f.inv.n.Load(); n != 1 {
		t.Errorf("the specialist ran %d times, want once", n)
	}
	evs, err := store.Events(ctx, "c1", "0", 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	started := 0
	for _, e := range evs {
		if f := e.Fields(); e.Type == record.EventStepStarted && f["call_id"] == v.Calls[0] {
			started++
			if f["tool"] != "create_svg_artifact" {
				t.Errorf("the call's step.started names tool %v", f["tool"])
			}
		}
	}
	if started != 1 {
		t.Errorf("the call's step.started is in the log %d times, want once", started)
	}
}

// alone counts the commands sent alone, a script's first load (SCRIPT
// LOAD after NOSCRIPT on a new server) aside: a step's read is one, and
// a call's outcome goes in a pipeline.
type alone struct{ N atomic.Int64 }

func (r *alone) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *alone) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "script" {
			r.N.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (r *alone) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
