package sfnlocal

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTurnShape runs testdata/turnlike.asl.json, the shape of the turn
// machine: LLM step → validate → await the user (task token) → validate →
// invoke calls in a Map → append results → LLM step → done.
func TestTurnShape(t *testing.T) {
	t.Parallel()
	e, _ := testEngine(t, Options{})
	var llm, validate atomic.Int32
	tokens := make(chan string, 1)
	e.RegisterFunction("LLMStep", func(context.Context, json.RawMessage) (json.RawMessage, error) {
		if llm.Add(1) == 1 {
			return json.RawMessage(`{"next":"validate"}`), nil
		}
		return json.RawMessage(`{"next":"done"}`), nil
	})
	e.RegisterFunction("ValidateBatch", func(context.Context, json.RawMessage) (json.RawMessage, error) {
		if validate.Add(1) == 1 {
			return json.RawMessage(`{"next":"await"}`), nil
		}
		return json.RawMessage(`{"next":"invoke","calls":[{"call_id":"k1"},{"call_id":"k2"}]}`), nil
	})
	e.RegisterFunction("Await", func(_ context.Context, p json.RawMessage) (json.RawMessage, error) {
		var in struct {
			Token string `json:"task_token"`
		}
		json.Unmarshal(p, &in)
		tokens <- in.Token
		return nil, nil
	})
	e.RegisterFunction("InvokeCall", echo)
	var appended json.RawMessage
	e.RegisterFunction("AppendResults", func(_ context.Context, p json.RawMessage) (json.RawMessage, error) {
		appended = p
		return json.RawMessage(`{}`), nil
	})
	e.RegisterFunction("FailTurn", func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return nil, errors.New("FailTurn must not run")
	})
	sm := mustCreate(t, e, "turn", readDef(t, "turnlike.asl.json"))
	arn := mustStart(t, e, sm, "t1", `{"conversation_id":"c1","turn_id":"t1"}`)
	if err := e.SendTaskSuccess(t.Context(), recvToken(t, tokens), json.RawMessage(`{"answers":{}}`)); err != nil {
		t.Fatalf("SendTaskSuccess() = %v", err)
	}
	x := mustWait(t, e, arn)
	if diff := cmp.Diff(any(map[string]any{"conversation_id": "c1", "turn_id": "t1"}), jsonOf(t, x.Output)); diff != "" {
		t.Fatalf("Output mismatch (-want +got) (%s %s):\n%s", x.Error, x.Cause, diff)
	}
	want := map[string]any{"conversation_id": "c1", "turn_id": "t1", "results": []any{
		map[string]any{"conversation_id": "c1", "turn_id": "t1", "call_id": "k1", "index": float64(0)},
		map[string]any{"conversation_id": "c1", "turn_id": "t1", "call_id": "k2", "index": float64(1)},
	}}
	if diff := cmp.Diff(any(want), jsonOf(t, appended)); diff != "" {
		t.Errorf("AppendResults payload mismatch (-want +got):\n%s", diff)
	}
}

// TestTurnShapeFailure: an uncaught handler error goes to FailTurn, then Fail.
func TestTurnShapeFailure(t *testing.T) {
	t.Parallel()
	e, _ := testEngine(t, Options{})
	e.RegisterFunction("LLMStep", func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return nil, &LimitError{Limit: 12}
	})
	var failPayload json.RawMessage
	e.RegisterFunction("FailTurn", func(_ context.Context, p json.RawMessage) (json.RawMessage, error) {
		failPayload = p
		return json.RawMessage(`{}`), nil
	})
	sm := mustCreate(t, e, "turn", readDef(t, "turnlike.asl.json"))
	x := mustWait(t, e, mustStart(t, e, sm, "t2", `{"conversation_id":"c1","turn_id":"t2"}`))
	if x.Status != StatusFailed || x.Error != "TurnFailed" || x.Cause != "turn t2 failed" {
		t.Errorf("Status, Error, Cause = %s, %s, %s, want FAILED, TurnFailed, turn t2 failed", x.Status, x.Error, x.Cause)
	}
	want := map[string]any{"conversation_id": "c1", "turn_id": "t2", "error": map[string]any{
		"Error": "LimitError", "Cause": `{"errorMessage":"limit 12 reached","errorType":"LimitError"}`}}
	if diff := cmp.Diff(any(want), jsonOf(t, failPayload)); diff != "" {
		t.Errorf("FailTurn payload mismatch (-want +got):\n%s", diff)
	}
}
