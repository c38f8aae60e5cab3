package sfnlocal

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
)

// executions is the part of the API both clients serve (pkg/api.Executions).
type executions interface {
	StartExecution(ctx context.Context, in *sfn.StartExecutionInput, opts ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error)
	DescribeExecution(ctx context.Context, in *sfn.DescribeExecutionInput, opts ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error)
	StopExecution(ctx context.Context, in *sfn.StopExecutionInput, opts ...func(*sfn.Options)) (*sfn.StopExecutionOutput, error)
	SendTaskSuccess(ctx context.Context, in *sfn.SendTaskSuccessInput, opts ...func(*sfn.Options)) (*sfn.SendTaskSuccessOutput, error)
}

// answer describes a call's result: the error's type and code, or the
// fields of the output that matter.
func answer(out any, err error) string {
	if err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) {
			return fmt.Sprintf("error %T %s", ae, ae.ErrorCode())
		}
		var re *awshttp.ResponseError
		if errors.As(err, &re) {
			return fmt.Sprintf("error HTTP %d", re.HTTPStatusCode())
		}
		return "error " + err.Error()
	}
	switch o := out.(type) {
	case *sfn.StartExecutionOutput:
		return fmt.Sprintf("started %s at %s", aws.ToString(o.ExecutionArn), o.StartDate.UTC())
	case *sfn.DescribeExecutionOutput:
		return fmt.Sprintf("%s %s input %s output %v error %v cause %v from %s to %v", aws.ToString(o.Name), o.Status, aws.ToString(o.Input),
			aws.ToString(o.Output), aws.ToString(o.Error), aws.ToString(o.Cause), o.StartDate.UTC(), o.StopDate != nil)
	case *sfn.StopExecutionOutput:
		return fmt.Sprintf("stopped at %s", o.StopDate.UTC())
	}
	return "ok"
}

// The in-process Client answers every call as the SDK client does over
// the engine's HTTP endpoint: the same outputs and the same error types,
// for starts, repeats, token answers, descriptions and stops.
func TestClientAnswersAsTheSDK(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, direct bool) []string {
		e, _, sm, tokens := awaitEngine(t, Options{})
		var c executions = Client{Engine: e}
		if !direct {
			c = sdkClient(t, e)
		}
		ctx := t.Context()
		in := `{"conversation_id":"c1","timeout":60,"heartbeat":0}`
		other := `{"conversation_id":"c2"}`
		var got []string
		add := func(out any, err error) { got = append(got, answer(out, err)) }
		start, err := c.StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: &sm, Name: aws.String("t1"), Input: &in})
		add(start, err)
		add(c.StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: &sm, Name: aws.String("t1"), Input: &in}))
		add(c.StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: &sm, Name: aws.String("t1"), Input: &other}))
		add(c.StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: aws.String(sm + "-missing"), Name: aws.String("t2")}))
		add(c.StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: &sm, Name: aws.String("t3"), Input: aws.String("{not json")}))
		add(c.SendTaskSuccess(ctx, &sfn.SendTaskSuccessInput{TaskToken: aws.String("not-a-token"), Output: aws.String(`{}`)}))
		tok := recvToken(t, tokens)
		add(c.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: start.ExecutionArn}))
		add(c.SendTaskSuccess(ctx, &sfn.SendTaskSuccessInput{TaskToken: &tok, Output: aws.String(`{"ok":1}`)}))
		mustWait(t, e, *start.ExecutionArn)
		add(c.SendTaskSuccess(ctx, &sfn.SendTaskSuccessInput{TaskToken: &tok, Output: aws.String(`{}`)}))
		add(c.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: start.ExecutionArn}))
		add(c.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(*start.ExecutionArn + "-missing")}))
		second, err := c.StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: &sm, Name: aws.String("t4"), Input: &in})
		add(second, err)
		recvToken(t, tokens)
		add(c.StopExecution(ctx, &sfn.StopExecutionInput{ExecutionArn: second.ExecutionArn, Error: aws.String("Stopped"), Cause: aws.String("by the test")}))
		add(c.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: second.ExecutionArn}))
		return got
	}
	sdk, direct := run(t, false), run(t, true)
	if diff := cmp.Diff(sdk, direct); diff != "" {
		t.Errorf("answers (-SDK over HTTP +in process):\n%s", diff)
	}
	t.Logf("answers:\n%v", direct)
}

// failingStore fails every store call.
type failingStore struct{ Persister }

func (failingStore) Load(context.Context, string) (Snapshot, error) {
	return Snapshot{}, errors.New("connection refused")
}

// An engine that cannot reach its store answers as its endpoint's 500
// does, which the API reads as the service briefly unavailable.
func TestClientStoreFailureIsA500(t *testing.T) {
	t.Parallel()
	rp, _, _ := redisPersister(t)
	e, _ := testEngine(t, Options{Persist: failingStore{rp}})
	sm := mustCreate(t, e, "fails", []byte(boundaryDef))
	_, err := Client{Engine: e}.StartExecution(t.Context(), &sfn.StartExecutionInput{StateMachineArn: &sm, Name: aws.String("t1")})
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() != 500 {
		t.Fatalf("StartExecution() = %v, want an HTTP 500 response error", err)
	}
}
