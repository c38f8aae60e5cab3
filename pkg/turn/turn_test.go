package turn_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/audit"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/llmtest"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/tool"
	"github.com/clientagent/clientagent/pkg/turn"
	"github.com/clientagent/clientagent/pkg/turn/turnlambda"
	"github.com/clientagent/clientagent/pkg/turnview"
)

type staticCatalogs struct{ c *catalog.Catalog }

func (s staticCatalogs) Catalog(context.Context) (*catalog.Catalog, error) { return s.c, nil }

// countingInvoker is a function-field fake of the A2A invoker.
type countingInvoker struct {
	n      atomic.Int32
	invoke func(c tool.Call) record.CallOutcome
}

var _ turn.Invoker = (*countingInvoker)(nil)

func (f *countingInvoker) Invoke(_ context.Context, c tool.Call) record.CallOutcome {
	f.n.Add(1)
	return f.invoke(c)
}

func demoCatalog(t *testing.T, workflows ...catalog.Workflow) *catalog.Catalog {
	t.Helper()
	b, err := os.ReadFile("../catalog/testdata/capabilities.json")
	if err != nil {
		t.Fatal(err)
	}
	var caps []catalog.Capability
	if err := json.Unmarshal(b, &caps); err != nil {
		t.Fatal(err)
	}
	return catalog.New(caps, workflows)
}

// fixture is a handler set on a real store (embedded Valkey) with a
// scripted model and a fake invoker.
type fixture struct {
	h     *turn.Handlers
	rdb   *redis.Client
	store *valkey.Store
	inv   *countingInvoker
	llm   atomic.Int32
	ref   turn.Ref
	audit audit.Dir
}

// events lists the audit log as "call_id/kind/status" lines, sorted.
func (f *fixture) events(t *testing.T) []string {
	t.Helper()
	evs, err := audit.ReadDir(f.audit.Path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range evs {
		if e.User != "dev" || e.ArgumentsHash == "" {
			t.Errorf("audit event %+v lacks the user or the arguments hash", e)
		}
		out = append(out, e.CallID+"/"+e.Kind+"/"+e.Status)
	}
	sort.Strings(out)
	return out
}

// drawsThenAnswers is a model that calls create_svg_artifact once, then
// answers "done".
func drawsThenAnswers(req llm.Request) *llm.Response {
	if req.Messages[len(req.Messages)-1].Role == llm.RoleTool {
		return &llm.Response{Text: "done"}
	}
	return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_t1_1", Name: "create_svg_artifact", Arguments: `{"word":"hi"}`}}}
}

func newFixture(t *testing.T, decide func(req llm.Request) *llm.Response) *fixture {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	f := &fixture{rdb: rdb, store: valkey.New(rdb, valkey.Options{}), audit: audit.Dir{Path: t.TempDir()}}
	f.inv = &countingInvoker{invoke: func(c tool.Call) record.CallOutcome {
		return record.CallOutcome{Result: record.ToolResult{Status: record.ResultSucceeded, Summary: "drew it",
			Artifacts: []artifact.Ref{{ID: "art_1", Name: "w.svg", MimeType: "image/svg+xml"}}},
			Artifacts: []artifact.Artifact{{ID: "art_1", Name: "w.svg", MimeType: "image/svg+xml", CreatedAt: time.Now()}}}
	}}
	f.h = &turn.Handlers{
		Store:    f.store,
		LLM:      llmtest.ProviderFunc(func(_ context.Context, req llm.Request) (*llm.Response, error) { f.llm.Add(1); return decide(req), nil }),
		Catalogs: staticCatalogs{demoCatalog(t)},
		Invoker:  f.inv,
		Audit:    f.audit,
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
	f := newFixture(t, drawsThenAnswers)
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
	twice("Invoke", func() (any, error) { return f.h.Invoke(ctx, turn.InvokeInput{Ref: f.ref, CallID: "call_t1_1"}) })
	twice("Append", func() (any, error) { return f.h.Append(ctx, turn.AppendInput{Ref: f.ref}) })
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
	// docs/design.md §8: the call that ran is in the durable audit log, once.
	if diff := cmp.Diff([]string{"call_t1_1/call/succeeded"}, f.events(t)); diff != "" {
		t.Errorf("audit events (-want +got):\n%s", diff)
	}
}

// docs/design.md §3.3, docs/design.md §8: an approval covers exactly the arguments shown; a
// retried Await keeps one history entry and the newest token.
func TestAwaitRetryKeepsOnePause(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(req llm.Request) *llm.Response {
		return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_t1_1", Name: "publish_artifact", Arguments: `{"artifact_id":"art_x","channel":"web"}`}}}
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
	out, err = f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref, Reply: &turn.Reply{Approval: &turn.Decision{ID: turn.ApprovalID(f.turn(t)), Decision: "reject", Note: "not today"}}})
	if err != nil || out.Next != turn.NextAppend || len(out.Calls) != 0 {
		t.Fatalf("Validate(reject) = %+v, %v; want append with no calls", out, err)
	}
	if _, err := f.h.Append(ctx, turn.AppendInput{Ref: f.ref}); err != nil {
		t.Fatal(err)
	}
	tr = f.turn(t)
	last := tr.Messages[len(tr.Messages)-1]
	var r record.ToolResult
	_ = json.Unmarshal([]byte(last.Content), &r)
	if last.ToolCallID != "call_t1_1" || r.Status != record.ResultRejected || f.inv.n.Load() != 0 {
		t.Errorf("last message = %+v (status %s), invocations %d; want p1 rejected and nothing run", last, r.Status, f.inv.n.Load())
	}
	// docs/design.md §8: the rejection is audited with the hash of what was shown.
	if diff := cmp.Diff([]string{"call_t1_1/rejected/"}, f.events(t)); diff != "" {
		t.Errorf("audit events (-want +got):\n%s", diff)
	}
}

// Seed 004 §2, issue 12 defect 2: the token budget ends the turn with a
// message; it is never reported as success. The response that reaches the
// budget ends the turn there: none of its calls runs.
func TestTokenBudgetFailsTheTurn(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(req llm.Request) *llm.Response {
		return &llm.Response{ToolCalls: []llm.ToolCall{{ID: fmt.Sprintf("b%d", len(req.Messages)), Name: "create_svg_artifact", Arguments: fmt.Sprintf(`{"word":"w%d"}`, len(req.Messages))}},
			Usage: llm.Usage{InputTokens: 600, OutputTokens: 100}}
	})
	f.h.Limits.TokenBudget = 1000
	ctx := t.Context()
	if out, err := f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref}); err != nil || out.Next != turn.NextTools {
		t.Fatalf("LLMStep() = %+v, %v; want tools", out, err)
	}
	out, err := f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range out.Calls {
		if _, err := f.h.Invoke(ctx, turn.InvokeInput{Ref: f.ref, CallID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.h.Append(ctx, turn.AppendInput{Ref: f.ref}); err != nil {
		t.Fatal(err)
	}
	if out, err := f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref}); err != nil || out.Next != turn.NextFailed {
		t.Fatalf("LLMStep() reaching the budget = %+v, %v; want failed", out, err)
	}
	tr := f.turn(t)
	if tr.Status != record.StatusFailed || !strings.Contains(tr.Error, "budget of 1000 tokens") || f.llm.Load() != 2 || tr.Tokens != 1400 {
		t.Errorf("turn = %s %q after %d LLM calls, %d tokens; want failed naming the budget after 2 calls, 1400 tokens", tr.Status, tr.Error, f.llm.Load(), tr.Tokens)
	}
	if n := f.inv.n.Load(); n != 1 {
		t.Errorf("specialist ran %d times, want 1: the last response's call must not run", n)
	}
	conv, _, _ := f.store.Load(ctx, "c1", "")
	if err := providerValid(conv.LLMView("t1", 0)); err != "" {
		t.Errorf("transcript after the limit: %s", err)
	}
}

