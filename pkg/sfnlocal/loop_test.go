package sfnlocal

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The turn's two machines as the local stack loads them, with stand-in
// steps: LLMStep asks for tools twice, then answers; each round's invoke
// runs onInvoke.
func turnMachines(t *testing.T, e *Engine, onInvoke func()) string {
	t.Helper()
	root := repoRoot(t)
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(root, "statemachine", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var llm atomic.Int64
	e.RegisterFunction("llmstep", func(context.Context, json.RawMessage) (json.RawMessage, error) {
		if llm.Add(1) < 3 {
			return json.RawMessage(`{"next":"tools"}`), nil
		}
		return json.RawMessage(`{"next":"done"}`), nil
	})
	e.RegisterFunction("validate", func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"calls":["c1"],"next":"invoke"}`), nil
	})
	e.RegisterFunction("invoke", func(context.Context, json.RawMessage) (json.RawMessage, error) {
		onInvoke()
		return json.RawMessage(`{"call_id":"c1","status":"succeeded"}`), nil
	})
	e.RegisterFunction("append", func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"next":"llm"}`), nil
	})
	subs := map[string]string{"LLMStepFunction": "llmstep", "ValidateFunction": "validate", "AwaitFunction": "await",
		"InvokeFunction": "invoke", "AppendFunction": "append"}
	loop, err := e.CreateStateMachineOfType("loop", TypeExpress, Substitute(read("loop.asl.json"), subs))
	if err != nil {
		t.Fatal(err)
	}
	subs["LoopStateMachine"] = loop
	return mustCreate(t, e, "turn", Substitute(read("turn.asl.json"), subs))
}

// standardStates lists the states the execution itself entered.
func standardStates(t *testing.T, e *Engine, arn string) string {
	t.Helper()
	h, err := e.History(t.Context(), arn)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ev := range h {
		if d := ev.StateEnteredEventDetails; d != nil {
			names = append(names, d.Name)
		}
	}
	return strings.Join(names, ",")
}

const turnInput = `{"conversation_id":"c1","turn_id":"t1","await_timeout_seconds":60,"max_concurrency":4}`

// Issue 30: a loop that has run its budget (150 s) hands the turn back at
// the next round ("continue"), and the turn starts a new child, which goes
// on at LLMStep with a whole five minutes.
func TestLoopContinuesInANewChild(t *testing.T) {
	t.Parallel()
	e, clock := testEngine(t, Options{})
	var rounds atomic.Int64
	sm := turnMachines(t, e, func() {
		if rounds.Add(1) == 1 {
			clock.Advance(151 * time.Second) // the first round outlasts the budget
		}
	})
	arn := mustStart(t, e, sm, "t1", turnInput)
	if x := mustWait(t, e, arn); x.Status != StatusSucceeded {
		t.Fatalf("turn = %s %s %s", x.Status, x.Error, x.Cause)
	}
	if got, want := standardStates(t, e, arn), "Init,RunLoop,AfterLoop,RunLoop,AfterLoop,Done"; got != want {
		t.Errorf("STANDARD states = %s, want %s", got, want)
	}
	kids, _ := e.Children(t.Context(), arn)
	if len(kids) != 2 {
		t.Fatalf("children = %v, want 2", kids)
	}
	first, _ := e.DescribeExecution(t.Context(), kids[0])
	if got := string(compact(first.Output)); got != `{"next":"continue"}` {
		t.Errorf("the first child returned %s, want continue", got)
	}
}

// Without the budget spent the whole loop is one child: the reference
// turn's 4 STANDARD transitions.
func TestLoopOneChild(t *testing.T) {
	t.Parallel()
	e, _ := testEngine(t, Options{})
	sm := turnMachines(t, e, func() {})
	arn := mustStart(t, e, sm, "t1", turnInput)
	if x := mustWait(t, e, arn); x.Status != StatusSucceeded {
		t.Fatalf("turn = %s %s %s", x.Status, x.Error, x.Cause)
	}
	if got, want := standardStates(t, e, arn), "Init,RunLoop,AfterLoop,Done"; got != want {
		t.Errorf("STANDARD states = %s, want %s", got, want)
	}
}

// A child that outlives its five minutes fails the turn's task; the turn
// starts a new child at LLMStep (twice at most), which ends the turn.
func TestLostLoopRestarts(t *testing.T) {
	t.Parallel()
	e, clock := testEngine(t, Options{})
	var rounds atomic.Int64
	const arn = "arn:aws:states:us-east-1:123456789012:execution:turn:t1"
	sm := turnMachines(t, e, func() {
		if rounds.Add(1) != 1 {
			return
		}
		clock.Advance(ExpressMaxSeconds * time.Second) // the child times out in the Map
		eventually(t, "the child's timeout", func() bool {
			kids, _ := e.Children(t.Context(), arn)
			x, _ := e.DescribeExecution(t.Context(), kids[0])
			return x.Status == StatusTimedOut
		})
	})
	if got := mustStart(t, e, sm, "t1", turnInput); got != arn {
		t.Fatalf("turn ARN = %s, want %s", got, arn)
	}
	if x := mustWait(t, e, arn); x.Status != StatusSucceeded {
		t.Fatalf("turn = %s %s %s", x.Status, x.Error, x.Cause)
	}
	got := standardStates(t, e, arn)
	if want := "Init,RunLoop,RestartLoop,RunLoop,AfterLoop,Done"; got != want {
		t.Errorf("STANDARD states = %s, want %s", got, want)
	}
	kids, _ := e.Children(t.Context(), arn)
	first, _ := e.DescribeExecution(t.Context(), kids[0])
	if len(kids) != 2 || first.Status != StatusTimedOut {
		t.Errorf("children = %v, the first %s; want 2, the first TIMED_OUT", kids, first.Status)
	}
}
