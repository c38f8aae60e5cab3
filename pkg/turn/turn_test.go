package turn_test

import (
	"context"
	"encoding/json"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/agents"
	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/turn"
)

type staticCatalogs struct{ c *catalog.Catalog }

func (s staticCatalogs) Catalog(context.Context) (*catalog.Catalog, error) { return s.c, nil }

// countingInvoker is a function-field fake of the A2A invoker.
type countingInvoker struct {
	n      atomic.Int32
	invoke func(c agents.Call) record.CallOutcome
}

var _ turn.Invoker = (*countingInvoker)(nil)

func (f *countingInvoker) Invoke(_ context.Context, c agents.Call) record.CallOutcome {
	f.n.Add(1)
	return f.invoke(c)
}

func demoCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	b, err := os.ReadFile("../catalog/testdata/capabilities.json")
	if err != nil {
		t.Fatal(err)
	}
	var caps []catalog.Capability
	if err := json.Unmarshal(b, &caps); err != nil {
		t.Fatal(err)
	}
	return catalog.New(caps, nil)
}

// fixture is a handler set on a real store (embedded Valkey) with a
// scripted model and a fake invoker.
type fixture struct {
	h     *turn.Handlers
	store *valkey.Store
	inv   *countingInvoker
	llm   atomic.Int32
	ref   turn.Ref
}

func newFixture(t *testing.T, decide func(req llm.Request) *llm.Response) *fixture {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	f := &fixture{store: valkey.New(rdb, valkey.Options{})}
	f.inv = &countingInvoker{invoke: func(c agents.Call) record.CallOutcome {
		return record.CallOutcome{Result: record.ToolResult{Status: record.ResultSucceeded, Summary: "drew it",
			Artifacts: []artifact.Ref{{ID: "art_1", Name: "w.svg", MimeType: "image/svg+xml"}}},
			Artifacts: []artifact.Artifact{{ID: "art_1", Name: "w.svg", MimeType: "image/svg+xml", CreatedAt: time.Now()}}}
	}}
	f.h = &turn.Handlers{
		Store:    f.store,
		LLM:      llm.ProviderFunc(func(_ context.Context, req llm.Request) (*llm.Response, error) { f.llm.Add(1); return decide(req), nil }),
		Catalogs: staticCatalogs{demoCatalog(t)},
		Invoker:  f.inv,
		Limits:   turn.DefaultLimits(),
	}
	ctx := t.Context()
	now := time.Now().UTC()
	f.ref = turn.Ref{ConversationID: "c1", TurnID: "t1"}
	if err := f.store.Create(ctx, record.Meta{ID: "c1", Owner: "dev", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	tr := &record.Turn{ID: "t1", StartedAt: now, Status: record.StatusRunning, Text: "draw",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "draw a word"}}}
	if err := f.store.SaveTurn(ctx, "c1", tr); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) turn(t *testing.T) *record.Turn {
	t.Helper()
	conv, _, err := f.store.Load(t.Context(), "c1", "")
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := conv.Turn("t1")
	return tr
}

// Issue 4, idempotency: every step retried with the same input (as Step
// Functions retries a Lambda) duplicates no message and no result, and a
// stored outcome is never produced twice by running the specialist again.
func TestRetriedStepsDuplicateNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(req llm.Request) *llm.Response {
		if req.Messages[len(req.Messages)-1].Role == llm.RoleTool {
			return &llm.Response{Text: "done"}
		}
		return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "k1", Name: "create_svg_artifact", Arguments: `{"word":"hi"}`}}}
	})
	ctx := t.Context()
	twice := func(name string, step func() (any, error)) {
		t.Helper()
		a, err := step()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := step()
		if err != nil {
			t.Fatalf("%s retried: %v", name, err)
		}
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("%s retried answered differently (-first +retry):\n%s", name, diff)
		}
	}
	twice("LLMStep", func() (any, error) { return f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref}) })
	twice("Validate", func() (any, error) { return f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref}) })
	twice("Invoke", func() (any, error) { return f.h.Invoke(ctx, turn.InvokeInput{Ref: f.ref, CallID: "k1"}) })
	twice("Append", func() (any, error) { return f.h.Append(ctx, f.ref) })
	twice("LLMStep final", func() (any, error) { return f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref}) })

	if n := f.inv.n.Load(); n != 1 {
		t.Errorf("specialist ran %d times, want 1", n)
	}
	if n := f.llm.Load(); n != 2 {
		t.Errorf("LLM called %d times, want 2", n)
	}
	tr := f.turn(t)
	var roles []llm.Role
	for _, m := range tr.Messages {
		roles = append(roles, m.Role)
	}
	want := []llm.Role{llm.RoleUser, llm.RoleAssistant, llm.RoleTool, llm.RoleAssistant}
	if diff := cmp.Diff(want, roles); diff != "" {
		t.Errorf("transcript roles (-want +got):\n%s", diff)
	}
	if tr.Status != record.StatusSucceeded || tr.LLMCalls != 2 || len(tr.Produced) != 1 {
		t.Errorf("turn = %s, %d LLM calls, produced %v; want succeeded, 2, one artifact", tr.Status, tr.LLMCalls, tr.Produced)
	}
}

// Spec §3.3, DESIGN §7: an approval covers exactly the arguments shown; a
// retried Await keeps one history entry and the newest token.
func TestAwaitRetryKeepsOnePause(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(req llm.Request) *llm.Response {
		return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "p1", Name: "publish_artifact", Arguments: `{"artifact_id":"art_x","channel":"web"}`}}}
	})
	ctx := t.Context()
	if err := f.store.PutArtifacts(ctx, "c1", artifact.Artifact{ID: "art_x", Name: "x.png", MimeType: "image/png"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref}); err != nil {
		t.Fatal(err)
	}
	out, err := f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref})
	if err != nil || out.Next != turn.NextAwait {
		t.Fatalf("Validate() = %+v, %v; want await", out, err)
	}
	for _, tok := range []string{"tok-1", "tok-1"} {
		if _, err := f.h.Await(ctx, turn.AwaitInput{Ref: f.ref, TaskToken: tok, TimeoutSeconds: 60}); err != nil {
			t.Fatal(err)
		}
	}
	tr := f.turn(t)
	plans := 0
	for _, e := range tr.History {
		if e.Kind == "plan" {
			plans++
		}
	}
	if tr.Status != record.StatusAwaitingApproval || tr.TaskToken != "tok-1" || plans != 1 {
		t.Errorf("turn = %s token %q with %d plan entries; want awaiting_approval, tok-1, 1", tr.Status, tr.TaskToken, plans)
	}
	// Reject: nothing runs, the model gets a rejected result.
	out, err = f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref, Reply: &turn.Reply{Approval: &turn.Decision{Decision: "reject", Note: "not today"}}})
	if err != nil || out.Next != turn.NextAppend || len(out.Calls) != 0 {
		t.Fatalf("Validate(reject) = %+v, %v; want append with no calls", out, err)
	}
	if _, err := f.h.Append(ctx, f.ref); err != nil {
		t.Fatal(err)
	}
	tr = f.turn(t)
	last := tr.Messages[len(tr.Messages)-1]
	var r record.ToolResult
	_ = json.Unmarshal([]byte(last.Content), &r)
	if last.ToolCallID != "p1" || r.Status != record.ResultRejected || f.inv.n.Load() != 0 {
		t.Errorf("last message = %+v (status %s), invocations %d; want p1 rejected and nothing run", last, r.Status, f.inv.n.Load())
	}
}