// providerValid checks that every call is answered right after its
// message, by exactly one result.
func providerValid(msgs []llm.Message) string {
	for i := 0; i < len(msgs); i++ {
		if len(msgs[i].ToolCalls) == 0 {
			continue
		}
		for k, c := range msgs[i].ToolCalls {
			j := i + 1 + k
			if j >= len(msgs) || msgs[j].Role != llm.RoleTool || msgs[j].ToolCallID != c.ID {
				return fmt.Sprintf("call %s of message %d has no result right after it", c.ID, i)
			}
		}
	}
	return ""
}

// runRounds drives the loop's handlers as the state machine does, until
// the turn ends or rounds run out, approving nothing.
func runRounds(t *testing.T, f *fixture, rounds int) turn.StepOutput {
	t.Helper()
	ctx := t.Context()
	var out turn.StepOutput
	for range rounds {
		var err error
		out, err = f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref})
		if err != nil {
			t.Fatalf("LLMStep() error = %v", err)
		}
		if out.Next != turn.NextTools {
			return out
		}
		v, err := f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref})
		if err != nil {
			t.Fatalf("Validate() error = %v", err)
		}
		if v.Next == turn.NextAwait {
			t.Fatalf("Validate() = await; this helper approves nothing")
		}
		for _, id := range v.Calls {
			if _, err := f.h.Invoke(ctx, turn.InvokeInput{Ref: f.ref, CallID: id}); err != nil {
				t.Fatalf("Invoke() error = %v", err)
			}
		}
		if _, err := f.h.Append(ctx, turn.AppendInput{Ref: f.ref}); err != nil {
			t.Fatalf("Append() error = %v", err)
		}
	}
	return out
}

// Issue 12 defect 2, docs/design.md §3.6: with MaxLLMCalls=N a model that always
// calls a tool makes the specialist run at most N-1 times, and the turn
// fails with the limit message.
func TestLastAllowedCallRunsNothing(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, func(req llm.Request) *llm.Response {
				return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_0", Name: "create_svg_artifact", Arguments: fmt.Sprintf(`{"word":"w%d"}`, len(req.Messages))}}}
			})
			f.h.Limits.MaxLLMCalls = n
			if out := runRounds(t, f, n+2); out.Next != turn.NextFailed {
				t.Fatalf("turn ended with %q, want failed", out.Next)
			}
			tr := f.turn(t)
			if got := f.inv.n.Load(); int(got) != n-1 {
				t.Errorf("specialist ran %d times, want %d", got, n-1)
			}
			if f.llm.Load() != int32(n) || tr.LLMCalls != n || !strings.Contains(tr.Error, fmt.Sprintf("more than %d model calls", n)) {
				t.Errorf("turn: %d provider calls, llm_calls %d, error %q; want %d and the limit message", f.llm.Load(), tr.LLMCalls, tr.Error, n)
			}
		})
	}
}

// Seed 004, issue 12: no-progress counts a repeat only when nothing
// changed: the same call with the same arguments and the same result. A
// poll whose answer changes is progress; the hard cap still holds.
func TestNoProgressNeedsTheSameResult(t *testing.T) {
	t.Parallel()
	poll := func(f *fixture, answers func(n int) string) {
		var n atomic.Int32
		f.inv.invoke = func(c tool.Call) record.CallOutcome {
			return record.CallOutcome{Result: record.ToolResult{Status: record.ResultSucceeded, Summary: answers(int(n.Add(1)))}}
		}
	}
	always := func(req llm.Request) *llm.Response {
		return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "x", Name: "create_svg_artifact", Arguments: `{"word":"same"}`}}}
	}
	t.Run("same result three times in a row stops before the third run", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, always)
		poll(f, func(int) string { return "pending" })
		if out := runRounds(t, f, 10); out.Next != turn.NextFailed {
			t.Fatalf("turn ended with %q, want failed", out.Next)
		}
		if tr := f.turn(t); f.inv.n.Load() != 2 || !strings.Contains(tr.Error, "no progress") {
			t.Errorf("ran %d times, error %q; want 2 runs and a no-progress message", f.inv.n.Load(), tr.Error)
		}
	})
	t.Run("a changing answer is progress until the hard cap", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, always)
		f.h.Limits.MaxLLMCalls = 6
		poll(f, func(n int) string { return fmt.Sprintf("%d%% done", n*10) })
		if out := runRounds(t, f, 10); out.Next != turn.NextFailed {
			t.Fatalf("turn ended with %q, want failed", out.Next)
		}
		if tr := f.turn(t); f.inv.n.Load() != 5 || !strings.Contains(tr.Error, "more than 6 model calls") {
			t.Errorf("ran %d times, error %q; want 5 runs and the call limit", f.inv.n.Load(), tr.Error)
		}
	})
}

