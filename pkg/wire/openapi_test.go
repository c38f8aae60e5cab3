package wire

import (
	"encoding/json"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v4"
)

// The wire types are docs/api/openapi.yaml's schemas: each one's JSON
// fields are the schema's properties, nested objects included, so the
// contract and the code cannot drift apart. (Workflow is left out: it is
// what a client reads of GET /v1/catalog, which pkg/catalog writes.)
func TestTypesMatchTheOpenAPISchemas(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	schemas := doc.Components.Schemas
	for name, typ := range map[string]reflect.Type{
		"Turn":           reflect.TypeFor[Turn](),
		"Form":           reflect.TypeFor[Form](),
		"FormField":      reflect.TypeFor[FormField](),
		"Approval":       reflect.TypeFor[Approval](),
		"Step":           reflect.TypeFor[Step](),
		"ArtifactRef":    reflect.TypeFor[ArtifactRef](),
		"HistoryEntry":   reflect.TypeFor[HistoryEntry](),
		"MessageRequest": reflect.TypeFor[Message](),
		"InputRequest":   reflect.TypeFor[Input](),
		"Error":          reflect.TypeFor[ErrorAnswer](),
	} {
		s, ok := schemas[name]
		if !ok {
			t.Errorf("openapi.yaml has no schema %s", name)
			continue
		}
		compare(t, schemas, name, s, typ)
	}
}

// compare checks that type typ has exactly the properties of schema s
// (named path in messages), and recurses into the properties that are
// objects or lists of objects.
func compare(t *testing.T, schemas map[string]map[string]any, path string, s map[string]any, typ reflect.Type) {
	t.Helper()
	s = resolve(schemas, s)
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
		typ = typ.Elem()
		if items, ok := s["items"].(map[string]any); ok {
			s = resolve(schemas, items)
		}
	}
	props, _ := s["properties"].(map[string]any)
	if typ.Kind() != reflect.Struct || props == nil {
		return
	}
	fields := jsonFields(typ)
	want := slices.Sorted(maps.Keys(props))
	got := slices.Sorted(maps.Keys(fields))
	if !slices.Equal(want, got) {
		t.Errorf("%s: openapi.yaml has properties %v, the Go type %s has JSON fields %v", path, want, typ, got)
	}
	for name, p := range props {
		if ft, ok := fields[name]; ok {
			if ps, ok := p.(map[string]any); ok {
				compare(t, schemas, path+"."+name, ps, ft)
			}
		}
	}
}

// resolve follows a $ref to its schema.
func resolve(schemas map[string]map[string]any, s map[string]any) map[string]any {
	if ref, ok := s["$ref"].(string); ok {
		if r, ok := schemas[strings.TrimPrefix(ref, "#/components/schemas/")]; ok {
			return r
		}
	}
	return s
}

// jsonFields are the JSON names of typ's fields and their types; a type
// that writes itself (Step) is asked what it writes.
func jsonFields(typ reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	if typ == reflect.TypeFor[Step]() {
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		b, _ := json.Marshal(Step{Tool: "t", CallID: "c", Status: "succeeded", StartedAt: at, EndedAt: at.Add(time.Second),
			Tokens: 1, CachedTokens: 1, CostMicros: 1, Parent: "p", Inspect: json.RawMessage(`{}`), Arguments: map[string]any{"a": 1}, Result: json.RawMessage(`{}`)})
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		for k := range m {
			out[k] = reflect.TypeFor[any]()
		}
		return out
	}
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case f.Anonymous && name == "":
			maps.Copy(out, jsonFields(f.Type))
		case name == "":
			out[f.Name] = f.Type
		default:
			out[name] = f.Type
		}
	}
	return out
}
