// Package schemaerr is what a JSON Schema validation found, in a form the
// project reads: the leaf violations, each with where in the instance it
// is. The validator itself (pkg/schemacheck) is linked only by the
// binaries that check arguments; this package links no validator, so the
// catalog's batch validation and the eval read violations without one. It
// imports nothing of the project, so a client of the API may use it; it
// must not grow rules of its own.
package schemaerr

import "errors"

// Violation is one leaf error of a schema validation: where in the instance
// (a JSON pointer, "" for the root) and what is wrong there.
type Violation struct{ Pointer, Message string }

// Error is a failed validation: its leaf violations in the validator's
// order, and the validator's own error (whose text Error returns).
type Error struct {
	Violations []Violation
	Err        error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Violations returns the leaf violations of a validation error; nil when
// err is not one.
func Violations(err error) []Violation {
	var ve *Error
	if !errors.As(err, &ve) {
		return nil
	}
	return ve.Violations
}
