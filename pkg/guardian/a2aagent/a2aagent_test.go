package a2aagent_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/google/go-cmp/cmp"

	"github.com/clientagent/clientagent/pkg/guardian"
	"github.com/clientagent/clientagent/pkg/guardian/a2aagent"
)

// agent is a guardian agent whose answer is a function field; it records
// the last message it received.
type agent struct {
	answer func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error

	mu   sync.Mutex
	last *a2a.Message
}

var _ a2asrv.AgentExecutor = (*agent)(nil)

func (a *agent) Execute(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
	a.mu.Lock()
	a.last = reqCtx.Message
	a.mu.Unlock()
	return a.answer(ctx, reqCtx, q)
}

func (a *agent) Cancel(context.Context, *a2asrv.RequestContext, eventqueue.Queue) error { return nil }

func serve(t *testing.T, a *agent) string {
	t.Helper()
	srv := httptest.NewServer(a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(a)))
	t.Cleanup(srv.Close)
	return srv.URL
}

// reply answers with a message of the given parts.
func reply(parts ...a2a.Part) func(context.Context, *a2asrv.RequestContext, eventqueue.Queue) error {
	return func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
		return q.Write(ctx, a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, parts...))
	}
}

// finish ends a task in state with the given status parts.
func finish(state a2a.TaskState, parts ...a2a.Part) func(context.Context, *a2asrv.RequestContext, eventqueue.Queue) error {
	return func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
		if err := q.Write(ctx, a2a.NewStatusUpdateEvent(reqCtx, a2a.TaskStateWorking, nil)); err != nil {
			return err
		}
		ev := a2a.NewStatusUpdateEvent(reqCtx, state, a2a.NewMessageForTask(a2a.MessageRoleAgent, reqCtx, parts...))
		ev.Final = true
		return q.Write(ctx, ev)
	}
}

func TestCheckDecisions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		answer func(context.Context, *a2asrv.RequestContext, eventqueue.Queue) error
		want   guardian.Decision
	}{
		{"allowed data part", reply(a2a.DataPart{Data: map[string]any{"decision": "allowed"}}),
			guardian.Decision{Action: guardian.Allow, Rule: "NAME"}},
		{"blocked with a reason and a rule", reply(a2a.TextPart{Text: "no"}, a2a.DataPart{Data: map[string]any{"decision": "blocked", "reason": "weapons", "rule": "w1"}}),
			guardian.Decision{Action: guardian.Block, Reason: "weapons", Rule: "w1"}},
		{"text JSON", reply(a2a.TextPart{Text: ` {"decision": "Block", "reason": "nope"} `}),
			guardian.Decision{Action: guardian.Block, Reason: "nope", Rule: "NAME"}},
		{"redact", reply(a2a.DataPart{Data: map[string]any{"decision": "redact", "reason": "pii", "text": "[redacted]"}}),
			guardian.Decision{Action: guardian.Redact, Reason: "pii", Text: "[redacted]", Rule: "NAME"}},
		{"completed task", finish(a2a.TaskStateCompleted, a2a.DataPart{Data: map[string]any{"decision": "allow"}}),
			guardian.Decision{Action: guardian.Allow, Rule: "NAME"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := &agent{answer: tc.answer}
			c, err := a2aagent.New(serve(t, a)+"/#check", nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Check(t.Context(), guardian.Input{Kind: guardian.ToolCall, Tool: "send", Arguments: map[string]any{"to": "x"}})
			if err != nil {
				t.Fatalf("Check() error = %v", err)
			}
			if tc.want.Rule == "NAME" {
				tc.want.Rule = c.Name()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Check() mismatch (-want +got):\n%s", diff)
			}
			a.mu.Lock()
			defer a.mu.Unlock()
			wantData := map[string]any{"kind": "tool_call", "text": `{"to":"x"}`, "tool": "send", "arguments": map[string]any{"to": "x"}}
			var data map[string]any
			for _, p := range a.last.Parts {
				if d, ok := p.(a2a.DataPart); ok {
					data = d.Data
				}
			}
			if diff := cmp.Diff(wantData, data); diff != "" {
				t.Errorf("sent data part mismatch (-want +got):\n%s", diff)
			}
			if a.last.Metadata["skillId"] != "check" {
				t.Errorf("sent skillId = %v, want check", a.last.Metadata["skillId"])
			}
		})
	}
}

func TestCheckFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		answer func(context.Context, *a2asrv.RequestContext, eventqueue.Queue) error
		want   string
	}{
		{"no decision", reply(a2a.TextPart{Text: "looks fine to me"}), "no decision"},
		{"unknown decision", reply(a2a.DataPart{Data: map[string]any{"decision": "perhaps"}}), `unknown decision "perhaps"`},
		{"redact without text", reply(a2a.DataPart{Data: map[string]any{"decision": "redact"}}), "without the redacted text"},
		{"failed task", finish(a2a.TaskStateFailed, a2a.TextPart{Text: "model offline"}), "failed: model offline"},
		{"executor error", func(context.Context, *a2asrv.RequestContext, eventqueue.Queue) error { return errors.New("boom") }, "guardian agent"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := a2aagent.New(serve(t, &agent{answer: tc.answer}), nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Check(t.Context(), guardian.Input{Kind: guardian.Request, Text: "hi"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check() error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestCheckDownOrSlow(t *testing.T) {
	t.Parallel()
	// Down: a closed server.
	srv := httptest.NewServer(http.NotFoundHandler())
	down := srv.URL
	srv.Close()
	c, _ := a2aagent.New(down, nil)
	if _, err := c.Check(t.Context(), guardian.Input{Kind: guardian.Request, Text: "hi"}); err == nil {
		t.Error("Check(down agent) = nil error, want one")
	}

	// Slow: the Checker's deadline ends the call, and the turn fails closed.
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	slow := &agent{answer: func(ctx context.Context, reqCtx *a2asrv.RequestContext, q eventqueue.Queue) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return reply(a2a.DataPart{Data: map[string]any{"decision": "allowed"}})(ctx, reqCtx, q)
	}}
	g, _ := a2aagent.New(serve(t, slow), nil)
	checker := guardian.New(g, g.Name(), guardian.Policy{Timeout: 100 * time.Millisecond})
	start := time.Now()
	_, err := checker.Check(t.Context(), guardian.Input{Kind: guardian.Request, Text: "hi"})
	var ge *guardian.CheckError
	if !errors.As(err, &ge) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Check(slow agent) error = %v, want a *guardian.CheckError wrapping the deadline", err)
	}
	// The agent answers only at the test's end: the error above says the
	// deadline ended the call, and this bound is generous for a loaded
	// machine (issue 31).
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("Check(slow agent) took %s, want about the 100ms deadline", d)
	}
}

func TestNewRejectsBadURLs(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"", "ftp://x", "guardian.local:8080"} {
		if _, err := a2aagent.New(spec, nil); err == nil {
			t.Errorf("New(%q) = nil error, want one", spec)
		}
	}
	c, err := a2aagent.New("http://127.0.0.1:8080/agents/guardian/", nil)
	if err != nil || c.Name() != "a2a:http://127.0.0.1:8080/agents/guardian#guardian_check" {
		t.Errorf("New() = %v, %v; want the default skill", c.Name(), err)
	}
}
