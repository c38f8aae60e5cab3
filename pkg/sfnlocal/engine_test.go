package sfnlocal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// LimitError is a named handler error, as our Lambda handlers return.
type LimitError struct{ Limit int }

func (e *LimitError) Error() string { return fmt.Sprintf("limit %d reached", e.Limit) }

func TestBasicFlow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		input  string
		status string
		output string
		errs   [2]string
	}{
		{"choice rule with Output and variables", `{"conversation_id":"c1","who":"ann","next":"done"}`, StatusSucceeded,
			`{"cid":"c1","greeting":"hello ann","literal":"$cid is not evaluated"}`, [2]string{}},
		{"$count and conditional on execution input", `{"conversation_id":"c1","who":"x","next":"count","items":[1,2,3]}`, StatusSucceeded,
			`{"big":"yes","n":3}`, [2]string{}},
		{"$not and != route", `{"conversation_id":"c1","who":"x","next":"elsewhere"}`, StatusSucceeded,
			`{"next":"elsewhere","route":"other"}`, [2]string{}},
		{"Default to Fail with JSONata cause", `{"conversation_id":"c9","who":"x","next":"fail"}`, StatusFailed,
			``, [2]string{"TurnFailed", "conversation c9 failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, _ := testEngine(t, Options{})
			var got json.RawMessage
			e.RegisterFunction("Echo", func(ctx context.Context, p json.RawMessage) (json.RawMessage, error) {
				got = p
				return p, nil
			})
			sm := mustCreate(t, e, "basic", readDef(t, "basic.asl.json"))
			arn := mustStart(t, e, sm, "run1", tt.input)
			x := mustWait(t, e, arn)
			if x.Status != tt.status {
				t.Fatalf("Status = %s (%s %s), want %s", x.Status, x.Error, x.Cause, tt.status)
			}
			if tt.output != "" {
				if diff := cmp.Diff(jsonOf(t, []byte(tt.output)), jsonOf(t, x.Output)); diff != "" {
					t.Errorf("Output mismatch (-want +got):\n%s", diff)
				}
			}
			if diff := cmp.Diff(tt.errs, [2]string{x.Error, x.Cause}); diff != "" {
				t.Errorf("Error/Cause mismatch (-want +got):\n%s", diff)
			}
			var in map[string]any
			json.Unmarshal([]byte(tt.input), &in)
			wantPayload := map[string]any{"conversation_id": in["conversation_id"], "next": in["next"], "execution": "run1", "state": "Step", "literal": "$cid is not evaluated"}
			if diff := cmp.Diff(any(wantPayload), jsonOf(t, got)); diff != "" {
				t.Errorf("handler payload mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHistoryEventTypes(t *testing.T) {
	t.Parallel()
	e, _ := testEngine(t, Options{})
	e.RegisterFunction("Echo", echo)
	sm := mustCreate(t, e, "basic", readDef(t, "basic.asl.json"))
	arn := mustStart(t, e, sm, "h", `{"conversation_id":"c1","who":"x","next":"done"}`)
	mustWait(t, e, arn)
	want := []string{"ExecutionStarted", "PassStateEntered", "PassStateExited",
		"TaskStateEntered", "TaskScheduled", "TaskStarted", "TaskSucceeded", "TaskStateExited",
		"ChoiceStateEntered", "ChoiceStateExited", "SucceedStateEntered", "SucceedStateExited", "ExecutionSucceeded"}
	if diff := cmp.Diff(want, eventTypes(t, e, arn)); diff != "" {
		t.Errorf("History() types mismatch (-want +got):\n%s", diff)
	}
	h, _ := e.History(t.Context(), arn)
	var result map[string]any
	json.Unmarshal([]byte(h[6].TaskSucceededEventDetails.Output), &result)
	// lambda:invoke's result shape, as AWS returns it.
	for _, k := range []string{"ExecutedVersion", "Payload", "SdkHttpMetadata", "SdkResponseMetadata", "StatusCode"} {
		if _, ok := result[k]; !ok {
			t.Errorf("TaskSucceeded output lacks %q: %v", k, result)
		}
	}
	if result["StatusCode"] != float64(200) || result["ExecutedVersion"] != "$LATEST" {
		t.Errorf("TaskSucceeded output = %v, want StatusCode 200 and $LATEST", result)
	}
	for i, ev := range h {
		if ev.ID != int64(i+1) || ev.Timestamp.IsZero() {
			t.Errorf("event %d: id %d timestamp %v", i, ev.ID, ev.Timestamp)
		}
	}
}

func TestLambdaErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		fn        string
		handler   Handler
		wantError string
		wantCause string
		caught    bool
	}{
		{"named pointer error type", "Limit", func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return nil, &LimitError{Limit: 12}
		}, "LimitError", `{"errorMessage":"limit 12 reached","errorType":"LimitError"}`, true},
		{"errors.New is errorString", "Plain", func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return nil, errors.New("boom")
		}, "errorString", `{"errorMessage":"boom","errorType":"errorString"}`, false},
		{"fmt.Errorf wrapper keeps its own type, as on Lambda", "Wrapped", func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return nil, fmt.Errorf("step: %w", &LimitError{Limit: 1})
		}, "wrapError", `{"errorMessage":"step: limit 1 reached","errorType":"wrapError"}`, false},
		{"panic is Lambda.Unknown", "Panics", func(context.Context, json.RawMessage) (json.RawMessage, error) {
			panic("kaboom")
		}, "Lambda.Unknown", "", false},
		{"unregistered function", "Missing", nil, "Lambda.ResourceNotFoundException", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, _ := testEngine(t, Options{})
			if tt.handler != nil {
				e.RegisterFunction(tt.fn, tt.handler)
			}
			sm := mustCreate(t, e, "errors", readDef(t, "errors.asl.json"))
			x := mustWait(t, e, mustStart(t, e, sm, "x", fmt.Sprintf(`{"fn":%q}`, tt.fn)))
			if tt.caught {
				if x.Status != StatusSucceeded {
					t.Fatalf("Status = %s (%s), want SUCCEEDED (caught)", x.Status, x.Error)
				}
				want := map[string]any{"error": tt.wantError, "cause": tt.wantCause, "fn": tt.fn, "var": tt.wantError}
				if diff := cmp.Diff(any(want), jsonOf(t, x.Output)); diff != "" {
					t.Errorf("Output mismatch (-want +got):\n%s", diff)
				}
				return
			}
			if x.Status != StatusFailed || x.Error != tt.wantError {
				t.Fatalf("Status, Error = %s, %s, want FAILED, %s", x.Status, x.Error, tt.wantError)
			}
			if tt.wantCause != "" && x.Cause != tt.wantCause {
				t.Errorf("Cause = %s, want %s", x.Cause, tt.wantCause)
			}
			types := eventTypes(t, e, x.ExecutionArn)
			if diff := cmp.Diff([]string{"TaskFailed", "ExecutionFailed"}, types[len(types)-2:]); diff != "" {
				t.Errorf("last events mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadRejects(t *testing.T) {
	t.Parallel()
	task := func(extra string) string {
		return `{"QueryLanguage":"JSONata","StartAt":"A","States":{"A":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","Arguments":{"FunctionName":"F"},` + extra + `"End":true}}}`
	}
	tests := []struct {
		name, def, want string
	}{
		{"JSONPath machine", `{"StartAt":"A","States":{"A":{"Type":"Succeed"}}}`, `"QueryLanguage" must be "JSONata"`},
		{"ResultSelector", task(`"ResultSelector":{},`), `state "A": field "ResultSelector" is not supported`},
		{"Parameters", task(`"Parameters":{},`), `state "A": field "Parameters" is not supported`},
		{"Credentials", task(`"Credentials":{},`), `state "A": field "Credentials" is not supported`},
		{"Parallel state", `{"QueryLanguage":"JSONata","StartAt":"A","States":{"A":{"Type":"Parallel","End":true}}}`, `state "A": field "Type" value "Parallel" is not supported`},
		{"Wait state", `{"QueryLanguage":"JSONata","StartAt":"A","States":{"A":{"Type":"Wait","Seconds":1,"End":true}}}`, `"Wait" is not supported`},
		{"other resource", `{"QueryLanguage":"JSONata","StartAt":"A","States":{"A":{"Type":"Task","Resource":"arn:aws:states:::sqs:sendMessage","Arguments":{},"End":true}}}`, `state "A": field "Resource"`},
		{"unknown Arguments field", `{"QueryLanguage":"JSONata","StartAt":"A","States":{"A":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","Arguments":{"FunctionName":"F","Qualifier":"x"},"End":true}}}`, `field "Qualifier" is not supported`},
		{"bad JSONata", task(`"Output":"{% $states.input. %}",`), `state "A": JSONata expression`},
		{"transition to nowhere", `{"QueryLanguage":"JSONata","StartAt":"A","States":{"A":{"Type":"Pass","Next":"B"}}}`, `state "A": transition to "B"`},
		{"Next and End", `{"QueryLanguage":"JSONata","StartAt":"A","States":{"A":{"Type":"Pass","Next":"A","End":true}}}`, `exactly one of "Next" and "End"`},
		{"distributed Map", `{"QueryLanguage":"JSONata","StartAt":"M","States":{"M":{"Type":"Map","ItemProcessor":{"ProcessorConfig":{"Mode":"DISTRIBUTED"},"StartAt":"S","States":{"S":{"Type":"Succeed"}}},"End":true}}}`, `ProcessorConfig.Mode" value DISTRIBUTED is not supported`},
		{"ItemReader", `{"QueryLanguage":"JSONata","StartAt":"M","States":{"M":{"Type":"Map","ItemReader":{},"ItemProcessor":{"StartAt":"S","States":{"S":{"Type":"Succeed"}}},"End":true}}}`, `state "M": field "ItemReader" is not supported`},
		{"retry field", task(`"Retry":[{"ErrorEquals":["X"],"Foo":1}],`), `Retry[0]: field "Foo" is not supported`},
		{"States.ALL not alone", task(`"Retry":[{"ErrorEquals":["States.ALL","X"]}],`), `"States.ALL" must appear alone`},
		{"Fail ErrorPath", `{"QueryLanguage":"JSONata","StartAt":"A","States":{"A":{"Type":"Fail","ErrorPath":"$.x"}}}`, `state "A": field "ErrorPath" is not supported`},
		{"unknown top-level field", `{"QueryLanguage":"JSONata","StartAt":"A","Foo":1,"States":{"A":{"Type":"Succeed"}}}`, `field "Foo" is not supported`},
		{"TimeoutSeconds not integer", task(`"TimeoutSeconds":"ten",`), `field "TimeoutSeconds"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := New(Options{})
			defer e.Close()
			_, err := e.CreateStateMachine("m", []byte(tt.def))
			if err == nil || !errors.Is(err, ErrInvalidDefinition) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("CreateStateMachine() = %v, want ErrInvalidDefinition containing %q", err, tt.want)
			}
		})
	}
}

func TestStartIsIdempotentByName(t *testing.T) {
	t.Parallel()
	e, _ := testEngine(t, Options{})
	block := make(chan struct{})
	e.RegisterFunction("Echo", func(ctx context.Context, p json.RawMessage) (json.RawMessage, error) {
		<-block
		return p, nil
	})
	sm := mustCreate(t, e, "basic", readDef(t, "basic.asl.json"))
	in := `{"conversation_id":"c1","who":"x","next":"done"}`
	arn1, d1, err := e.StartExecution(t.Context(), sm, "turn-1", json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	// Same name, same input (other spacing): the running execution.
	arn2, d2, err := e.StartExecution(t.Context(), sm, "turn-1", json.RawMessage(`{ "next":"done", "who":"x", "conversation_id":"c1" }`))
	if err != nil || arn2 != arn1 || !d2.Equal(d1) {
		t.Errorf("StartExecution(same) = %s, %v, %v, want %s", arn2, d2, err, arn1)
	}
	_, _, err = e.StartExecution(t.Context(), sm, "turn-1", json.RawMessage(`{"other":1}`))
	if !errors.Is(err, ErrExecutionAlreadyExists) {
		t.Errorf("StartExecution(different input) = %v, want ErrExecutionAlreadyExists", err)
	}
	close(block)
	mustWait(t, e, arn1)
	_, _, err = e.StartExecution(t.Context(), sm, "turn-1", json.RawMessage(in))
	if !errors.Is(err, ErrExecutionAlreadyExists) {
		t.Errorf("StartExecution(closed, same input) = %v, want ErrExecutionAlreadyExists", err)
	}
	if _, _, err := e.StartExecution(t.Context(), sm+"x", "n", nil); !errors.Is(err, ErrStateMachineDoesNotExist) {
		t.Errorf("StartExecution(unknown machine) = %v, want ErrStateMachineDoesNotExist", err)
	}
	if _, err := e.DescribeExecution(t.Context(), arn1+"x"); !errors.Is(err, ErrExecutionDoesNotExist) {
		t.Errorf("DescribeExecution(unknown) = %v, want ErrExecutionDoesNotExist", err)
	}
}
