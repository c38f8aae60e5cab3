package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/clientagent/clientagent/pkg/audit"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/llmtest"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/turn/turnlambda"
	"github.com/clientagent/clientagent/pkg/wire"
)

// A Valkey outage in the middle of a turn that ends within the budget
// (docs/architecture.md, "How long a store outage a turn survives"): the
// turn waits for the store and goes on; the specialist ran once, the
// conversation is intact and the next turn works.
func TestValkeyOutageWithinTheBudgetTheTurnGoesOn(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	slow, agentURL := startSlowAgent(t, 1500*time.Millisecond)
	m := &model{decide: func(req llm.Request) *llm.Response {
		if strings.Contains(lastUser(req), "again") {
			return answer("back to normal")
		}
		if len(toolResults(req)) > 0 {
			return answer("done after the outage")
		}
		return calls(call("x1", "slow_echo", map[string]any{"text": "hold on"}))
	}}
	_, c := stack(t, m, func(cfg *Config) {
		cfg.ValkeyURL = "redis://" + mr.Addr()
		cfg.Agents = []string{agentURL}
	})
	cid := c.newConversation()
	tid := c.send(cid, "echo slowly")
	c.waitRunning(cid, tid, "slow_echo")
	mr.Close()                  // Valkey goes away while the specialist works
	time.Sleep(3 * time.Second) // the fault itself: the specialist ends meanwhile
	if err := mr.Restart(); err != nil {
		t.Fatal(err)
	}
	var v wire.Turn
	for end := time.Now().Add(40 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if c.do("GET", "/v1/conversations/"+cid+"/turns/"+tid, nil, &v) == http.StatusOK && v.Status != "running" {
			break
		}
	}
	if v.Status != "succeeded" || v.Reply != "done after the outage" {
		t.Errorf("turn after the outage = %s %q, want it resumed and succeeded", v.Status, v.Reply)
	}
	slow.mu.Lock()
	if len(slow.runs) != 1 {
		t.Errorf("the specialist ran %d times, want once", len(slow.runs))
	}
	slow.mu.Unlock()
	h := c.historyOf(cid)
	if len(h) == 0 || h[0]["content"] != "echo slowly" {
		t.Errorf("history = %v, want the user's message kept", h)
	}
	if v := c.wait(cid, c.send(cid, "try again")); v.Status != "succeeded" || v.Reply != "back to normal" {
		t.Errorf("next turn = %s %q, want succeeded", v.Status, v.Reply)
	}
}

// Issue 2 item 6 / docs/design.md §11: an LLM step that hits a rate-limited model is
// retried by the state machine on its own (validation is not re-run), and
// the turn goes on once the model answers.
func TestRateLimitedModelIsRetried(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	m := llmtest.ProviderFunc(func(ctx context.Context, req llm.Request) (*llm.Response, error) {
		if n.Add(1) <= 2 {
			return nil, fmt.Errorf("HTTP 429 after 4 attempts: %w", llm.ErrRateLimited)
		}
		return &llm.Response{Text: "finally"}, nil
	})
	_, c := stack(t, m)
	cid := c.newConversation()
	v := c.wait(cid, c.send(cid, "hello"))
	if v.Status != "succeeded" || v.Reply != "finally" || v.LLMCalls != 1 || n.Load() != 3 {
		t.Errorf("turn = %s %q with %d recorded LLM calls after %d attempts; want succeeded on the third attempt", v.Status, v.Reply, v.LLMCalls, n.Load())
	}
}

// A turn stored by the API whose execution never started (the API died in
// between) reads as failed after a minute instead of running forever.
func TestUnstartedTurnReadsFailed(t *testing.T) {
	t.Parallel()
	st, c := stack(t, &model{decide: func(llm.Request) *llm.Response { return answer("hi") }})
	cid := c.newConversation()
	old := time.Now().Add(-2 * time.Minute).UTC()
	tr := &record.Turn{ID: "t_orphan", StartedAt: old, UpdatedAt: old, Status: record.StatusRunning, Text: "lost?",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "lost?"}}}
	if err := st.Platform.Store.SaveTurn(t.Context(), cid, tr); err != nil {
		t.Fatal(err)
	}
	if v := c.turn(cid, "t_orphan"); v.Status != "failed" || !strings.Contains(v.Reply, "never started") {
		t.Errorf("turn = %s %q, want failed: never started", v.Status, v.Reply)
	}
	if conv, _, err := st.Platform.Store.Load(t.Context(), cid, ""); err != nil {
		t.Errorf("Load() = %v", err)
	} else if tr, _ := conv.Turn("t_orphan"); tr == nil || tr.Status != record.StatusFailed || !strings.Contains(tr.Error, "never started") {
		t.Errorf("stored turn = %+v, want failed: never started (recorded, not only shown)", tr)
	}
}

