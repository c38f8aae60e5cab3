package schemacheck_test

import (
	"encoding/json"
	"errors"
	"strings"
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

// A schema is self-contained: a $ref reaches its own subschemas by JSON
// pointer, by an "$id" it declares and by an anchor, and nothing outside
// it, not even a draft's meta-schema.
func TestASchemaReachesOnlyItself(t *testing.T) {
	t.Parallel()
	inside := `{"$id":"https://tools.example/order.json","type":"object",
		"properties":{"a":{"$ref":"#/$defs/pos"},"b":{"$ref":"item.json"},"c":{"$ref":"#small"},"d":{"$ref":"order.json#/$defs/pos"}},
		"$defs":{"pos":{"type":"integer","minimum":1},
			"item":{"$id":"item.json","type":"string","maxLength":3},
			"small":{"$anchor":"small","type":"number","maximum":2}}}`
	s, err := schemacheck.Compile("mem:///order.json", []byte(inside))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(map[string]any{"a": 1.0, "b": "abc", "c": 2.0, "d": 5.0}); err != nil {
		t.Errorf("a valid value = %v", err)
	}
	got := map[string]string{}
	for _, v := range schemaerr.Violations(s.Validate(map[string]any{"a": 0.0, "b": "abcd", "c": 3.0, "d": 0.5})) {
		got[v.Pointer] = v.Message
	}
	want := map[string]string{"/a": "must be >= 1 but found 0", "/b": "length must be <= 3, but got 4",
		"/c": "must be <= 2 but found 3", "/d": "expected integer, but got number"}
	if !cmp.Equal(got, want) {
		t.Errorf("violations %v, want %v", got, want)
	}
	for _, ref := range []string{"file:///etc/hostname", "https://json-schema.org/draft/2020-12/schema",
		"http://169.254.169.254/latest/meta-data", "other.json", "#/$defs/missing", "#nowhere", "#/type"} {
		_, err := schemacheck.Compile("mem:///r.json", []byte(`{"$defs":{"x":{}},"properties":{"p":{"$ref":"`+ref+`"}}}`))
		if err == nil {
			t.Errorf("a schema with a $ref to %s compiled", ref)
		}
	}
}

// What a schema says must be well formed; a schema that applies itself to
// the same value without end is refused when it is compiled, not when a
// value would loop.
func TestAMalformedSchemaDoesNotCompile(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`{"type":"strin"}`, `{"type":["string",3]}`, `{"required":"x"}`, `{"minimum":"a"}`,
		`{"minLength":-1}`, `{"maxItems":1.5}`, `{"multipleOf":0}`, `{"pattern":"("}`,
		`{"patternProperties":{"(":{}}}`, `{"properties":[]}`, `{"properties":{"a":3}}`,
		`{"items":[{}]}`, `{"enum":{}}`, `{"uniqueItems":"yes"}`, `{"$schema":"https://example.com/my-draft"}`,
		`{"$ref":"#"}`, `{"allOf":[{"$ref":"#/$defs/a"}],"$defs":{"a":{"anyOf":[{"$ref":"#"}]}}}`,
		`[]`, `3`, `{"type":"string"} trailing`,
	} {
		if _, err := schemacheck.Compile("mem:///bad.json", []byte(raw)); err == nil {
			t.Errorf("%s compiled", raw)
		}
	}
	// A recursive schema that reads deeper into the value on each turn is fine.
	tree := `{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}}}}`
	s, err := schemacheck.Compile("mem:///tree.json", []byte(tree))
	if err != nil {
		t.Fatal(err)
	}
	v := map[string]any{"name": "a", "children": []any{map[string]any{"name": "b", "children": []any{map[string]any{"name": 3.0}}}}}
	if vs := schemaerr.Violations(s.Validate(v)); len(vs) != 1 || vs[0].Pointer != "/children/0/children/0/name" {
		t.Errorf("violations %v, want one at /children/0/children/0/name", vs)
	}
}