// Seed 004 budgets, issue 12: a cap on re-plans; the model retrying a tool
// that failed twice ends the turn.
func TestReplanCap(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(req llm.Request) *llm.Response {
		return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "x", Name: "create_svg_artifact", Arguments: fmt.Sprintf(`{"word":"try%d"}`, len(req.Messages))}}}
	})
	f.inv.invoke = func(c tool.Call) record.CallOutcome {
		return record.CallOutcome{Result: record.ToolResult{Status: record.ResultFailed, Error: fmt.Sprintf("renderer down (%v)", c.Arguments["word"])}}
	}
	if out := runRounds(t, f, 10); out.Next != turn.NextFailed {
		t.Fatalf("turn ended with %q, want failed", out.Next)
	}
	if tr := f.turn(t); f.inv.n.Load() != 2 || !strings.Contains(tr.Error, "failed 2 times") {
		t.Errorf("ran %d times, error %q; want 2 runs and the re-plan cap", f.inv.n.Load(), tr.Error)
	}
}

// Seed 004 budgets, issue 12: the wall-clock budget of a turn does not
// count the time it waited for the user.
func TestTurnTimeoutExcludesWaits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(req llm.Request) *llm.Response {
		if req.Messages[len(req.Messages)-1].Role == llm.RoleTool {
			return &llm.Response{Text: "done"}
		}
		return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "p", Name: "publish_artifact", Arguments: `{"artifact_id":"art_x","channel":"web"}`}}}
	})
	ctx := t.Context()
	if err := f.store.PutArtifacts(ctx, "c1", artifact.Artifact{ID: "art_x", Name: "x.png", MimeType: "image/png"}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Now().UTC()
	f.h.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	f.h.Limits.TurnTimeout = time.Minute
	if _, err := f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref}); err != nil {
		t.Fatal(err)
	}
	if v, err := f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref}); err != nil || v.Next != turn.NextAwait {
		t.Fatalf("Validate() = %+v, %v; want await", v, err)
	}
	if _, err := f.h.Await(ctx, turn.AwaitInput{Ref: f.ref, TaskToken: "tok"}); err != nil {
		t.Fatal(err)
	}
	advance(2 * time.Hour) // the user takes their time
	v, err := f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref, Reply: &turn.Reply{Approval: &turn.Decision{ID: turn.ApprovalID(f.turn(t)), Decision: "approve"}}})
	if err != nil || v.Next != turn.NextInvoke {
		t.Fatalf("Validate(approve) = %+v, %v; want invoke", v, err)
	}
	for _, id := range v.Calls {
		if _, err := f.h.Invoke(ctx, turn.InvokeInput{Ref: f.ref, CallID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.h.Append(ctx, turn.AppendInput{Ref: f.ref}); err != nil {
		t.Fatal(err)
	}
	if out, err := f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref}); err != nil || out.Next != turn.NextDone {
		t.Fatalf("LLMStep() after a 2h wait = %+v, %v; want done (waits do not count)", out, err)
	}

	// The same turn shape without a wait, but 2 minutes of work: stopped.
	g := newFixture(t, func(req llm.Request) *llm.Response {
		return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "x", Name: "create_svg_artifact", Arguments: `{"word":"slow"}`}}}
	})
	start := time.Now().UTC()
	g.h.Now = func() time.Time { return start.Add(2 * time.Minute) }
	g.h.Limits.TurnTimeout = time.Minute
	if out, err := g.h.LLMStep(ctx, turn.StepInput{Ref: g.ref}); err != nil || out.Next != turn.NextFailed {
		t.Fatalf("LLMStep() over the time budget = %+v, %v; want failed", out, err)
	}
	if tr := g.turn(t); !strings.Contains(tr.Error, "time budget") || g.llm.Load() != 0 {
		t.Errorf("turn error %q after %d LLM calls; want the time budget message before any call", tr.Error, g.llm.Load())
	}
}

// Issue 12: tokens and LLM calls are counted once per real provider call,
// even when the step fails after the call and is retried.
func TestSpendCountedPerProviderCall(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(req llm.Request) *llm.Response {
		return &llm.Response{Text: "hello", Usage: llm.Usage{InputTokens: 40, OutputTokens: 2}}
	})
	ctx := t.Context()
	// The first attempt's save fails after the provider answered.
	failing := &failingSave{Store: f.store, fail: 1}
	f.h.Store = failing
	if _, err := f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref}); err == nil {
		t.Fatal("LLMStep() with a failing save succeeded")
	}
	if out, err := f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref}); err != nil || out.Next != turn.NextDone {
		t.Fatalf("retried LLMStep() = %+v, %v", out, err)
	}
	if tr := f.turn(t); tr.LLMCalls != 2 || tr.Tokens != 84 || f.llm.Load() != 2 {
		t.Errorf("turn counts %d calls, %d tokens after %d provider calls; want 2 and 84", tr.LLMCalls, tr.Tokens, f.llm.Load())
	}
}

// failingSave fails the first fail SaveTurn calls.
type failingSave struct {
	record.Store
	mu   sync.Mutex
	fail int
}

func (s *failingSave) SaveTurn(ctx context.Context, cid string, t *record.Turn, arts ...artifact.Artifact) error {
	s.mu.Lock()
	fail := s.fail > 0
	s.fail--
	s.mu.Unlock()
	if fail {
		return errors.New("connection reset")
	}
	return s.Store.SaveTurn(ctx, cid, t, arts...)
}

// docs/design.md §8, issue 4: one structured log line per step with the
// conversation, turn, step, tool, status, latency and tokens.
func TestStepLogLines(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(req llm.Request) *llm.Response {
		if req.Messages[len(req.Messages)-1].Role == llm.RoleTool {
			return &llm.Response{Text: "done", Usage: llm.Usage{InputTokens: 5, OutputTokens: 2}}
		}
		return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_t1_1", Name: "create_svg_artifact", Arguments: `{"word":"hi"}`}}, Usage: llm.Usage{InputTokens: 10, OutputTokens: 3}}
	})
	var buf bytes.Buffer
	f.h.Logger = slog.New(slog.NewJSONHandler(&buf, nil))
	ctx := t.Context()
	_, _ = f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref})
	_, _ = f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref})
	_, _ = f.h.Invoke(ctx, turn.InvokeInput{Ref: f.ref, CallID: "call_t1_1"})
	_, _ = f.h.Append(ctx, turn.AppendInput{Ref: f.ref})
	_, _ = f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref})

	type line struct {
		Msg          string `json:"msg"`
		Conversation string `json:"conversation"`
		Turn         string `json:"turn"`
		Step         string `json:"step"`
		Tool         string `json:"tool"`
		Status       string `json:"status"`
		Tokens       int    `json:"tokens"`
		LatencyMS    *int64 `json:"latency_ms"`
	}
	var steps []string
	for _, raw := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var l line
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("log line %q is not JSON: %v", raw, err)
		}
		if l.Msg != "step" {
			continue
		}
		if l.Conversation != "c1" || l.Turn != "t1" || l.Status == "" || l.LatencyMS == nil {
			t.Errorf("log line %s lacks ids, status or latency", raw)
		}
		steps = append(steps, fmt.Sprintf("%s/%s/%d", l.Step, l.Tool, l.Tokens))
	}
	want := []string{"llm//13", "validate//0", "invoke/create_svg_artifact/0", "append//0", "llm//7"}
	if diff := cmp.Diff(want, steps); diff != "" {
		t.Errorf("step lines (-want +got):\n%s", diff)
	}
}

