package schemacheck_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clientagent/clientagent/pkg/schemacheck"
	"github.com/clientagent/clientagent/pkg/schemaerr"
)

// A failed check is every leaf violation, each with its instance pointer;
// a schema may not reach outside itself.
func TestViolationsWithTheirPointers(t *testing.T) {
	t.Parallel()
	s, err := schemacheck.Compile("mem:///t.json", []byte(`{"type":"object","required":["word"],
		"properties":{"word":{"type":"string"},"size":{"type":"integer","minimum":1},"tags":{"type":"array","items":{"type":"string"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(map[string]any{"word": "w", "size": 3.0}); err != nil {
		t.Errorf("a valid value = %v", err)
	}
	err = s.Validate(map[string]any{"size": 0.0, "tags": []any{"a", 2.0}})
	var se *schemaerr.Error
	if !errors.As(err, &se) || err.Error() == "" {
		t.Fatalf("Validate = %v, want a *schemaerr.Error", err)
	}
	got := map[string]bool{}
	for _, v := range schemaerr.Violations(err) {
		got[v.Pointer] = true
	}
	if want := map[string]bool{"": true, "/size": true, "/tags/1": true}; !cmp.Equal(got, want) {
		t.Errorf("violations at %v, want the root (word missing), /size and /tags/1", got)
	}
	if _, err := schemacheck.Compile("mem:///r.json", []byte(`{"$ref":"file:///etc/hostname"}`)); err == nil {
		t.Error("a schema with a $ref to a file compiled")
	}
}
