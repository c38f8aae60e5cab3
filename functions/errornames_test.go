package functions_test

import (
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The state machine retries and catches by error name, and aws-lambda-go
// names a returned error by its Go type (pointer stripped: *turn.TransientError
// is "TransientError"). No Go code refers to the ASL's strings, so a renamed
// type would silently stop being retried. This test reads both sides: every
// ErrorEquals name of statemachine/turn.asl.json and loop.asl.json that is not a States.* or
// Lambda.* name must be a type with an Error() string method, declared in a
// package of this module that the state's function links. A state that
// names no function (a Map's Catch) may match a type of any step function.
func TestErrorEqualsNamesAreDeclaredErrorTypes(t *testing.T) {
	t.Parallel()
	uses := map[string][]string{} // function ("" for none) → names
	// The turn (STANDARD) and its loop (EXPRESS).
	for _, file := range []string{"turn.asl.json", "loop.asl.json"} {
		raw, err := os.ReadFile(filepath.Join("..", "statemachine", file))
		if err != nil {
			t.Fatal(err)
		}
		var def any
		if err := json.Unmarshal(raw, &def); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if err := errorEqualsNames(def, "", uses); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	declared := map[string]map[string]string{} // function → type name → package dir
	var all []string
	for fn := range uses {
		if fn != "" {
			all = append(all, fn)
		}
	}
	if len(all) == 0 {
		t.Fatal("turn.asl.json: no Task names a function")
	}
	for _, fn := range all {
		declared[fn] = errorTypesLinkedBy(t, fn)
	}
	custom := 0
	for fn, names := range uses {
		for _, name := range names {
			if strings.HasPrefix(name, "States.") || strings.HasPrefix(name, "Lambda.") {
				continue
			}
			custom++
			candidates := all
			if fn != "" {
				candidates = []string{fn}
			}
			if !slices.ContainsFunc(candidates, func(f string) bool { return declared[f][name] != "" }) {
				t.Errorf("turn.asl.json matches %q, but no package linked by functions/%s declares an error type of that name", name, strings.Join(candidates, ", functions/"))
			}
		}
	}
	if custom == 0 {
		t.Error("turn.asl.json: found no ErrorEquals name of our own; the walk over the definition is broken")
	}
}

// functionRef is how the definition names a step function: the
// placeholder the stack (and devstack) substitute, ${LLMStepFunction} for
// functions/llmstep.
var functionRef = regexp.MustCompile(`^\$\{(\w+)Function\}$`)

// errorEqualsNames collects, from a state machine definition, every
// ErrorEquals name by the function of the Task whose Retry or Catch lists
// it ("" outside a Task that names a function).
func errorEqualsNames(v any, fn string, into map[string][]string) error {
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			if err := errorEqualsNames(e, fn, into); err != nil {
				return err
			}
		}
	case map[string]any:
		for _, key := range []string{"Arguments", "Parameters"} {
			args, _ := v[key].(map[string]any)
			if ref, ok := args["FunctionName"].(string); ok {
				m := functionRef.FindStringSubmatch(ref)
				if m == nil {
					return &unknownFunctionError{Ref: ref}
				}
				fn = strings.ToLower(m[1])
			}
		}
		if list, ok := v["ErrorEquals"].([]any); ok {
			for _, e := range list {
				if s, ok := e.(string); ok {
					into[fn] = append(into[fn], s)
				}
			}
		}
		for k, e := range v {
			if k != "ErrorEquals" {
				if err := errorEqualsNames(e, fn, into); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

type unknownFunctionError struct{ Ref string }

func (e *unknownFunctionError) Error() string {
	return "FunctionName " + e.Ref + " is not a ${…Function} placeholder"
}

// errorTypesLinkedBy lists the error types declared by this module's
// packages that functions/fn links, as built for Lambda.
func errorTypesLinkedBy(t *testing.T, fn string) map[string]string {
	t.Helper()
	if _, err := os.Stat(fn); err != nil {
		t.Fatalf("the definition names a function that has no folder: %v", err)
	}
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "-tags", buildTags,
		"-f", `{{if and .Module .Module.Main}}{{.Dir}}{{range .GoFiles}}{{"\t"}}{{.}}{{end}}{{end}}`, "./"+fn).Output()
	if err != nil {
		t.Fatalf("go list -deps ./functions/%s: %v", fn, err)
	}
	types := map[string]string{}
	fset := token.NewFileSet()
	for line := range strings.Lines(string(out)) {
		fields := strings.Split(strings.TrimSpace(line), "\t")
		if len(fields) < 2 {
			continue
		}
		var files []*ast.File
		for _, name := range fields[1:] {
			f, err := parser.ParseFile(fset, filepath.Join(fields[0], name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		for _, name := range errorTypes(files) {
			types[name] = fields[0]
		}
	}
	if len(types) == 0 {
		t.Fatalf("found no error type in the packages functions/%s links", fn)
	}
	return types
}

// errorTypes returns the names of one package's defined types (not
// aliases, whose errors Lambda would name by the aliased type) that have
// an Error() string method, on the value or the pointer.
func errorTypes(files []*ast.File) []string {
	defined := map[string]bool{}
	methods := map[string]bool{}
	for _, f := range files {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.GenDecl:
				for _, s := range d.Specs {
					if ts, ok := s.(*ast.TypeSpec); ok && !ts.Assign.IsValid() {
						defined[ts.Name.Name] = true
					}
				}
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) != 1 || d.Name.Name != "Error" ||
					d.Type.Params.NumFields() != 0 || d.Type.Results.NumFields() != 1 {
					continue
				}
				if res, ok := d.Type.Results.List[0].Type.(*ast.Ident); !ok || res.Name != "string" {
					continue
				}
				recv := d.Recv.List[0].Type
				if star, ok := recv.(*ast.StarExpr); ok {
					recv = star.X
				}
				switch r := recv.(type) {
				case *ast.IndexExpr:
					recv = r.X
				case *ast.IndexListExpr:
					recv = r.X
				}
				if id, ok := recv.(*ast.Ident); ok {
					methods[id.Name] = true
				}
			}
		}
	}
	var names []string
	for name := range methods {
		if defined[name] {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// errorTypes must tell an error type from what only looks like one, or the
// test above would pass a name with no type.
func TestErrorTypesFromSource(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		want      []string
	}{
		{"pointer receiver", "type TransientError struct{ Err error }\nfunc (e *TransientError) Error() string { return \"\" }", []string{"TransientError"}},
		{"value receiver", "type NotFound string\nfunc (e NotFound) Error() string { return string(e) }", []string{"NotFound"}},
		{"generic", "type Wrapped[T any] struct{ v T }\nfunc (e *Wrapped[T]) Error() string { return \"\" }", []string{"Wrapped"}},
		{"renamed type, method left behind", "type RetryableError struct{}\nfunc (e *TransientError) Error() string { return \"\" }", nil},
		{"no Error method", "type TransientError struct{}\nfunc (e *TransientError) String() string { return \"\" }", nil},
		{"Error with arguments", "type TransientError struct{}\nfunc (e *TransientError) Error(x int) string { return \"\" }", nil},
		{"Error returning no string", "type TransientError struct{}\nfunc (e *TransientError) Error() []byte { return nil }", nil},
		{"alias", "type other struct{}\nfunc (e *other) Error() string { return \"\" }\ntype TransientError = other", []string{"other"}},
		{"a function, not a method", "type TransientError struct{}\nfunc Error() string { return \"\" }", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := parser.ParseFile(token.NewFileSet(), "x.go", "package x\n"+tt.src, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			if got := errorTypes([]*ast.File{f}); !slices.Equal(got, tt.want) {
				t.Errorf("errorTypes = %v, want %v", got, tt.want)
			}
		})
	}
}

// errorEqualsNames must find the names in nested states and give each the
// function of its own Task.
func TestErrorEqualsNamesWalk(t *testing.T) {
	t.Parallel()
	def := `{"States":{
		"A":{"Type":"Task","Arguments":{"FunctionName":"${LLMStepFunction}"},"Retry":[{"ErrorEquals":["TransientError"]}]},
		"M":{"Type":"Map","ItemProcessor":{"States":{
			"B":{"Type":"Task","Parameters":{"FunctionName":"${InvokeFunction}"},"Catch":[{"ErrorEquals":["States.ALL","WorkflowContinuesError"]}]}}},
			"Catch":[{"ErrorEquals":["CallLost"]}]}}}`
	var v any
	if err := json.Unmarshal([]byte(def), &v); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	if err := errorEqualsNames(v, "", got); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"llmstep": {"TransientError"}, "invoke": {"States.ALL", "WorkflowContinuesError"}, "": {"CallLost"}}
	if len(got) != len(want) {
		t.Errorf("names = %v, want %v", got, want)
	}
	for fn, names := range want {
		if !slices.Equal(got[fn], names) {
			t.Errorf("names of %q = %v, want %v", fn, got[fn], names)
		}
	}
	var unknown *unknownFunctionError
	if err := errorEqualsNames(map[string]any{"Arguments": map[string]any{"FunctionName": "arn:aws:lambda:x"}}, "", got); err == nil {
		t.Error("a literal FunctionName was accepted")
	} else if !errors.As(err, &unknown) {
		t.Errorf("err = %v, want *unknownFunctionError", err)
	}
}
