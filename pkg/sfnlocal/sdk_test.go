package sfnlocal

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/google/go-cmp/cmp"
)

// sdkClient is the real aws-sdk-go-v2 sfn client pointed at the engine's
// JSON 1.0 endpoint, as the API function uses it locally.
func sdkClient(t *testing.T, e *Engine) *sfn.Client {
	t.Helper()
	srv := httptest.NewServer(e.HTTPHandler())
	t.Cleanup(srv.Close)
	return sfn.New(sfn.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("local", "local", ""),
		BaseEndpoint: aws.String(srv.URL),
	})
}

func TestSDKTaskTokenFlow(t *testing.T) {
	t.Parallel()
	e, _, sm, tokens := awaitEngine(t, Options{})
	c := sdkClient(t, e)
	ctx := t.Context()
	input := `{"conversation_id":"c1","timeout":60,"heartbeat":0}`

	start, err := c.StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: &sm, Name: aws.String("turn-1"), Input: &input})
	if err != nil {
		t.Fatalf("StartExecution() = %v", err)
	}
	again, err := c.StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: &sm, Name: aws.String("turn-1"), Input: &input})
	if err != nil || *again.ExecutionArn != *start.ExecutionArn || !again.StartDate.Equal(*start.StartDate) {
		t.Errorf("StartExecution(same name, same input) = %v, %v, want the same execution", again, err)
	}
	other := `{"conversation_id":"c2"}`
	_, err = c.StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: &sm, Name: aws.String("turn-1"), Input: &other})
	var exists *types.ExecutionAlreadyExists
	if !errors.As(err, &exists) {
		t.Errorf("StartExecution(same name, other input) = %v, want ExecutionAlreadyExists", err)
	}
	tok := recvToken(t, tokens)

	if _, err := c.SendTaskHeartbeat(ctx, &sfn.SendTaskHeartbeatInput{TaskToken: &tok}); err != nil {
		t.Errorf("SendTaskHeartbeat() = %v", err)
	}
	var invalid *types.InvalidToken
	_, err = c.SendTaskSuccess(ctx, &sfn.SendTaskSuccessInput{TaskToken: aws.String("not-a-token"), Output: aws.String(`{}`)})
	if !errors.As(err, &invalid) {
		t.Errorf("SendTaskSuccess(garbage) = %v, want InvalidToken", err)
	}
	if _, err := c.SendTaskSuccess(ctx, &sfn.SendTaskSuccessInput{TaskToken: &tok, Output: aws.String(`{"ok":1}`)}); err != nil {
		t.Fatalf("SendTaskSuccess() = %v", err)
	}
	mustWait(t, e, *start.ExecutionArn)
	var timedOut *types.TaskTimedOut
	_, err = c.SendTaskSuccess(ctx, &sfn.SendTaskSuccessInput{TaskToken: &tok, Output: aws.String(`{}`)})
	if !errors.As(err, &timedOut) {
		t.Errorf("second SendTaskSuccess() = %v, want TaskTimedOut", err)
	}
	_, err = c.SendTaskFailure(ctx, &sfn.SendTaskFailureInput{TaskToken: &tok, Error: aws.String("E")})
	if !errors.As(err, &timedOut) {
		t.Errorf("SendTaskFailure(answered) = %v, want TaskTimedOut", err)
	}

	d, err := c.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: start.ExecutionArn})
	if err != nil {
		t.Fatalf("DescribeExecution() = %v", err)
	}
	if d.Status != types.ExecutionStatusSucceeded || d.StopDate == nil || d.StartDate == nil || !d.StartDate.Equal(epoch0) {
		t.Errorf("DescribeExecution() = %+v, want SUCCEEDED with dates", d)
	}
	if diff := cmp.Diff(any(map[string]any{"answer": map[string]any{"ok": float64(1)}, "cid": "c1"}), jsonOf(t, []byte(aws.ToString(d.Output)))); diff != "" {
		t.Errorf("DescribeExecution().Output mismatch (-want +got):\n%s", diff)
	}

	// History through the SDK, in pages, matches the engine's.
	var got []string
	var next *string
	for {
		h, err := c.GetExecutionHistory(ctx, &sfn.GetExecutionHistoryInput{ExecutionArn: start.ExecutionArn, MaxResults: 4, NextToken: next})
		if err != nil {
			t.Fatalf("GetExecutionHistory() = %v", err)
		}
		for _, ev := range h.Events {
			got = append(got, string(ev.Type))
			if ev.Type == types.HistoryEventTypeTaskSucceeded && !strings.Contains(aws.ToString(ev.TaskSucceededEventDetails.Output), `"ok":1`) {
				t.Errorf("TaskSucceeded output = %s", aws.ToString(ev.TaskSucceededEventDetails.Output))
			}
			if ev.Timestamp == nil || ev.Timestamp.IsZero() {
				t.Errorf("event %d has no timestamp", ev.Id)
			}
		}
		if h.NextToken == nil {
			break
		}
		next = h.NextToken
	}
	if diff := cmp.Diff(eventTypes(t, e, *start.ExecutionArn), got); diff != "" {
		t.Errorf("GetExecutionHistory() types mismatch (-engine +sdk):\n%s", diff)
	}

	_, err = c.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(*start.ExecutionArn + "-nope")})
	var notExist *types.ExecutionDoesNotExist
	if !errors.As(err, &notExist) {
		t.Errorf("DescribeExecution(unknown) = %v, want ExecutionDoesNotExist", err)
	}
}