// Nothing but our API drives the local engine: the stack serves no Step
// Functions endpoint (its API calls the engine in process), so a Step
// Functions request to it answers no task token.
func TestEngineEndpointRefusesStrangers(t *testing.T) {
	t.Parallel()
	st, _ := stack(t, &model{decide: func(llm.Request) *llm.Response { return answer("hi") }})
	for _, path := range []string{"/sfn/", "/"} {
		req, _ := http.NewRequest("POST", st.URL()+path, strings.NewReader(`{"taskToken":"x","output":"{}"}`))
		req.Header.Set("X-Amz-Target", "AWSStepFunctions.SendTaskSuccess")
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=local/20261130/us-east-1/states/aws4_request, SignedHeaders=host, Signature=00")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 400 || strings.Contains(string(body), "__type") {
			t.Errorf("SendTaskSuccess to %s = %d %s, want no Step Functions answer", path, resp.StatusCode, body)
		}
	}
}

// Deleting a conversation while a turn runs deletes it for good: the
// steps still in flight cannot write the deleted record back.
func TestDeleteWhileRunning(t *testing.T) {
	t.Parallel()
	_, agentURL := startSlowAgent(t, 500*time.Millisecond)
	st, c := stack(t, &model{decide: func(req llm.Request) *llm.Response {
		if len(toolResults(req)) > 0 {
			return answer("done")
		}
		return calls(call("d1", "slow_echo", map[string]any{"text": "x"}))
	}}, func(cfg *Config) { cfg.Agents = []string{agentURL} })
	// invoked is closed when the specialist's invoke step has returned,
	// after it tried to store the call's outcome (issue 31: the test slept
	// 700 ms for that).
	started, invoked := make(chan struct{}), make(chan struct{})
	var onceS, onceI sync.Once
	invoke := turnlambda.JSON(st.Platform.Handlers.Invoke)
	st.Engine.RegisterFunction(functionNames["InvokeFunction"], func(ctx context.Context, p json.RawMessage) (json.RawMessage, error) {
		onceS.Do(func() { close(started) })
		defer onceI.Do(func() { close(invoked) })
		return invoke(ctx, p)
	})
	cid := c.newConversation()
	tid := c.send(cid, "slow")
	select { // the specialist's call is in flight
	case <-started:
	case <-time.After(60 * time.Second):
		t.Fatal("the invoke step did not start within 60s")
	}
	if code := c.do("DELETE", "/v1/conversations/"+cid, nil, nil); code != http.StatusNoContent {
		t.Fatalf("DELETE = %d, want 204", code)
	}
	arn := strings.Replace(st.StateMachineARN, ":stateMachine:", ":execution:", 1) + ":" + tid
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := st.Engine.Wait(ctx, arn); err != nil {
		t.Fatal(err)
	}
	select {
	case <-invoked:
	case <-time.After(60 * time.Second):
		t.Fatal("the invoke step did not return within 60s")
	}
	n, err := st.Redis.Exists(t.Context(), "conv:{"+cid+"}", "conv:{"+cid+"}:artifacts", "conv:{"+cid+"}:results:"+tid).Result()
	if err != nil || n != 0 {
		t.Errorf("keys of the deleted conversation = %d, %v; want none", n, err)
	}
	if code := c.do("GET", "/v1/conversations/"+cid, nil, nil); code != http.StatusNotFound {
		t.Errorf("GET deleted conversation = %d, want 404", code)
	}
}

// An execution stopped from outside (an operator's StopExecution) ends its
// turn in the record itself, with no reader: the status change reaches the
// llmstep function as the stack's EventBridge rule sends it on AWS.
func TestStoppedExecutionEndsItsTurn(t *testing.T) {
	t.Parallel()
	_, agentURL := startSlowAgent(t, 3*time.Second)
	m := &model{decide: func(req llm.Request) *llm.Response {
		return calls(call("s1", "slow_echo", map[string]any{"text": "hold on"}))
	}}
	dir := t.TempDir()
	st, c := stack(t, m, func(cfg *Config) { cfg.Agents = []string{agentURL}; cfg.DataDir = dir })
	cid := c.newConversation()
	tid := c.send(cid, "echo slowly")
	arn := strings.Replace(st.StateMachineARN, ":stateMachine:", ":execution:", 1) + ":" + tid
	eventuallyTrue(t, 10*time.Second, "the call starts", func() bool {
		for _, s := range c.turn(cid, tid).Steps {
			if s.Tool == "slow_echo" && s.Status == "running" {
				return true
			}
		}
		return false
	})
	if _, err := st.Engine.StopExecution(t.Context(), arn, "Operator", "stopped by hand"); err != nil {
		t.Fatal(err)
	}
	var tr *record.Turn
	eventuallyTrue(t, 10*time.Second, "the stored turn ends", func() bool {
		conv, _, err := st.Platform.Store.Load(t.Context(), cid, "")
		if err != nil {
			return false
		}
		tr, _ = conv.Turn(tid)
		return tr != nil && tr.Status == record.StatusFailed
	})
	if !strings.Contains(tr.Error, "intact") {
		t.Errorf("turn error = %q, want the internal-error message", tr.Error)
	}
	// The call in flight runs to its end, as a Lambda in flight does: the
	// audit records it (and the test's data folder is not removed while
	// that is written).
	eventuallyTrue(t, 10*time.Second, "the call in flight is audited", func() bool {
		evs, _ := audit.ReadDir(filepath.Join(dir, "audit"))
		for _, e := range evs {
			if e.Kind == audit.KindCall && e.Turn == tid {
				return true
			}
		}
		return false
	})
}

// eventuallyTrue polls cond until it holds or d passes.
func eventuallyTrue(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not within %v", what, d)
}
