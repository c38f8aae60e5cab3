package sfnlocal

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"

	jsonata "github.com/blues/jsonata-go"
)

// The engine evaluates JSONata with github.com/blues/jsonata-go. Two gaps of
// that library against jsonata-js 2.0.6 (the version AWS runs) are closed
// here: JSON null in the bound data must be the library's own null value
// (a nil *interface{}), or it would read as "undefined"; and its
// "no results" error is JSONata's undefined, not a failure. The parity test
// (jsonata_parity_test.go) checks every expression of our definitions
// against jsonata 2.0.6 itself.

// jsonataNull is the value blues/jsonata-go uses for JSON null.
var jsonataNull *interface{}

// evalMu serializes evaluation: blues/jsonata-go mutates its shared
// built-in function objects (name, context) during a call, which races
// when two executions evaluate at once.
var evalMu sync.Mutex

// errUndefined reports an expression whose value is JSONata's undefined.
var errUndefined = errors.New("expression evaluated to undefined")

// isExpr reports whether s is a JSONata template "{% expr %}" and returns expr.
func isExpr(s string) (string, bool) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "{%") && strings.HasSuffix(t, "%}") && len(t) >= 4 {
		return strings.TrimSpace(t[2 : len(t)-2]), true
	}
	return "", false
}

// compileCheck parses expr so that a definition with a bad expression is
// rejected at load.
func compileCheck(expr string) error {
	evalMu.Lock()
	defer evalMu.Unlock()
	_, err := jsonata.Compile(expr)
	return err
}

// evalExpr evaluates one JSONata expression with $states and the workflow
// variables bound. It returns errUndefined when the result is undefined.
func evalExpr(expr string, states map[string]any, vars map[string]any) (any, error) {
	evalMu.Lock()
	defer evalMu.Unlock()
	e, err := jsonata.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("compile %q: %w", expr, err)
	}
	bind := make(map[string]any, len(vars)+1)
	for k, v := range vars {
		bind[k] = toJSONata(v)
	}
	bind["states"] = toJSONata(states)
	if err := e.RegisterVars(bind); err != nil {
		return nil, fmt.Errorf("bind variables: %w", err)
	}
	v, err := e.Eval(nil)
	if errors.Is(err, jsonata.ErrUndefined) {
		// blues/jsonata-go reads a field holding [] as undefined; jsonata-js
		// 2.0.6 returns []. Fix it up for plain paths ($states.input.calls).
		if pathRe.MatchString(expr) {
			if v, ok := walkPath(expr, states, vars); ok {
				if a, ok := v.([]any); ok && len(a) == 0 {
					return []any{}, nil
				}
			}
		}
		return nil, errUndefined
	}
	if err != nil {
		return nil, fmt.Errorf("evaluate %q: %w", expr, err)
	}
	return fromJSONata(v)
}

// evalTemplate evaluates a field value of Arguments, Output, Assign,
// ItemSelector and the like: a string that is exactly "{% expr %}" is
// evaluated, other strings are literals, objects and arrays are walked.
// Undefined anywhere is an error (States.QueryEvaluationError), so a
// mistyped field name fails loudly instead of dropping data.
func evalTemplate(tmpl any, states map[string]any, vars map[string]any) (any, error) {
	switch t := tmpl.(type) {
	case string:
		expr, ok := isExpr(t)
		if !ok {
			return t, nil
		}
		v, err := evalExpr(expr, states, vars)
		if errors.Is(err, errUndefined) {
			return nil, fmt.Errorf("the JSONata expression '%s' returned undefined", expr)
		}
		return v, err
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, v := range t {
			ev, err := evalTemplate(v, states, vars)
			if err != nil {
				return nil, fmt.Errorf("field %q: %w", k, err)
			}
			out[k] = ev
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, v := range t {
			ev, err := evalTemplate(v, states, vars)
			if err != nil {
				return nil, fmt.Errorf("index %d: %w", i, err)
			}
			out[i] = ev
		}
		return out, nil
	default:
		return t, nil
	}
}

// templateExprs returns every "{% expr %}" inside tmpl.
func templateExprs(tmpl any) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case string:
			if e, ok := isExpr(t); ok {
				out = append(out, e)
			}
		case map[string]any:
			for _, x := range t {
				walk(x)
			}
		case []any:
			for _, x := range t {
				walk(x)
			}
		}
	}
	walk(tmpl)
	return out
}

// toJSONata converts decoded JSON into the library's representation
// (null → jsonataNull) without touching the caller's value.
func toJSONata(v any) any {
	switch x := v.(type) {
	case nil:
		return jsonataNull
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = toJSONata(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = toJSONata(e)
		}
		return a
	case json.Number:
		f, _ := x.Float64()
		return f
	default:
		return v
	}
}

// fromJSONata normalizes a result into plain decoded JSON (maps, slices,
// float64, string, bool, nil) by a JSON round trip, which also rejects
// functions and other non-JSON results.
func fromJSONata(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Func {
		return nil, errors.New("expression returned a function, not JSON")
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("result is not JSON: %w", err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("decode result: %w", err)
	}
	return out, nil
}

// pathRe matches a plain variable path such as $states.input.calls.
var pathRe = regexp.MustCompile(`^\$[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)

// walkPath resolves a plain path over the bindings.
func walkPath(expr string, states, vars map[string]any) (any, bool) {
	parts := strings.Split(expr[1:], ".")
	var cur any
	if parts[0] == "states" {
		cur = states
	} else {
		v, ok := vars[parts[0]]
		if !ok {
			return nil, false
		}
		cur = v
	}
	for _, p := range parts[1:] {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}
