package sfnlocal

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Client is the engine's Step Functions API in the process that runs it:
// the operations the API server makes (pkg/api.Executions), with the
// inputs, outputs and errors of the SDK client, without the HTTP request
// and its signature. The local stack gives it to its API server; the HTTP
// endpoint (HTTPHandler) still serves every other client, and the SDK
// client's wire protocol against it is tested on its own (sdk_test.go).
//
// Errors are what the SDK client returns for the same answer over HTTP:
// an API exception is its modeled type (types.ExecutionDoesNotExist, …,
// or a smithy.GenericAPIError), and an engine that could not reach its
// store is an *awshttp.ResponseError with status 500.
type Client struct{ Engine *Engine }

// StartExecution starts an execution (empty input: {}).
func (c Client) StartExecution(ctx context.Context, in *sfn.StartExecutionInput, _ ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error) {
	input := json.RawMessage(aws.ToString(in.Input))
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	arn, start, err := c.Engine.StartExecution(ctx, aws.ToString(in.StateMachineArn), aws.ToString(in.Name), input)
	if err != nil {
		return nil, sdkError("StartExecution", err)
	}
	return &sfn.StartExecutionOutput{ExecutionArn: aws.String(arn), StartDate: aws.Time(start)}, nil
}

// DescribeExecution describes an execution, running or ended.
func (c Client) DescribeExecution(ctx context.Context, in *sfn.DescribeExecutionInput, _ ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error) {
	x, err := c.Engine.DescribeExecution(ctx, aws.ToString(in.ExecutionArn))
	if err != nil {
		return nil, sdkError("DescribeExecution", err)
	}
	out := &sfn.DescribeExecutionOutput{
		ExecutionArn: aws.String(x.ExecutionArn), StateMachineArn: aws.String(x.StateMachineArn), Name: aws.String(x.Name),
		Status: types.ExecutionStatus(x.Status), StartDate: aws.Time(x.StartDate), Input: aws.String(string(x.Input)),
		InputDetails: &types.CloudWatchEventsExecutionDataDetails{Included: true},
	}
	if !x.StopDate.IsZero() {
		out.StopDate = aws.Time(x.StopDate)
	}
	if x.Output != nil {
		out.Output = aws.String(string(x.Output))
		out.OutputDetails = &types.CloudWatchEventsExecutionDataDetails{Included: true}
	}
	if x.Error != "" {
		out.Error = aws.String(x.Error)
	}
	if x.Cause != "" {
		out.Cause = aws.String(x.Cause)
	}
	return out, nil
}

// StopExecution aborts a running execution.
func (c Client) StopExecution(ctx context.Context, in *sfn.StopExecutionInput, _ ...func(*sfn.Options)) (*sfn.StopExecutionOutput, error) {
	stop, err := c.Engine.StopExecution(ctx, aws.ToString(in.ExecutionArn), aws.ToString(in.Error), aws.ToString(in.Cause))
	if err != nil {
		return nil, sdkError("StopExecution", err)
	}
	return &sfn.StopExecutionOutput{StopDate: aws.Time(stop)}, nil
}

// SendTaskSuccess answers a task token.
func (c Client) SendTaskSuccess(ctx context.Context, in *sfn.SendTaskSuccessInput, _ ...func(*sfn.Options)) (*sfn.SendTaskSuccessOutput, error) {
	if err := c.Engine.SendTaskSuccess(ctx, aws.ToString(in.TaskToken), json.RawMessage(aws.ToString(in.Output))); err != nil {
		return nil, sdkError("SendTaskSuccess", err)
	}
	return &sfn.SendTaskSuccessOutput{}, nil
}

// sdkError is err as the SDK client would return it for op: an API
// exception as its modeled type (the message after the code, as the
// endpoint sends it), anything else as the endpoint's 500.
func sdkError(op string, err error) error {
	code := apiCode(err)
	if code == "" {
		resp := &http.Response{StatusCode: http.StatusInternalServerError, Header: http.Header{}}
		return &smithy.OperationError{ServiceID: "SFN", OperationName: op, Err: &awshttp.ResponseError{
			ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: resp}, Err: err},
		}}
	}
	msg := err.Error()
	var apiErr error = &smithy.GenericAPIError{Code: code, Message: strings.TrimPrefix(msg, code+": ")}
	if modeled, ok := modeledErrors[code]; ok {
		apiErr = modeled(&msg)
	}
	return &smithy.OperationError{ServiceID: "SFN", OperationName: op, Err: apiErr}
}

// modeledErrors are the SDK's types of the engine's API exceptions.
var modeledErrors = map[string]func(msg *string) error{
	ErrExecutionDoesNotExist.Code:    func(m *string) error { return &types.ExecutionDoesNotExist{Message: m} },
	ErrExecutionAlreadyExists.Code:   func(m *string) error { return &types.ExecutionAlreadyExists{Message: m} },
	ErrInvalidToken.Code:             func(m *string) error { return &types.InvalidToken{Message: m} },
	ErrTaskTimedOut.Code:             func(m *string) error { return &types.TaskTimedOut{Message: m} },
	ErrStateMachineDoesNotExist.Code: func(m *string) error { return &types.StateMachineDoesNotExist{Message: m} },
	ErrInvalidExecutionInput.Code:    func(m *string) error { return &types.InvalidExecutionInput{Message: m} },
	ErrInvalidOutput.Code:            func(m *string) error { return &types.InvalidOutput{Message: m} },
	ErrValidation.Code:               func(m *string) error { return &types.ValidationException{Message: m} },
}
