// Package schemacheck compiles JSON Schemas and validates values against
// them, reporting what is wrong as a *schemaerr.Error: every leaf
// violation with its instance pointer, in words the model can act on.
//
// It is the project's own validator, because the one it replaced
// compiled five draft meta-schemas in its package initialiser: about
// 5 ms of every cold start of the functions that check tool arguments.
// This package's initialiser does nothing.
//
// What it reads: drafts 4, 6, 7, 2019-09 and 2020-12 (chosen by "$schema";
// 2020-12 when there is none), every validation and applicator keyword of
// them (unevaluatedProperties and unevaluatedItems included), "$ref" into
// the schema itself (JSON pointers, "$id"s and anchors), "format" as an
// assertion in drafts 4 to 7 and in a schema that names no draft, and
// draft 7's "contentEncoding" (base64) and "contentMediaType"
// (application/json). A malformed keyword (a "type" that names no type, a
// "pattern" that is not a regular expression, a "minimum" that is not a
// number) is a compile error, and so is a schema that would apply itself
// to the same value without end.
//
// Its verdicts and messages are those of the reference implementation it
// replaced (santhosh-tekuri/jsonschema/v5), shown by the differential
// test in oracle_test.go, except where it differs on purpose:
//   - a schema is self-contained: a "$ref" to anything outside it — a
//     file, another URL, a draft's meta-schema — does not compile (a
//     schema may come from an agent card);
//   - a violation's pointer is a plain JSON pointer ("/sp ace"; "/" for
//     the empty property name), and violations come in the same order
//     every time;
//   - a number too large for an exact rational (1e1000001) is checked as
//     a 4,096-bit float rather than crashing.
package schemacheck

import (
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

// Schema is one compiled schema. It is immutable and safe for
// concurrent use.
type Schema struct {
	url  string
	root *node
	// tracks: some node reads unevaluatedProperties or unevaluatedItems,
	// so validation records what each keyword evaluated.
	tracks bool
	// dynamic are the $dynamicAnchors of each resource by name, recursive
	// the roots with $recursiveAnchor, by the resource's URI: what a
	// $dynamicRef or $recursiveRef may land on in the dynamic scope.
	dynamic   map[string]map[string]*node
	recursive map[string]*node
}

// Validate checks v, decoded JSON (maps, slices, float64 or json.Number,
// strings, booleans, nil): nil when it is valid, a *schemaerr.Error with
// its leaf violations when it is not.
func (s *Schema) Validate(v any) error {
	c := checker{schema: s, tracks: s.tracks}
	if len(s.dynamic) > 0 || len(s.recursive) > 0 {
		c.active = map[activeKey]bool{}
	}
	errs, _ := c.check(s.root, v, "")
	if c.bad != nil {
		return c.bad
	}
	if len(errs) == 0 {
		return nil
	}
	out := make([]schemaerr.Violation, len(errs))
	for i, e := range errs {
		out[i] = e.Violation
	}
	return &schemaerr.Error{Violations: out, Err: &validationError{url: s.url, first: errs[0]}}
}