func TestSDKFailureTimeoutAndStop(t *testing.T) {
	t.Parallel()
	e, clock, sm, tokens := awaitEngine(t, Options{})
	c := sdkClient(t, e)
	ctx := t.Context()
	in := func(name string) *sfn.StartExecutionInput {
		return &sfn.StartExecutionInput{StateMachineArn: &sm, Name: aws.String(name), Input: aws.String(`{"conversation_id":"c","timeout":30,"heartbeat":0}`)}
	}

	// SendTaskFailure: caught by the States.ALL catcher.
	s1, err := c.StartExecution(ctx, in("fail"))
	if err != nil {
		t.Fatal(err)
	}
	tok := recvToken(t, tokens)
	if _, err := c.SendTaskFailure(ctx, &sfn.SendTaskFailureInput{TaskToken: &tok, Error: aws.String("UserDeclined"), Cause: aws.String("no")}); err != nil {
		t.Fatalf("SendTaskFailure() = %v", err)
	}
	if x := mustWait(t, e, *s1.ExecutionArn); !strings.Contains(string(x.Output), "UserDeclined") {
		t.Errorf("Output = %s, want the failure caught", x.Output)
	}

	// Timeout, then a late answer: TaskTimedOut.
	s2, err := c.StartExecution(ctx, in("late"))
	if err != nil {
		t.Fatal(err)
	}
	tok = recvToken(t, tokens)
	eventually(t, "timeout timer", func() bool { return clock.Timers() >= 1 })
	clock.Advance(30 * 1e9)
	mustWait(t, e, *s2.ExecutionArn)
	var timedOut *types.TaskTimedOut
	if _, err := c.SendTaskSuccess(ctx, &sfn.SendTaskSuccessInput{TaskToken: &tok, Output: aws.String(`{}`)}); !errors.As(err, &timedOut) {
		t.Errorf("late SendTaskSuccess() = %v, want TaskTimedOut", err)
	}

	// StopExecution.
	s3, err := c.StartExecution(ctx, in("stop"))
	if err != nil {
		t.Fatal(err)
	}
	recvToken(t, tokens)
	if _, err := c.StopExecution(ctx, &sfn.StopExecutionInput{ExecutionArn: s3.ExecutionArn, Error: aws.String("Cancelled")}); err != nil {
		t.Fatalf("StopExecution() = %v", err)
	}
	d, err := c.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: s3.ExecutionArn})
	if err != nil || d.Status != types.ExecutionStatusAborted || aws.ToString(d.Error) != "Cancelled" {
		t.Errorf("DescribeExecution(stopped) = %v %v, want ABORTED Cancelled", d, err)
	}
}
