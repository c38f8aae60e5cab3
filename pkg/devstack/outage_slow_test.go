//go:build slow

package devstack

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/clientagent/clientagent/pkg/api"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/wire"
)

// A Valkey outage past the budget (docs/architecture.md, "How long a store
// outage a turn survives") fails the turn cleanly: the execution ends, the
// turn reads as failed with a message once Valkey is back, the
// conversation is intact, and the next turn works.
func TestSlowValkeyOutagePastTheBudgetFailsTurnCleanly(t *testing.T) {
	mr := miniredis.RunT(t)
	_, agentURL := startSlowAgent(t, 1500*time.Millisecond)
	m := &model{decide: func(req llm.Request) *llm.Response {
		if strings.Contains(lastUser(req), "again") {
			return answer("back to normal")
		}
		return calls(call("x1", "slow_echo", map[string]any{"text": "hold on"}))
	}}
	st, c := stack(t, m, func(cfg *Config) {
		cfg.ValkeyURL = "redis://" + mr.Addr()
		cfg.Agents = []string{agentURL}
		// The in-process wait is the step's own (turn.DefaultStoreOutage
		// in production); the state machine's 124 s of retries are the
		// file's and run here unchanged.
		cfg.StoreOutage = 5 * time.Second
	})
	cid := c.newConversation()
	tid := c.send(cid, "echo slowly")
	c.waitRunning(cid, tid, "slow_echo")
	mr.Close() // Valkey goes away while the specialist works, for longer than the budget

	arn := strings.Replace(st.StateMachineARN, ":stateMachine:", ":execution:", 1) + ":" + tid
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	ex, err := st.Engine.Wait(ctx, arn)
	if err != nil {
		t.Fatalf("Wait() = %v", err)
	}
	if ex.Status != "FAILED" {
		t.Errorf("execution status = %s, want FAILED", ex.Status)
	}
	if err := mr.Restart(); err != nil {
		t.Fatal(err)
	}
	// The record still says running, so the API asks Step Functions once
	// the record is older than api.DefaultFreshFor.
	var v wire.Turn
	for end := time.Now().Add(api.DefaultFreshFor + 20*time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if c.do("GET", "/v1/conversations/"+cid+"/turns/"+tid, nil, &v) == http.StatusOK && v.Status != "running" {
			break
		}
	}
	if v.Status != "failed" || !strings.Contains(v.Reply, "intact") {
		t.Errorf("turn = %s %q, want failed with a message", v.Status, v.Reply)
	}
	if conv, _, err := st.Platform.Store.Load(t.Context(), cid, ""); err != nil {
		t.Errorf("Load() = %v", err)
	} else if tr, _ := conv.Turn(tid); tr == nil || tr.Status != record.StatusFailed {
		t.Errorf("stored turn = %+v, want failed", tr)
	}
	if h := c.historyOf(cid); len(h) == 0 || h[0]["content"] != "echo slowly" {
		t.Errorf("history = %v, want the user's message kept", h)
	}
	// The next message is taken once every client of the store has dialled
	// it again (a pool that failed to dial waits up to a second before its
	// next try); until then the answer is a 503 with Retry-After, as for
	// any store blip, and the message can be sent again.
	var next string
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		var out struct {
			TurnID string `json:"turn_id"`
		}
		code := c.do("POST", "/v1/conversations/"+cid+"/messages", map[string]any{"text": "try again"}, &out)
		if code == http.StatusAccepted {
			next = out.TurnID
			break
		}
		if code != http.StatusServiceUnavailable || time.Now().After(end) {
			t.Fatalf("POST messages = %d, want 202 (or a 503 while the store's clients reconnect)", code)
		}
	}
	if v := c.wait(cid, next); v.Status != "succeeded" || v.Reply != "back to normal" {
		t.Errorf("next turn = %s %q, want succeeded", v.Status, v.Reply)
	}
}
