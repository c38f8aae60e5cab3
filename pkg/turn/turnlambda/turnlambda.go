// Package turnlambda adapts the loop's steps (pkg/turn) to the functions
// that run them: typed handlers to raw JSON payloads (what Lambda and the
// local Step Functions engine invoke), and the llmstep function's second
// input, EventBridge's status change of an execution that ended without a
// step recording it. It holds no logic of the loop; it must not read or
// write the record except through turn.Handlers.
package turnlambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/clientagent/clientagent/pkg/turn"
)

// JSON adapts a typed handler to raw JSON in and out, the shape the local
// Step Functions engine invokes (on AWS, aws-lambda-go does the same).
func JSON[In, Out any](f func(context.Context, In) (Out, error)) func(context.Context, json.RawMessage) (json.RawMessage, error) {
	return func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
		var in In
		if err := json.Unmarshal(payload, &in); err != nil {
			return nil, &InputError{Err: fmt.Errorf("decode payload: %w", err)}
		}
		out, err := f(ctx, in)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	}
}

// InputError is a payload the handler cannot read; retrying will not help.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// ExecutionEvent is EventBridge's "Step Functions Execution Status Change"
// event, as far as ExecutionEnded reads it. Detail.Input is the
// execution's input as a JSON string.
type ExecutionEvent struct {
	DetailType string `json:"detail-type"`
	Detail     struct {
		ExecutionArn string  `json:"executionArn"`
		Status       string  `json:"status"`
		Input        string  `json:"input"`
		Error        *string `json:"error"`
		Cause        *string `json:"cause"`
	} `json:"detail"`
}

// ExecutionEnded records the failure of a turn whose execution failed,
// timed out or was stopped, when no step did (the Valkey outage FailTurn
// could not outlast, an operator's StopExecution): the stack's EventBridge
// rule sends these events to the llmstep function. A turn that already
// ended is left as it is, so the event is harmless when FailTurn ran. An
// error is retried by Lambda's asynchronous invocation.
func ExecutionEnded(ctx context.Context, h *turn.Handlers, ev ExecutionEvent) error {
	switch ev.Detail.Status {
	case "FAILED", "TIMED_OUT", "ABORTED":
	default:
		return nil
	}
	var r turn.Ref
	if err := json.Unmarshal([]byte(ev.Detail.Input), &r); err != nil || r.ConversationID == "" || r.TurnID == "" {
		// Not one of our turns' executions: retrying will not help.
		logger(h).WarnContext(ctx, "status change of an execution without a turn", "execution", ev.Detail.ExecutionArn, "error", err)
		return nil
	}
	errName, cause := "States."+ev.Detail.Status, ""
	if ev.Detail.Error != nil && *ev.Detail.Error != "" {
		errName = *ev.Detail.Error
	}
	if ev.Detail.Cause != nil {
		cause = *ev.Detail.Cause
	}
	err := h.RecordFailure(ctx, r, errName, cause)
	var nf *turn.NotFoundError
	if errors.As(err, &nf) {
		return nil // the conversation was deleted (which also stops its executions)
	}
	return err
}

// LLMStepOrEvent is the llmstep function's handler: the state machine's
// LLMStep (and FailTurn) payloads, and the status-change events of the
// stack's EventBridge rule (ExecutionEnded), told apart by "detail-type".
func LLMStepOrEvent(h *turn.Handlers) func(context.Context, json.RawMessage) (json.RawMessage, error) {
	step := JSON(h.LLMStep)
	return func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
		var probe struct {
			DetailType string `json:"detail-type"`
		}
		if json.Unmarshal(payload, &probe) != nil || probe.DetailType == "" {
			return step(ctx, payload)
		}
		var ev ExecutionEvent
		if err := json.Unmarshal(payload, &ev); err != nil {
			return nil, &InputError{Err: fmt.Errorf("decode status change event: %w", err)}
		}
		if err := ExecutionEnded(ctx, h, ev); err != nil {
			return nil, err
		}
		return json.RawMessage(`{}`), nil
	}
}

func logger(h *turn.Handlers) *slog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return slog.Default()
}