// docs/design.md §3.6: a model that stays unreachable after the state machine's
// retries ends the turn with a message the user can act on, and a
// provider's refusal carries the provider's own words.
func TestFailTurnMessages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, errName, cause, want string
	}{
		{"unavailable", "ModelUnavailableError", `{"errorMessage":"llm: rate limited","errorType":"ModelUnavailableError"}`, "unavailable or rate limited"},
		{"refused", "ProviderError", `{"errorMessage":"HTTP 400: context too long","errorType":"ProviderError"}`, "HTTP 400: context too long"},
		{"workflow too long", "WorkflowContinuesError", `{"errorMessage":"workflow call w1 continues at step 21 in a new invocation","errorType":"WorkflowContinuesError"}`, "A workflow ran longer than the platform allows"},
		{"internal", "TransientError", `{"errorMessage":"save turn: dial tcp: refused","errorType":"TransientError"}`, "internal error; your conversation is intact"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			fail, _ := json.Marshal(map[string]string{"Error": tc.errName, "Cause": tc.cause})
			out, err := f.h.LLMStep(t.Context(), turn.StepInput{Ref: f.ref, Fail: fail})
			if err != nil || out.Next != turn.NextFailed {
				t.Fatalf("LLMStep(fail) = %+v, %v", out, err)
			}
			if tr := f.turn(t); tr.Status != record.StatusFailed || !strings.Contains(tr.Error, tc.want) {
				t.Errorf("turn = %s %q, want failed containing %q", tr.Status, tr.Error, tc.want)
			}
		})
	}
}

// docs/design.md §8: an approved call whose specialist then asks for more input
// runs the changed arguments only after a new approval.
func TestInputRequiredAfterApprovalNeedsNewApproval(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(req llm.Request) *llm.Response {
		return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_t1_1", Name: "publish_artifact", Arguments: `{"artifact_id":"art_x","channel":"web"}`}}}
	})
	f.inv.invoke = func(c tool.Call) record.CallOutcome {
		if c.Continue == nil {
			return record.CallOutcome{InputRequired: &record.InputRequired{Message: "which channel really?",
				Fields: []catalog.FormField{{Name: "channel", Type: "string", Required: true}}, Task: record.A2ATask{TaskID: "task1", ContextID: "ctx1"}}}
		}
		return record.CallOutcome{Result: record.ToolResult{Status: record.ResultSucceeded, Summary: "published to " + c.Arguments["channel"].(string)}}
	}
	ctx := t.Context()
	if err := f.store.PutArtifacts(ctx, "c1", artifact.Artifact{ID: "art_x", Name: "x.png", MimeType: "image/png"}); err != nil {
		t.Fatal(err)
	}
	mustNext := func(got, want string) {
		t.Helper()
		if got != want {
			t.Fatalf("next = %s, want %s", got, want)
		}
	}
	out, _ := f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref})
	mustNext(out.Next, turn.NextTools)
	v, _ := f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref})
	mustNext(v.Next, turn.NextAwait)
	v, _ = f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref, Reply: &turn.Reply{Approval: &turn.Decision{ID: turn.ApprovalID(f.turn(t)), Decision: "approve"}}})
	mustNext(v.Next, turn.NextInvoke)
	if _, err := f.h.Invoke(ctx, turn.InvokeInput{Ref: f.ref, CallID: "call_t1_1"}); err != nil {
		t.Fatal(err)
	}
	a, _ := f.h.Append(ctx, turn.AppendInput{Ref: f.ref})
	mustNext(a.Next, turn.NextAwait)
	v, _ = f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref, Reply: &turn.Reply{Answers: map[string]map[string]any{"call_t1_1": {"channel": "print"}}}})
	mustNext(v.Next, turn.NextAwait)
	if tr := f.turn(t); tr.Pending[0].State != record.CallNeedsApproval || tr.Pending[0].Arguments["channel"] != "print" {
		t.Fatalf("after the answer: %+v, want a new approval of channel print", tr.Pending[0])
	}
	v, _ = f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref, Reply: &turn.Reply{Approval: &turn.Decision{ID: turn.ApprovalID(f.turn(t)), Decision: "approve"}}})
	mustNext(v.Next, turn.NextInvoke)
	if _, err := f.h.Invoke(ctx, turn.InvokeInput{Ref: f.ref, CallID: "call_t1_1"}); err != nil {
		t.Fatal(err)
	}
	a, _ = f.h.Append(ctx, turn.AppendInput{Ref: f.ref})
	mustNext(a.Next, turn.NextLLM)
	if n := f.inv.n.Load(); n != 2 {
		t.Errorf("specialist called %d times, want 2 (ask, then continue)", n)
	}
	// Two approvals of two different argument sets are two events; the run
	// is audited once.
	if diff := cmp.Diff([]string{"call_t1_1/approved/", "call_t1_1/approved/", "call_t1_1/call/succeeded"}, f.events(t)); diff != "" {
		t.Errorf("audit events (-want +got):\n%s", diff)
	}
	tr := f.turn(t)
	if last := tr.Messages[len(tr.Messages)-1]; !strings.Contains(last.Content, "published to print") {
		t.Errorf("result = %s, want the continued task's result", last.Content)
	}
}

