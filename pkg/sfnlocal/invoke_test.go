package sfnlocal

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda/messages"
	"github.com/google/go-cmp/cmp"
)

// The engine's own invocation faults carry the names Lambda gives them
// (doc.go), so a Retry or Catch written for AWS matches them locally.
func TestInvocationFaults(t *testing.T) {
	t.Parallel()
	def := `{"QueryLanguage":"JSONata","StartAt":"T","States":{
		"T":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","Arguments":{"FunctionName":"{% $states.input.fn %}"},
			"Catch":[{"ErrorEquals":["States.ALL"],"Output":"{% $states.errorOutput %}","Next":"Caught"}],"End":true},
		"Caught":{"Type":"Pass","End":true}}}`
	tests := []struct {
		name    string
		handler Handler // nil: not registered
		want    string
	}{
		{"function not registered", nil, "Lambda.ResourceNotFoundException"},
		{"panic", func(context.Context, json.RawMessage) (json.RawMessage, error) { panic("boom") }, "Lambda.Unknown"},
		{"payload not JSON", func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage("{oops"), nil
		}, "Lambda.Unknown"},
		{"an error type set by the function is kept", func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return nil, messages.InvokeResponse_Error{Type: "Lambda.ServiceException", Message: "injected"}
		}, "Lambda.ServiceException"},
		{"handler past the invoke timeout", func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}, "Lambda.ClientExecutionTimeoutException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, clock := testEngine(t, Options{InvokeTimeout: time.Minute})
			if tt.handler != nil {
				e.RegisterFunction("F", tt.handler)
			}
			arn := mustStart(t, e, mustCreate(t, e, "faults", []byte(def)), "f", `{"fn":"F"}`)
			if tt.want == "Lambda.ClientExecutionTimeoutException" {
				if !clock.WaitTimers(1, 5*time.Second) {
					t.Fatal("no invoke timer")
				}
				clock.Advance(time.Minute)
			}
			x := mustWait(t, e, arn)
			var out struct{ Error, Cause string }
			if err := json.Unmarshal(x.Output, &out); err != nil || out.Error != tt.want {
				t.Errorf("caught error = %s (%s), want %s", out.Error, out.Cause, tt.want)
			}
		})
	}
}

// An invocation past InvokeTimeout fails its attempt with
// Lambda.ClientExecutionTimeoutException, which a Retry retries (the ASL
// names it among Lambda's transient errors); the stuck handler's context
// is cancelled. A handler that returns in time is not affected.
func TestInvokeTimeoutRetried(t *testing.T) {
	t.Parallel()
	def := `{"QueryLanguage":"JSONata","StartAt":"T","States":{"T":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke",
		"Arguments":{"FunctionName":"F","Payload":{"n":1}},"Output":"{% $states.result.Payload %}",
		"Retry":[{"ErrorEquals":["Lambda.ClientExecutionTimeoutException"],"IntervalSeconds":2,"MaxAttempts":1}],"End":true}}}`
	e, clock := testEngine(t, Options{InvokeTimeout: 10 * time.Second})
	var calls atomic.Int32
	cancelled := make(chan error, 1)
	e.RegisterFunction("F", func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		if calls.Add(1) == 1 {
			<-ctx.Done()
			cancelled <- ctx.Err()
			return nil, ctx.Err()
		}
		return in, nil
	})
	arn := mustStart(t, e, mustCreate(t, e, "slow", []byte(def)), "s", `{}`)
	if !clock.WaitTimers(1, 5*time.Second) {
		t.Fatal("no invoke timer")
	}
	eventually(t, "the first call", func() bool { return calls.Load() == 1 })
	clock.Advance(9 * time.Second)
	if x, _ := e.DescribeExecution(t.Context(), arn); x.Status != StatusRunning || calls.Load() != 1 {
		t.Fatalf("after 9s: %s with %d calls, want RUNNING with 1", x.Status, calls.Load())
	}
	clock.Advance(time.Second)
	select {
	case err := <-cancelled:
		if err == nil {
			t.Error("handler context error = nil, want cancelled")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stuck handler's context was not cancelled")
	}
	if !clock.WaitTimers(1, 5*time.Second) {
		t.Fatal("no retry timer")
	}
	clock.Advance(2 * time.Second)
	x := mustWait(t, e, arn)
	if x.Status != StatusSucceeded || calls.Load() != 2 {
		t.Fatalf("Status = %s (%s) after %d calls, want SUCCEEDED after a retry", x.Status, x.Error, calls.Load())
	}
	if diff := cmp.Diff(any(map[string]any{"n": float64(1)}), jsonOf(t, x.Output)); diff != "" {
		t.Errorf("Output (-want +got):\n%s", diff)
	}
	var failed *TaskDetails
	h, _ := e.History(t.Context(), arn)
	for _, ev := range h {
		if ev.Type == "TaskFailed" {
			failed = ev.TaskFailedEventDetails
		}
	}
	if failed == nil || failed.Error != "Lambda.ClientExecutionTimeoutException" {
		t.Errorf("TaskFailed details = %+v, want Lambda.ClientExecutionTimeoutException", failed)
	}
}
