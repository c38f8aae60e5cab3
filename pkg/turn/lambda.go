package turn

import (
	"context"
	"encoding/json"
	"fmt"
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
