package sfnlocal

import (
	"errors"
	"fmt"
)

// Sentinel errors named after the Step Functions API exceptions they stand
// for; the HTTP endpoint sends each as {"__type": Name}.
var (
	ErrInvalidToken              = &APIError{Code: "InvalidToken"}
	ErrTaskTimedOut              = &APIError{Code: "TaskTimedOut"}
	ErrExecutionDoesNotExist     = &APIError{Code: "ExecutionDoesNotExist"}
	ErrExecutionAlreadyExists    = &APIError{Code: "ExecutionAlreadyExists"}
	ErrStateMachineDoesNotExist  = &APIError{Code: "StateMachineDoesNotExist"}
	ErrStateMachineAlreadyExists = &APIError{Code: "StateMachineAlreadyExists"}
	ErrInvalidDefinition         = &APIError{Code: "InvalidDefinition"}
	ErrInvalidExecutionInput     = &APIError{Code: "InvalidExecutionInput"}
	ErrInvalidOutput             = &APIError{Code: "InvalidOutput"}
	ErrValidation                = &APIError{Code: "ValidationException"}
	ErrExecutionNotRunning       = &APIError{Code: "ExecutionNotRunning"}
	errUnknownOperation          = &APIError{Code: "UnknownOperationException"}
)

// APIError is a Step Functions API error: Code is the AWS exception name.
// Errors returned by Engine methods wrap one of the sentinels above, so
// errors.Is(err, ErrInvalidToken) works and the message carries context.
type APIError struct {
	Code string
}

// Error returns the AWS exception name.
func (e *APIError) Error() string { return e.Code }

func apiErr(sentinel *APIError, format string, args ...any) error {
	return fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))
}

// apiCode returns the AWS exception name of err, or "" when err carries none.
func apiCode(err error) string {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}