// twoCalls makes the model call create_svg_artifact twice in one message
// (ids k1, k2), then answer; the invoker asks for input on k2's first run.
func twoCallsFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, func(req llm.Request) *llm.Response {
		if req.Messages[len(req.Messages)-1].Role == llm.RoleTool {
			return &llm.Response{Text: "done"}
		}
		return &llm.Response{ToolCalls: []llm.ToolCall{
			{ID: "call_t1_1", Name: "create_svg_artifact", Arguments: `{"word":"one"}`},
			{ID: "call_t1_2", Name: "create_svg_artifact", Arguments: `{"word":"two"}`},
		}}
	})
	inner := f.inv.invoke
	f.inv.invoke = func(c tool.Call) record.CallOutcome {
		if c.CallID == "call_t1_2" && c.Continue == nil {
			return record.CallOutcome{InputRequired: &record.InputRequired{Message: "which font?",
				Fields: []catalog.FormField{{Name: "font_size", Type: "number", Required: true}}, Task: record.A2ATask{TaskID: "tk", ContextID: "cx"}}}
		}
		return inner(c)
	}
	ctx := t.Context()
	if _, err := f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref}); err != nil {
		t.Fatal(err)
	}
	v, err := f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref})
	if err != nil || len(v.Calls) != 2 {
		t.Fatalf("Validate() = %+v, %v", v, err)
	}
	for _, id := range v.Calls {
		if _, err := f.h.Invoke(ctx, turn.InvokeInput{Ref: f.ref, CallID: id}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

// docs/design.md §3.4a, docs/design.md §8: superseding a batch whose other call already ran
// keeps that call's result and artifact; only the open call is not_executed.
// A retried Append after the batch went back to a form pauses again.
func TestSupersedeKeepsCallsThatRan(t *testing.T) {
	t.Parallel()
	f := twoCallsFixture(t)
	ctx := t.Context()
	for range 2 { // the second Append is a retry
		a, err := f.h.Append(ctx, turn.AppendInput{Ref: f.ref})
		if err != nil || a.Next != turn.NextAwait {
			t.Fatalf("Append() = %+v, %v; want await for k2's form", a, err)
		}
	}
	if _, err := f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref, Reply: &turn.Reply{Superseded: true}}); err != nil {
		t.Fatal(err)
	}
	tr := f.turn(t)
	got := map[string]string{}
	for _, m := range tr.Messages {
		if m.Role == llm.RoleTool {
			var r record.ToolResult
			_ = json.Unmarshal([]byte(m.Content), &r)
			got[m.ToolCallID] = r.Status
		}
	}
	if diff := cmp.Diff(map[string]string{"call_t1_1": "succeeded", "call_t1_2": "not_executed"}, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if tr.Status != record.StatusSuperseded || len(tr.Produced) != 1 {
		t.Errorf("turn = %s produced %v; want superseded with k1's artifact", tr.Status, tr.Produced)
	}
	if diff := cmp.Diff([]string{"call_t1_1/call/succeeded", "call_t1_2/superseded/"}, f.events(t)); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
}

// A turn that fails mid-batch (the state machine's FailTurn) keeps what ran.
func TestFailTurnKeepsCallsThatRan(t *testing.T) {
	t.Parallel()
	f := twoCallsFixture(t)
	fail, _ := json.Marshal(map[string]string{"Error": "States.TaskFailed", "Cause": "{}"})
	if _, err := f.h.LLMStep(t.Context(), turn.StepInput{Ref: f.ref, Fail: fail}); err != nil {
		t.Fatal(err)
	}
	tr := f.turn(t)
	if tr.Status != record.StatusFailed || len(tr.Pending) != 0 || len(tr.Produced) != 1 {
		t.Errorf("turn = %s, %d pending, produced %v; want failed, batch closed, k1's artifact kept", tr.Status, len(tr.Pending), tr.Produced)
	}
	if diff := cmp.Diff([]string{"call_t1_1/call/succeeded", "call_t1_2/not_executed/"}, f.events(t)); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
}

// A provider that repeats or omits tool-call ids still gets every call run
// and answered: ids are made unique per conversation.
func TestDuplicateCallIDsAreRenamed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(req llm.Request) *llm.Response {
		if req.Messages[len(req.Messages)-1].Role == llm.RoleTool {
			return &llm.Response{Text: "done"}
		}
		return &llm.Response{ToolCalls: []llm.ToolCall{
			{ID: "0", Name: "create_svg_artifact", Arguments: `{"word":"a"}`},
			{ID: "0", Name: "create_svg_artifact", Arguments: `{"word":"b"}`},
			{ID: "", Name: "create_svg_artifact", Arguments: `{"word":"c"}`},
		}}
	})
	ctx := t.Context()
	if _, err := f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref}); err != nil {
		t.Fatal(err)
	}
	v, err := f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref})
	if err != nil || len(v.Calls) != 3 {
		t.Fatalf("Validate() = %+v, %v; want three distinct calls", v, err)
	}
	for _, id := range v.Calls {
		if _, err := f.h.Invoke(ctx, turn.InvokeInput{Ref: f.ref, CallID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.h.Append(ctx, turn.AppendInput{Ref: f.ref}); err != nil {
		t.Fatal(err)
	}
	if n := f.inv.n.Load(); n != 3 {
		t.Errorf("specialist ran %d times, want 3", n)
	}
	conv, _, _ := f.store.Load(ctx, "c1", "")
	msgs := conv.LLMView("t1", 80)
	results := 0
	for _, m := range msgs {
		if m.Role == llm.RoleTool {
			results++
		}
	}
	if results != 3 {
		t.Errorf("the view has %d results, want 3", results)
	}
}

// A specialist slower than the step's own deadline is cut off in time for
// its failed outcome to be stored (the Lambda is not killed mid-call).
func TestInvokeStopsBeforeTheStepDeadline(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(req llm.Request) *llm.Response {
		return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_t1_1", Name: "create_svg_artifact", Arguments: `{"word":"slow"}`}}}
	})
	f.inv.invoke = func(c tool.Call) record.CallOutcome {
		return record.CallOutcome{Result: record.ToolResult{Status: record.ResultFailed, Error: "specialist timed out"}}
	}
	blocking := f.inv.invoke
	ctx := t.Context()
	if _, err := f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref}); err != nil {
		t.Fatal(err)
	}
	var callDeadline time.Time
	f.h.Invoker = invokerFunc(func(cctx context.Context, c tool.Call) record.CallOutcome {
		callDeadline, _ = cctx.Deadline()
		<-cctx.Done()
		return blocking(c)
	})
	stepDeadline := time.Now().Add(5*time.Second + 300*time.Millisecond)
	sctx, cancel := context.WithDeadline(ctx, stepDeadline)
	defer cancel()
	out, err := f.h.Invoke(sctx, turn.InvokeInput{Ref: f.ref, CallID: "call_t1_1"})
	if err != nil || out.Status != record.ResultFailed {
		t.Fatalf("Invoke() = %+v, %v; want the failed outcome stored before the deadline", out, err)
	}
	if !callDeadline.Before(stepDeadline.Add(-4 * time.Second)) {
		t.Errorf("the specialist's deadline %s is not well before the step's %s", callDeadline, stepDeadline)
	}
}