// Violations are told in the instance's plain JSON pointers, whatever its
// keys are, in the same order every time.
func TestViolationsAreStable(t *testing.T) {
	t.Parallel()
	s, err := schemacheck.Compile("mem:///k.json", []byte(`{"additionalProperties":false,
		"properties":{"a b":{"type":"string"},"x/y":{"type":"string"},"m~n":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	v := map[string]any{"a b": 1.0, "x/y": 2.0, "m~n": 3.0, "z": 0.0, "q": 0.0}
	first := schemaerr.Violations(s.Validate(v))
	want := []schemaerr.Violation{
		{Pointer: "/a b", Message: "expected string, but got number"},
		{Pointer: "/m~0n", Message: "expected string, but got number"},
		{Pointer: "/x~1y", Message: "expected string, but got number"},
		{Pointer: "", Message: "additionalProperties 'q', 'z' not allowed"},
	}
	if !cmp.Equal(first, want) {
		t.Errorf("violations %v, want %v", first, want)
	}
	for range 20 {
		if again := schemaerr.Violations(s.Validate(v)); !cmp.Equal(again, first) {
			t.Fatalf("violations %v, then %v", first, again)
		}
	}
}

// A number too large for an exact rational (an exponent of a million
// digits) is still compared, counted as an integer and told apart from
// others; an empty property name is the pointer "/".
func TestHugeNumbersAndTheEmptyKey(t *testing.T) {
	t.Parallel()
	s, err := schemacheck.Compile("mem:///h.json", []byte(`{"type":"object","properties":{
		"n":{"type":"integer","maximum":1e300},"u":{"uniqueItems":true},"":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	huge := json.Number("1e1000001")
	got := map[string]string{}
	for _, v := range schemaerr.Violations(s.Validate(map[string]any{"n": huge, "u": []any{huge, json.Number("10e1000000")}, "": 1.0})) {
		got[v.Pointer] = v.Message
	}
	want := map[string]string{"/n": "must be <= 1e+300 but found 1e1000001", "/u": "items at index 0 and 1 are equal",
		"/": "expected string, but got number"}
	if !cmp.Equal(got, want) {
		t.Errorf("violations %v, want %v", got, want)
	}
	if err := s.Validate(map[string]any{"n": json.Number("-1e1000001"), "u": []any{huge, json.Number("-1e1000001")}}); err != nil {
		t.Errorf("a valid value = %v", err)
	}
	// Beyond even a big float's exponent: read as infinite.
	if vs := schemaerr.Violations(s.Validate(map[string]any{"n": json.Number("1E2170000000")})); len(vs) != 1 || vs[0].Pointer != "/n" {
		t.Errorf("1E2170000000 against a maximum: %v", vs)
	}
}

// $dynamicRef follows the dynamic scope: the strict tree extends the tree
// schema so that unevaluatedProperties reaches every node of it; a
// dynamic reference that could loop back on the same value is told, not
// followed without end.
func TestDynamicRefFollowsTheDynamicScope(t *testing.T) {
	t.Parallel()
	s, err := schemacheck.Compile("mem:///strict.json", []byte(`{"$id":"https://example.com/strict.json","$dynamicAnchor":"node",
		"$ref":"tree.json","unevaluatedProperties":false,
		"$defs":{"tree":{"$id":"tree.json","$dynamicAnchor":"node","type":"object",
			"properties":{"data":true,"children":{"type":"array","items":{"$dynamicRef":"#node"}}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(map[string]any{"data": 1.0, "children": []any{map[string]any{"data": 2.0}}}); err != nil {
		t.Errorf("a valid tree = %v", err)
	}
	// The misspelt member of a child, and so (its tree having failed) the
	// children member itself, are not evaluated by any schema.
	got := schemaerr.Violations(s.Validate(map[string]any{"children": []any{map[string]any{"daat": 1.0}}}))
	want := []schemaerr.Violation{{Pointer: "/children/0/daat", Message: "not allowed"}, {Pointer: "/children", Message: "not allowed"}}
	if !cmp.Equal(got, want) {
		t.Errorf("violations %v, want %v", got, want)
	}
	loop, err := schemacheck.Compile("mem:///loop.json", []byte(`{"$id":"https://example.com/loop.json","$dynamicAnchor":"x",
		"$ref":"inner.json","$defs":{"inner":{"$id":"inner.json","$dynamicRef":"#x",
			"$defs":{"leaf":{"$dynamicAnchor":"x","type":"number"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := loop.Validate(1.0); err == nil || schemaerr.Violations(err) != nil || !strings.Contains(err.Error(), "without end") {
		t.Errorf("a dynamic loop = %v, want an error saying it does not end", err)
	}
}
