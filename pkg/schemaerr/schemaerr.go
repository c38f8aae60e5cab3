// Package schemaerr flattens a JSON Schema validation error into its leaf
// violations, for the catalog's batch validation and for the eval's
// checks. It imports nothing of the project, so a client of the API may
// use it; it must not grow rules of its own.
package schemaerr

import (
	"errors"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// Violation is one leaf error of a schema validation: where in the instance
// (a JSON pointer, "" for the root) and what is wrong there.
type Violation struct{ Pointer, Message string }

// Violations flattens a jsonschema error into its leaf violations, in the
// validator's order; nil when err is not a validation error.
func Violations(err error) []Violation {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil
	}
	var out []Violation
	var walk func(v *jsonschema.ValidationError)
	walk = func(v *jsonschema.ValidationError) {
		if len(v.Causes) == 0 {
			out = append(out, Violation{Pointer: v.InstanceLocation, Message: v.Message})
			return
		}
		for _, c := range v.Causes {
			walk(c)
		}
	}
	walk(ve)
	return out
}