type invokerFunc func(ctx context.Context, c tool.Call) record.CallOutcome

func (f invokerFunc) Invoke(ctx context.Context, c tool.Call) record.CallOutcome { return f(ctx, c) }

// A workflow whose next step would not fit in the invoke step's remaining
// time stops after the steps it finished, stored; the retried step (the
// state machine retries WorkflowContinuesError) resumes at the next step
// and never reruns a finished one.
func TestWorkflowContinuesInANewInvocation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(req llm.Request) *llm.Response {
		if req.Messages[len(req.Messages)-1].Role == llm.RoleTool {
			return &llm.Response{Text: "done"}
		}
		return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_t1_1", Name: "workflow_word_to_png", Arguments: `{"word":"hi"}`}}}
	})
	wfs, err := catalog.LoadWorkflows(os.DirFS("../../testdata/workflows"), ".")
	if err != nil {
		t.Fatal(err)
	}
	f.h.Catalogs = staticCatalogs{demoCatalog(t, wfs...)}
	var mu sync.Mutex
	runs := map[string]int{}
	f.inv.invoke = func(c tool.Call) record.CallOutcome {
		mu.Lock()
		runs[c.CallID]++
		mu.Unlock()
		id := "art_" + strings.ReplaceAll(c.CallID, ".", "_")
		return record.CallOutcome{Result: record.ToolResult{Status: record.ResultSucceeded, Summary: "made " + id,
			Artifacts: []artifact.Ref{{ID: id, Name: id, MimeType: "image/png"}}},
			Artifacts: []artifact.Artifact{{ID: id, Name: id, MimeType: "image/png", CreatedAt: time.Now()}}}
	}
	// Each specialist call may take an hour; the step has ten minutes.
	f.h.CallTimeout = time.Hour
	var logs bytes.Buffer
	var logMu sync.Mutex
	f.h.Logger = slog.New(slog.NewJSONHandler(lockedWriter{&logMu, &logs}, nil))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	if _, err := f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref}); err != nil {
		t.Fatal(err)
	}
	_, err = f.h.Invoke(ctx, turn.InvokeInput{Ref: f.ref, CallID: "call_t1_1"})
	var cont *turn.WorkflowContinuesError
	if !errors.As(err, &cont) || cont.Next != 1 {
		t.Fatalf("Invoke() error = %v, want WorkflowContinuesError at step 2", err)
	}
	// infra's invoke errors alarm subtracts these lines (a metric filter on
	// {$.status = "continues"}): the field must stay at the top level.
	logMu.Lock()
	line := logs.String()
	logMu.Unlock()
	if !strings.Contains(line, `"step":"invoke"`) || !strings.Contains(line, `"status":"continues"`) {
		t.Errorf("invoke log = %s, want a step line with status continues", line)
	}
	// Meanwhile the turn shows the finished step before the running workflow.
	conv, outcomes, err := f.store.Load(ctx, "c1", "t1")
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := conv.Turn("t1")
	var steps []string
	for _, s := range turnview.New(conv, tr, outcomes).Steps {
		steps = append(steps, s.Tool+"/"+s.CallID+"/"+s.Status)
	}
	if diff := cmp.Diff([]string{"create_svg_artifact/call_t1_1.0/succeeded", "workflow_word_to_png/call_t1_1/running"}, steps[len(steps)-2:]); diff != "" {
		t.Errorf("steps while the workflow runs (-want +got):\n%s", diff)
	}
	out, err := f.h.Invoke(ctx, turn.InvokeInput{Ref: f.ref, CallID: "call_t1_1"})
	if err != nil || out.Status != record.ResultSucceeded {
		t.Fatalf("retried Invoke() = %+v, %v; want the workflow finished", out, err)
	}
	if _, err := f.h.Invoke(ctx, turn.InvokeInput{Ref: f.ref, CallID: "call_t1_1"}); err != nil {
		t.Fatalf("Invoke() once more = %v", err)
	}
	if diff := cmp.Diff(map[string]int{"call_t1_1.0": 1, "call_t1_1.1": 1}, runs); diff != "" {
		t.Errorf("specialist calls per step (-want +got):\n%s", diff)
	}
	if _, err := f.h.Append(ctx, turn.AppendInput{Ref: f.ref}); err != nil {
		t.Fatal(err)
	}
	if tr := f.turn(t); len(tr.Produced) != 2 {
		t.Errorf("produced = %v, want both steps' artifacts on the workflow call", tr.Produced)
	}
}

// lockedWriter serializes writes to a buffer the test reads.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// The status-change events of the stack's EventBridge rule reach the
// llmstep function beside its state-machine payloads: a failed, timed-out
// or stopped execution ends a turn that still reads as running, with its
// error's message; other events and other executions change nothing.
func TestLLMStepOrEventRecordsDeadExecutions(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	handler := turnlambda.LLMStepOrEvent(f.h)
	event := func(status, input, errName string) json.RawMessage {
		ev := map[string]any{"version": "0", "detail-type": "Step Functions Execution Status Change", "source": "aws.states",
			"detail": map[string]any{"executionArn": "arn:aws:states:us-east-1:1:execution:t:t1", "status": status, "input": input, "error": errName, "cause": "{}"}}
		b, _ := json.Marshal(ev)
		return b
	}
	input := `{"conversation_id":"c1","turn_id":"t1","await_timeout_seconds":60}`
	for _, ev := range []json.RawMessage{event("SUCCEEDED", input, ""), event("FAILED", `not json`, "X"), event("FAILED", `{"conversation_id":"gone","turn_id":"t9"}`, "X")} {
		if _, err := handler(t.Context(), ev); err != nil {
			t.Errorf("handler(%s) = %v, want nil (nothing to record, nothing to retry)", ev, err)
		}
	}
	if tr := f.turn(t); tr.Status != record.StatusRunning {
		t.Fatalf("turn after unrelated events = %s, want running", tr.Status)
	}
	if _, err := handler(t.Context(), event("TIMED_OUT", input, "ModelUnavailableError")); err != nil {
		t.Fatalf("handler(TIMED_OUT) = %v", err)
	}
	tr := f.turn(t)
	if tr.Status != record.StatusFailed || !strings.Contains(tr.Error, "unavailable or rate limited") {
		t.Errorf("turn = %s %q, want failed with the model-unavailable message", tr.Status, tr.Error)
	}
	// The state machine's own payloads still reach LLMStep.
	out, err := handler(t.Context(), json.RawMessage(`{"conversation_id":"c1","turn_id":"t1"}`))
	if err != nil || !strings.Contains(string(out), `"next":"failed"`) {
		t.Errorf("handler(step payload) = %s, %v; want LLMStep's answer for a failed turn", out, err)
	}
}

