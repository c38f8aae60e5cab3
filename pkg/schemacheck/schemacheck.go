// Package schemacheck compiles JSON Schemas and validates values against
// them (santhosh-tekuri/jsonschema/v5: drafts 4 to 2020-12, every
// violation with its instance pointer), reporting what is wrong as a
// *schemaerr.Error. The validator's package initialiser compiles its
// draft meta-schemas, milliseconds of every cold start, so only the
// binaries that check tool arguments link this package: the validate and
// api functions and the local stack call Use; the catalog of the others
// checks nothing (pkg/catalog.UseSchemas).
package schemacheck

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/schemaerr"
)

// Use makes the catalog's entries validate their arguments with this
// package (catalog.UseSchemas).
func Use() {
	catalog.UseSchemas(func(url string, raw []byte) (catalog.Validator, error) {
		s, err := Compile(url, raw)
		if err != nil {
			return nil, err // not a nil *Schema in a non-nil Validator
		}
		return s, nil
	})
}

// Schema is one compiled schema.
type Schema struct{ s *jsonschema.Schema }

// Compile compiles the schema raw, named url. The schema is
// self-contained: a $ref may point into it or to the draft meta-schemas,
// never to a file or another URL (a schema may come from an agent card).
func Compile(url string, raw []byte) (*Schema, error) {
	c := jsonschema.NewCompiler()
	c.LoadURL = func(u string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("external $ref %q is not allowed in a schema here", u)
	}
	if err := c.AddResource(url, bytes.NewReader(raw)); err != nil {
		return nil, fmt.Errorf("load schema %s: %w", url, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("compile schema %s: %w", url, err)
	}
	return &Schema{s: s}, nil
}

// Validate checks v, decoded JSON (maps, slices, float64 or json.Number,
// strings, booleans, nil): nil when it is valid, a *schemaerr.Error with
// its leaf violations when it is not.
func (s *Schema) Validate(v any) error {
	err := s.s.Validate(v)
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	var out []schemaerr.Violation
	var walk func(v *jsonschema.ValidationError)
	walk = func(v *jsonschema.ValidationError) {
		if len(v.Causes) == 0 {
			out = append(out, schemaerr.Violation{Pointer: v.InstanceLocation, Message: v.Message})
			return
		}
		for _, c := range v.Causes {
			walk(c)
		}
	}
	walk(ve)
	return &schemaerr.Error{Violations: out, Err: err}
}
