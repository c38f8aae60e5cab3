package sfnlocal

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"time"

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

// callMu serializes the evaluation of expressions that call functions:
// blues/jsonata-go's built-in functions are package-level objects whose
// name and context it sets on every call, so two such calls at once race.
// Expressions without calls (most of ours: paths, comparisons, object
// constructors) run concurrently.
var callMu sync.Mutex

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

var (
	// varRe finds the variables an expression names ($states, $cid, and
	// function names such as $exists, which are simply not bound).
	varRe = regexp.MustCompile(`\$([\p{L}\p{N}_]+)`)
	// callRe finds anything that may call a function: a name followed by "(".
	callRe = regexp.MustCompile(`[\p{L}\p{N}_$]\s*\(`)
	// statesRe finds the uses of $states and the field each one reads.
	statesRe = regexp.MustCompile(`\$states\b(?:\.([\p{L}\p{N}_]+))?`)
)

// expr is one compiled "{% %}" expression of a definition. A compiled
// jsonata.Expr keeps its bound variables, so each evaluation takes one
// from a pool and binds its own; "~>" is excluded from reuse because the
// library rewrites the call node on the right of "~>" on every evaluation.
type expr struct {
	src    string
	vars   []string // names it may read as workflow variables ("states" apart)
	fields []string // the fields of $states it reads; nil: all of them
	calls  bool     // may call a function: evaluated under callMu
	path   bool     // a plain path such as $states.input.calls
	// eqPath and eqLit are a comparison of a plain path with a string
	// literal ($states.input.next = "tools"); eqPath is "" otherwise.
	eqPath, eqLit string
	// orPath and orElse are $exists(p) ? p : literal, the literal decoded;
	// orPath is "" otherwise.
	orPath string
	orElse any
	// since is $toMillis(p) - $toMillis(q) compared with a path (the
	// loop's time budget); nil otherwise.
	since *sinceCheck
	reuse bool
	pool  sync.Pool // of *compiled
}

// compiled is one jsonata.Expr with the names bound on it so far.
type compiled struct {
	prog  *jsonata.Expr
	bound map[string]bool
}

// compileJSONata compiles src. The library's parser panics on some
// malformed input ("!é" slices its input at -1): that is a syntax error
// like any other, not a crash of the process.
func compileJSONata(src string) (prog *jsonata.Expr, err error) {
	defer func() {
		if r := recover(); r != nil {
			prog, err = nil, fmt.Errorf("the JSONata parser failed on it: %v", r)
		}
	}()
	return jsonata.Compile(src)
}

// compileExpr compiles src once, at load.
func compileExpr(src string) (*expr, error) {
	prog, err := compileJSONata(src)
	if err != nil {
		return nil, err
	}
	x := &expr{src: src, path: pathRe.MatchString(src), reuse: !strings.Contains(src, "~>")}
	if m := eqRe.FindStringSubmatch(src); m != nil {
		x.eqPath, x.eqLit = m[1], m[2]
	}
	if m := orRe.FindStringSubmatch(src); m != nil && m[1] == m[2] {
		if err := json.Unmarshal([]byte(m[3]), &x.orElse); err == nil {
			x.orPath = m[1]
		}
	}
	if m := sinceRe.FindStringSubmatch(src); m != nil {
		x.since = &sinceCheck{later: m[1], earlier: m[2], op: m[3], limit: m[4]}
	}
	x.calls = !x.reuse || callRe.MatchString(src)
	// Converting $states for the library costs more than evaluating most
	// expressions: convert only the fields read, when every use names one.
	fields := map[string]bool{}
	for _, m := range statesRe.FindAllStringSubmatch(src, -1) {
		if m[1] == "" {
			fields = nil
			break
		}
		if !fields[m[1]] {
			fields[m[1]] = true
			x.fields = append(x.fields, m[1])
		}
	}
	if fields == nil {
		x.fields = nil
	}
	seen := map[string]bool{}
	for _, m := range varRe.FindAllStringSubmatch(src, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			x.vars = append(x.vars, m[1])
		}
	}
	x.pool.Put(&compiled{prog: prog, bound: map[string]bool{}})
	return x, nil
}