// A specialist's huge reply is stored within the limits the model reads it
// in (docs/design.md §3.5): the record never holds more.
func TestInvokeStoresRepliesWithinLimits(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(req llm.Request) *llm.Response {
		return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "x", Name: "create_svg_artifact", Arguments: `{"word":"big"}`}}}
	})
	huge := strings.Repeat("é", 100_000)
	f.inv.invoke = func(c tool.Call) record.CallOutcome {
		return record.CallOutcome{Result: record.ToolResult{Status: record.ResultFailed, Summary: huge, Result: huge, Error: huge}}
	}
	ctx := t.Context()
	if _, err := f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref}); err != nil {
		t.Fatal(err)
	}
	v, err := f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref})
	if err != nil || len(v.Calls) != 1 {
		t.Fatalf("Validate() = %+v, %v", v, err)
	}
	if _, err := f.h.Invoke(ctx, turn.InvokeInput{Ref: f.ref, CallID: v.Calls[0]}); err != nil {
		t.Fatal(err)
	}
	_, outcomes, err := f.store.LoadStep(ctx, "c1", record.Query{TurnID: "t1", Outcomes: true})
	if err != nil {
		t.Fatal(err)
	}
	o := outcomes[v.Calls[0]].Result
	for name, got := range map[string]string{"summary": o.Summary, "result": o.Result, "error": o.Error} {
		if n := len([]rune(got)); n == 0 || n > 6000 {
			t.Errorf("stored %s has %d characters, want it cut to the model's limit", name, n)
		}
	}
}

// Issue 30: a cancelled turn's call that had started but lost its step (a
// crash, a lost loop execution: its outcome was never stored) is handed
// to Invoke again by a loop that starts over at LLMStep, and runs to its
// end; once its outcome is stored, the same steps end the loop.
func TestLostCallOfCancelledTurnRunsAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(req llm.Request) *llm.Response {
		return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "x", Name: "create_svg_artifact", Arguments: `{"word":"hi"}`}}}
	})
	ctx := t.Context()
	if out, err := f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref}); err != nil || out.Next != turn.NextTools {
		t.Fatalf("LLMStep = %+v, %v", out, err)
	}
	v, err := f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref})
	if err != nil || v.Next != turn.NextInvoke || len(v.Calls) != 1 {
		t.Fatalf("Validate = %+v, %v", v, err)
	}
	// The call starts; its step dies before storing the outcome; the user cancels.
	if ok, err := f.store.StartCall(ctx, "c1", "t1", v.Calls[0]); err != nil || !ok {
		t.Fatalf("StartCall = %v, %v", ok, err)
	}
	if _, _, err := f.h.Cancel(ctx, f.ref, "dev"); err != nil {
		t.Fatal(err)
	}
	if tr := f.turn(t); tr.Status != record.StatusCancelled || len(tr.Pending) != 1 || tr.Pending[0].State != record.CallRunning {
		t.Fatalf("after the cancel the turn = %s with %+v, want cancelled with the call running", tr.Status, tr.Pending)
	}
	// A new loop starts at LLMStep.
	if out, err := f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref}); err != nil || out.Next != turn.NextTools {
		t.Fatalf("LLMStep on the cancelled turn = %+v, %v; want tools (a started call lost its step)", out, err)
	}
	v, err = f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref})
	if err != nil || v.Next != turn.NextInvoke || len(v.Calls) != 1 || v.Calls[0] != "call_t1_1" {
		t.Fatalf("Validate on the cancelled turn = %+v, %v; want the lost call invoked", v, err)
	}
	if _, err := f.h.Invoke(ctx, turn.InvokeInput{Ref: f.ref, CallID: v.Calls[0]}); err != nil {
		t.Fatal(err)
	}
	if n := f.inv.n.Load(); n != 1 {
		t.Errorf("specialist ran %d times, want 1", n)
	}
	// Settled: the steps end the loop, and nothing runs again.
	if out, err := f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref}); err != nil || out.Next != turn.NextDone {
		t.Errorf("LLMStep after the settle = %+v, %v; want done", out, err)
	}
	if v, err := f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref}); err != nil || v.Next != turn.NextEnd {
		t.Errorf("Validate after the settle = %+v, %v; want end", v, err)
	}
	if tr := f.turn(t); tr.Status != record.StatusCancelled || f.llm.Load() != 1 {
		t.Errorf("turn = %s after %d LLM calls, want cancelled after 1", tr.Status, f.llm.Load())
	}
}

// gatedEvents is the store's event log, whose write of a step.started
// waits (up to 5 s) for the model to have been called.
type gatedEvents struct {
	*valkey.Store
	called chan struct{}
	early  atomic.Bool // a step.started was written before the model was called
}

func (g *gatedEvents) Emit(ctx context.Context, cid string, evs ...record.Event) error {
	for _, e := range evs {
		if e.Type == record.EventStepStarted {
			select {
			case <-g.called:
			case <-time.After(5 * time.Second):
				g.early.Store(true)
			}
		}
	}
	return g.Store.Emit(ctx, cid, evs...)
}

