package sfnlocal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// syncAttempt runs one attempt of a states:startExecution.sync:2 task: it
// starts an execution of Arguments.StateMachineArn with Arguments.Input
// (and Name, if given), waits for its end and returns DescribeExecution's
// answer with Input and Output as parsed JSON, as AWS does. A child that
// fails, times out or is stopped fails the task with States.TaskFailed,
// the description as the cause. When the parent's run ends first (it was
// stopped or timed out) the child is stopped with it (StopExecution does
// that itself); when the engine closes (a process exit) the child is left
// to end with it, unsaved: the resumed parent runs the task again, which
// starts a new child.
func (e *Engine) syncAttempt(ctx context.Context, x *execution, s *state, states, vars map[string]any) (any, *stateErr) {
	argsV, err := evalTemplate(s.Arguments, states, vars)
	if err != nil {
		return nil, queryErr(s, "Arguments", err)
	}
	args, _ := argsV.(map[string]any)
	smArn, _ := args["StateMachineArn"].(string)
	if smArn == "" {
		return nil, &stateErr{Error: "States.Runtime", Cause: fmt.Sprintf("state %q: Arguments must be an object with a string StateMachineArn, got %s", s.Name, mustJSON(argsV))}
	}
	for k := range args {
		if !syncFields[k] {
			return nil, &stateErr{Error: "States.Runtime", Cause: fmt.Sprintf("state %q: Arguments field %q is not supported", s.Name, k)}
		}
	}
	name, _ := args["Name"].(string)
	input := json.RawMessage("{}")
	if in, ok := args["Input"]; ok {
		input = json.RawMessage(mustJSON(in))
	}
	details := func() *TaskDetails { return &TaskDetails{ResourceType: "states", Resource: "startExecution.sync:2"} }
	d := details()
	d.Region, d.Parameters = e.region, mustJSON(args)
	x.event(e.clock, HistoryEvent{Type: "TaskScheduled", TaskScheduledEventDetails: d})
	x.event(e.clock, HistoryEvent{Type: "TaskStarted", TaskStartedEventDetails: details()})
	fail := func(serr *stateErr) (any, *stateErr) {
		d := details()
		d.Error, d.Cause = serr.Error, serr.Cause
		x.event(e.clock, HistoryEvent{Type: "TaskFailed", TaskFailedEventDetails: d})
		return nil, serr
	}
	if ctx.Err() != nil {
		return nil, errAbort
	}
	arn, start, child, err := e.startExecution(ctx, smArn, name, input, x)
	if err != nil {
		var ae *APIError
		code := "States.Runtime"
		if errors.As(err, &ae) {
			code = "StepFunctions." + ae.Code + "Exception"
		}
		return fail(&stateErr{Error: code, Cause: err.Error()})
	}
	sub := details()
	sub.Output = mustJSON(map[string]any{"ExecutionArn": arn, "StartDate": start.UnixMilli()})
	x.event(e.clock, HistoryEvent{Type: "TaskSubmitted", TaskSubmittedEventDetails: sub})
	select {
	case <-child.done:
	case <-ctx.Done():
		return nil, errAbort
	}
	desc := child.describe()
	out := syncResult(desc)
	b := mustJSON(out)
	if desc.Status != StatusSucceeded {
		return fail(&stateErr{Error: "States.TaskFailed", Cause: b})
	}
	d = details()
	d.Output = b
	x.event(e.clock, HistoryEvent{Type: "TaskSucceeded", TaskSucceededEventDetails: d})
	var v any
	_ = json.Unmarshal([]byte(b), &v)
	return v, nil
}

// syncResult is DescribeExecution's answer as a startExecution.sync:2 task
// returns it: Input and Output parsed, dates in epoch milliseconds.
func syncResult(d Execution) map[string]any {
	m := map[string]any{
		"ExecutionArn": d.ExecutionArn, "StateMachineArn": d.StateMachineArn, "Name": d.Name, "Status": d.Status,
		"StartDate": float64(d.StartDate.UnixMilli()), "InputDetails": map[string]any{"Included": true},
	}
	var in any
	if json.Unmarshal(d.Input, &in) == nil {
		m["Input"] = in
	}
	if !d.StopDate.IsZero() {
		m["StopDate"] = float64(d.StopDate.UnixMilli())
	}
	if d.Output != nil {
		var out any
		if json.Unmarshal(d.Output, &out) == nil {
			m["Output"] = out
			m["OutputDetails"] = map[string]any{"Included": true}
		}
	}
	if d.Error != "" {
		m["Error"] = d.Error
	}
	if d.Cause != "" {
		m["Cause"] = d.Cause
	}
	return m
}

// contextTime formats a context object's time as AWS does: ISO 8601 with
// milliseconds, so $toMillis reads it the same in jsonata-js.
func contextTime(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}