// get returns a compiled copy on which binding bind leaves no other name
// bound (a variable bound by an earlier evaluation and absent now must read
// as undefined, or as the built-in function of that name).
func (x *expr) get(bind map[string]any) (*compiled, error) {
	if c, ok := x.pool.Get().(*compiled); ok {
		fits := true
		for name := range c.bound {
			if _, ok := bind[name]; !ok {
				fits = false
				break
			}
		}
		if fits {
			return c, nil
		}
	}
	prog, err := compileJSONata(x.src)
	if err != nil {
		return nil, fmt.Errorf("compile %q: %w", x.src, err)
	}
	return &compiled{prog: prog, bound: map[string]bool{}}, nil
}

// eval evaluates x with $states and the workflow variables it names bound.
// It returns errUndefined when the result is undefined.
func (x *expr) eval(states map[string]any, vars map[string]any) (any, error) {
	// Most of a definition's expressions are a plain path or a path
	// compared with a string. Over objects alone, JSONata's answer is the
	// value found (or whether it is that string): read it directly.
	// Anything else (an array on the way, a missing field) is the
	// library's to answer. The values are never changed in place, so
	// returning the one found shares nothing that could change.
	if x.path {
		if v, ok := walkPath(x.src, states, vars); ok {
			return v, nil
		}
	}
	if x.eqPath != "" {
		if v, ok := walkPath(x.eqPath, states, vars); ok {
			s, isString := v.(string)
			return isString && s == x.eqLit, nil
		}
	}
	if x.orPath != "" {
		if v, ok, sure := lookPath(x.orPath, states, vars); sure {
			if ok {
				return v, nil
			}
			return x.orElse, nil
		}
	}
	if x.since != nil {
		if v, ok := x.since.eval(states, vars); ok {
			return v, nil
		}
	}
	bind := make(map[string]any, len(x.vars))
	for _, name := range x.vars {
		if name == "states" {
			bind[name] = x.statesBinding(states)
		} else if v, ok := vars[name]; ok {
			bind[name] = toJSONata(v)
		}
	}
	c, err := x.get(bind)
	if err != nil {
		return nil, err
	}
	if err := c.prog.RegisterVars(bind); err != nil {
		return nil, fmt.Errorf("bind variables: %w", err)
	}
	for name := range bind {
		c.bound[name] = true
	}
	if x.calls {
		callMu.Lock()
	}
	v, err := c.prog.Eval(nil)
	if x.calls {
		callMu.Unlock()
	}
	if x.reuse {
		x.pool.Put(c)
	}
	if errors.Is(err, jsonata.ErrUndefined) {
		// blues/jsonata-go reads a field holding [] as undefined; jsonata-js
		// 2.0.6 returns []. Fix it up for plain paths ($states.input.calls).
		if x.path {
			if v, ok := walkPath(x.src, states, vars); ok {
				if a, ok := v.([]any); ok && len(a) == 0 {
					return []any{}, nil
				}
			}
		}
		return nil, errUndefined
	}
	if err != nil {
		return nil, fmt.Errorf("evaluate %q: %w", x.src, err)
	}
	return fromJSONata(v)
}

// statesBinding converts what x reads of $states.
func (x *expr) statesBinding(states map[string]any) any {
	if x.fields == nil {
		return toJSONata(states)
	}
	m := make(map[string]any, len(x.fields))
	for _, f := range x.fields {
		if v, ok := states[f]; ok {
			m[f] = toJSONata(v)
		}
	}
	return m
}