// An LLM step writes its step.started while the model thinks, not before
// calling it, and the log still reads step.started, the streamed text,
// step.ended, in that order (docs/design.md, the event log).
func TestLLMStepStartedWrittenWhileTheModelThinks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	g := &gatedEvents{Store: f.store, called: make(chan struct{})}
	f.h.Events = g
	f.h.StartedAfter = time.Millisecond
	var thinking atomic.Bool // the log had step.started while the model thought
	f.h.LLM = llmtest.ProviderFunc(func(ctx context.Context, req llm.Request) (*llm.Response, error) {
		close(g.called)
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if types := logTypes(t, f.store); slices.Contains(types, record.EventStepStarted) {
				thinking.Store(true)
				break
			}
		}
		for _, s := range []string{"Hel", "lo ", "there"} {
			req.OnText(s)
		}
		return &llm.Response{Text: "Hello there"}, nil
	})
	if _, err := f.h.LLMStep(t.Context(), turn.StepInput{Ref: f.ref}); err != nil {
		t.Fatal(err)
	}
	if g.early.Load() {
		t.Error("step.started was written before the model was called")
	}
	if !thinking.Load() {
		t.Error("step.started was not in the log while the model thought")
	}
	evs, err := f.store.Events(t.Context(), "c1", "", 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	var text strings.Builder
	for _, e := range evs {
		if len(types) == 0 || types[len(types)-1] != e.Type {
			types = append(types, e.Type)
		}
		if e.Type == record.EventLLMDelta {
			text.WriteString(e.Fields()["text"].(string))
		}
	}
	want := []string{record.EventStepStarted, record.EventLLMDelta, record.EventStepEnded}
	if !slices.Equal(types[:min(3, len(types))], want) || text.String() != "Hello there" {
		t.Errorf("event log = %v with text %q, want %v… with %q", types, text.String(), want, "Hello there")
	}
}

// logTypes is the types of c1's event log, in its order.
func logTypes(t *testing.T, s *valkey.Store) []string {
	evs, err := s.Events(context.WithoutCancel(t.Context()), "c1", "", 100, 0)
	if err != nil {
		t.Error(err)
	}
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	return types
}

// countedEvents is the store's event log counting the events written on
// their own (Emit), by type.
type countedEvents struct {
	*valkey.Store
	mu sync.Mutex
	n  map[string]int
}

func (c *countedEvents) Emit(ctx context.Context, cid string, evs ...record.Event) error {
	c.mu.Lock()
	for _, e := range evs {
		c.n[e.Type]++
	}
	c.mu.Unlock()
	return c.Store.Emit(ctx, cid, evs...)
}

// A model that answers before the step has waited StartedAfter for it:
// the call's step.started rides on the step's own write, first among its
// events, and is not written on its own; a cancel that refuses that write
// still leaves the page both ends of the step.
func TestAQuickAnswersStepStartedRidesOnTheStepsWrite(t *testing.T) {
	t.Parallel()
	for _, cancel := range []bool{false, true} {
		t.Run(map[bool]string{false: "saved", true: "cancelled"}[cancel], func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, nil)
			c := &countedEvents{Store: f.store, n: map[string]int{}}
			f.h.Events = c
			f.h.StartedAfter = time.Minute
			f.h.LLM = llmtest.ProviderFunc(func(ctx context.Context, req llm.Request) (*llm.Response, error) {
				if cancel {
					if _, _, err := f.h.Cancel(ctx, f.ref, "dev"); err != nil {
						t.Error(err)
					}
				}
				return &llm.Response{Text: "Hello there"}, nil
			})
			_, err := f.h.LLMStep(t.Context(), turn.StepInput{Ref: f.ref})
			if cerr := (*turn.CancelledError)(nil); cancel != errors.As(err, &cerr) || !cancel && err != nil {
				t.Fatalf("LLMStep = %v, cancelled %v", err, cancel)
			}
			types := logTypes(t, f.store)
			i, j := slices.Index(types, record.EventStepStarted), slices.Index(types, record.EventStepEnded)
			if i < 0 || j < i {
				t.Errorf("event log = %v, want step.started before step.ended", types)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if n := c.n[record.EventStepStarted]; !cancel && n != 0 {
				t.Errorf("step.started written on its own %d times, want it in the step's write", n)
			}
		})
	}
}

// outcomeAfterAudit is a store whose PutOutcome waits for the audit log
// to be written (up to 5 s), then answers err (nil: stores it).
type outcomeAfterAudit struct {
	record.Store
	audited chan struct{}
	late    atomic.Bool // the outcome was written before the audit
	err     error
}

func (s *outcomeAfterAudit) PutOutcome(ctx context.Context, cid, tid string, o record.CallOutcome) (record.Put, error) {
	select {
	case <-s.audited:
	case <-time.After(5 * time.Second):
		s.late.Store(true)
	}
	if s.err != nil {
		return record.Put{}, s.err
	}
	return s.Store.PutOutcome(ctx, cid, tid, o)
}

// signalledAudit closes its channel at the first Record.
type signalledAudit struct {
	audit.Dir
	once sync.Once
	ch   chan struct{}
}

func (a *signalledAudit) Record(ctx context.Context, evs ...audit.Event) error {
	err := a.Dir.Record(ctx, evs...)
	a.once.Do(func() { close(a.ch) })
	return err
}

// docs/design.md §8: a call that ran is in the audit log whatever becomes
// of its outcome, and the log's write does not wait for the outcome's:
// both are written at once. With the conversation deleted while the call
// ran, the outcome is refused and the call is still recorded.
func TestExecutedCallAuditedWhileItsOutcomeIsStored(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
	}{{"stored", nil}, {"conversation deleted", record.ErrNotFound}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, func(req llm.Request) *llm.Response {
				return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_t1_1", Name: "create_svg_artifact", Arguments: `{"word":"hi"}`}}}
			})
			ch := make(chan struct{})
			f.h.Audit = &signalledAudit{Dir: f.audit, ch: ch}
			st := &outcomeAfterAudit{Store: f.store, audited: ch, err: tc.err}
			ctx := t.Context()
			if _, err := f.h.LLMStep(ctx, turn.StepInput{Ref: f.ref}); err != nil {
				t.Fatal(err)
			}
			if _, err := f.h.Validate(ctx, turn.ValidateInput{Ref: f.ref}); err != nil {
				t.Fatal(err)
			}
			f.h.Store = st
			_, err := f.h.Invoke(ctx, turn.InvokeInput{Ref: f.ref, CallID: "call_t1_1"})
			var nf *turn.NotFoundError
			if (tc.err == nil && err != nil) || (tc.err != nil && !errors.As(err, &nf)) {
				t.Fatalf("Invoke() error = %v", err)
			}
			if st.late.Load() {
				t.Error("the audit log was written only after the outcome")
			}
			if diff := cmp.Diff([]string{"call_t1_1/call/succeeded"}, f.events(t)); diff != "" {
				t.Errorf("audit events (-want +got):\n%s", diff)
			}
		})
	}
}