// evalTemplate evaluates a field value of Arguments, Output, Assign,
// ItemSelector and the like, as compiled at load: expressions are
// evaluated, other strings are literals, objects and arrays are walked.
// Undefined anywhere is an error (States.QueryEvaluationError), so a
// mistyped field name fails loudly instead of dropping data.
func evalTemplate(tmpl any, states map[string]any, vars map[string]any) (any, error) {
	switch t := tmpl.(type) {
	case *expr:
		v, err := t.eval(states, vars)
		if errors.Is(err, errUndefined) {
			return nil, fmt.Errorf("the JSONata expression '%s' returned undefined", t.src)
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
	b, err := encodeValue(v)
	if err != nil {
		return nil, fmt.Errorf("result is not JSON: %w", err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("decode result: %w", err)
	}
	return out, nil
}

// pathSyntax is a plain variable path such as $states.input.calls.
const pathSyntax = `\$[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*`

// pathRe matches a plain path alone.
var pathRe = regexp.MustCompile(`^` + pathSyntax + `$`)

// eqRe matches a plain path compared with a string literal without
// escapes: $states.input.next = "tools".
var eqRe = regexp.MustCompile(`^(` + pathSyntax + `)\s*=\s*"([^"\\]*)"$`)

// orRe matches $exists(p) ? p : literal, with p a plain path and the
// literal null, a number or a string without escapes.
var orRe = regexp.MustCompile(`^\$exists\((` + pathSyntax + `)\)\s*\?\s*(` + pathSyntax + `)\s*:\s*(null|-?[0-9]+(?:\.[0-9]+)?|"[^"\\]*")$`)

// sinceRe matches $toMillis(p) - $toMillis(q) compared with a plain path:
// $toMillis($states.context.State.EnteredTime) -
// $toMillis($states.context.Execution.StartTime) >= $budgetMs.
var sinceRe = regexp.MustCompile(`^\$toMillis\((` + pathSyntax + `)\)\s*-\s*\$toMillis\((` + pathSyntax + `)\)\s*(>=|<=|>|<)\s*(` + pathSyntax + `)$`)

// sinceCheck is a sinceRe expression. The library's $toMillis formats and
// parses pictures on every call (about 20 µs, under callMu, on every tool
// round); over two timestamps in the form the engine writes them and a
// number, the answer is read directly.
type sinceCheck struct{ later, earlier, op, limit string }

// eval answers when both paths hold RFC 3339 timestamps and the limit a
// number; ok is false for the library to answer anything else.
func (c *sinceCheck) eval(states, vars map[string]any) (v any, ok bool) {
	millis := func(path string) (int64, bool) {
		v, found, sure := lookPath(path, states, vars)
		s, isString := v.(string)
		if !found || !sure || !isString {
			return 0, false
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return 0, false
		}
		return t.UnixMilli(), true
	}
	later, ok1 := millis(c.later)
	earlier, ok2 := millis(c.earlier)
	v, found, sure := lookPath(c.limit, states, vars)
	limit, isNumber := v.(float64)
	if !ok1 || !ok2 || !found || !sure || !isNumber {
		return nil, false
	}
	d := float64(later - earlier)
	switch c.op {
	case ">=":
		return d >= limit, true
	case "<=":
		return d <= limit, true
	case ">":
		return d > limit, true
	default:
		return d < limit, true
	}
}

// walkPath resolves a plain path over the bindings.
func walkPath(expr string, states, vars map[string]any) (any, bool) {
	v, ok, _ := lookPath(expr, states, vars)
	return v, ok
}

// lookPath resolves a plain path over the bindings. sure reports that the
// walk met objects alone, so a value not found is JSONata's undefined; it
// is false when the walk met anything else (an array, whose path JSONata
// maps over), or the path's variable is not bound (it may name a function).
func lookPath(expr string, states, vars map[string]any) (v any, ok, sure bool) {
	parts := strings.Split(expr[1:], ".")
	var cur any
	if parts[0] == "states" {
		cur = states
	} else {
		v, ok := vars[parts[0]]
		if !ok {
			return nil, false, false
		}
		cur = v
	}
	for _, p := range parts[1:] {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false, true
		}
	}
	return cur, true, true
}
