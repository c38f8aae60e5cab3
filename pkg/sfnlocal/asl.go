package sfnlocal

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
)

// Resources the engine implements.
const (
	resourceLambdaInvoke = "arn:aws:states:::lambda:invoke"
	resourceLambdaWait   = "arn:aws:states:::lambda:invoke.waitForTaskToken"
	// resourceStartSync starts an execution of another state machine and
	// waits for its end; the result is DescribeExecution's answer with
	// Input and Output as parsed JSON.
	resourceStartSync = "arn:aws:states:::states:startExecution.sync:2"
)

// State machine types, as CreateStateMachine's type takes them.
const (
	TypeStandard = "STANDARD"
	TypeExpress  = "EXPRESS"
)

// ExpressMaxSeconds is an EXPRESS execution's longest run: five minutes.
const ExpressMaxSeconds = 300

// machine is a loaded, validated state machine.
type machine struct {
	name       string
	arn        string
	definition []byte
	defHash    string // names the definition in a store (Snapshot.DefinitionHash)
	root       *graph
	timeout    int  // execution TimeoutSeconds, 0 = none
	express    bool // an EXPRESS machine: never persisted, at most ExpressMaxSeconds
	// historyLen is how many events the history of this machine's
	// execution that ended last held: a new execution's history starts
	// with room for as many (newExecution), so it is allocated once, not
	// grown and copied a dozen times as its events come.
	historyLen atomic.Int64
}

// graph is a StartAt plus its States: the top level or a Map's ItemProcessor.
type graph struct {
	StartAt string
	States  map[string]*state
}

type state struct {
	Name string
	Type string
	Next string
	End  bool

	Assign    map[string]any
	Output    any
	hasOutput bool

	// Task
	Resource         string
	waitForToken     bool
	startSync        bool // states:startExecution.sync:2
	Arguments        any
	hasArguments     bool
	TimeoutSeconds   any
	HeartbeatSeconds any
	Retry            []retrier
	Catch            []catcher

	// Choice
	Choices []choiceRule
	Default string

	// Map
	Items          any
	hasItems       bool
	ItemSelector   any
	hasSelector    bool
	MaxConcurrency any
	processor      *graph

	// Fail
	Error any
	Cause any
}

type retrier struct {
	ErrorEquals     []string
	IntervalSeconds float64
	MaxAttempts     int
	BackoffRate     float64
	MaxDelaySeconds float64
	JitterStrategy  string
}

type catcher struct {
	ErrorEquals []string
	Next        string
	Assign      map[string]any
	Output      any
	hasOutput   bool
}

type choiceRule struct {
	Condition *expr
	Next      string
	Assign    map[string]any
	Output    any
	hasOutput bool
}

// Fields each part of a JSONata definition may carry. Anything else is
// rejected at load: the engine never silently ignores a field.
var (
	topFields = set("StartAt", "States", "QueryLanguage", "Comment", "TimeoutSeconds", "Version")
	common    = []string{"Type", "Comment", "QueryLanguage"}
	flow      = []string{"Next", "End"}
	stateFlds = map[string]map[string]bool{
		"Task":    set(append(append(common, flow...), "Resource", "Arguments", "Output", "Assign", "Retry", "Catch", "TimeoutSeconds", "HeartbeatSeconds")...),
		"Pass":    set(append(append(common, flow...), "Output", "Assign")...),
		"Choice":  set(append(common, "Choices", "Default", "Output", "Assign")...),
		"Map":     set(append(append(common, flow...), "ItemProcessor", "Items", "ItemSelector", "MaxConcurrency", "Output", "Assign", "Retry", "Catch")...),
		"Succeed": set(append(common, "Output")...),
		"Fail":    set(append(common, "Error", "Cause")...),
	}
	retryFields  = set("ErrorEquals", "IntervalSeconds", "MaxAttempts", "BackoffRate", "MaxDelaySeconds", "JitterStrategy", "Comment")
	catchFields  = set("ErrorEquals", "Next", "Output", "Assign", "Comment")
	choiceFields = set("Condition", "Next", "Output", "Assign", "Comment")
	procFields   = set("ProcessorConfig", "StartAt", "States", "Comment")
	argFields    = set("FunctionName", "Payload")
	syncFields   = set("StateMachineArn", "Input", "Name")
)

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// parseMachine loads and validates an ASL definition in JSONata mode. An
// EXPRESS machine may not wait for a task token nor run a .sync task (AWS
// refuses both), and runs at most ExpressMaxSeconds (its default timeout).
func parseMachine(definition []byte, express bool) (*graph, int, error) {
	var top map[string]any
	if err := json.Unmarshal(definition, &top); err != nil {
		return nil, 0, fmt.Errorf("definition is not a JSON object: %w", err)
	}
	if ql, _ := top["QueryLanguage"].(string); ql != "JSONata" {
		return nil, 0, fmt.Errorf("field \"QueryLanguage\" must be \"JSONata\" (JSONPath machines are not supported), got %v", top["QueryLanguage"])
	}
	if err := onlyFields("definition", top, topFields); err != nil {
		return nil, 0, err
	}
	timeout := 0
	if v, ok := top["TimeoutSeconds"]; ok {
		f, ok := v.(float64)
		if !ok || f < 0 || f != float64(int(f)) {
			return nil, 0, fmt.Errorf("definition: field \"TimeoutSeconds\" must be a non-negative integer")
		}
		timeout = int(f)
	}
	if express {
		if timeout == 0 || timeout > ExpressMaxSeconds {
			if timeout > ExpressMaxSeconds {
				return nil, 0, fmt.Errorf("definition: an EXPRESS state machine runs at most %d seconds, TimeoutSeconds is %d", ExpressMaxSeconds, timeout)
			}
			timeout = ExpressMaxSeconds
		}
	}
	p := &parser{names: map[string]bool{}, exprs: map[string]*expr{}, express: express}
	g, err := p.graph(top)
	if err != nil {
		return nil, 0, err
	}
	return g, timeout, nil
}

// parser holds what one definition's states share: the state names (unique
// across Map scopes) and its compiled expressions, each compiled once.
type parser struct {
	names   map[string]bool
	exprs   map[string]*expr
	express bool
}

// compile returns tmpl with every "{% expr %}" string replaced by its
// compiled expression, so a definition with a bad expression is rejected at
// load and no expression is compiled again when it runs.
func (p *parser) compile(where string, tmpl any) (any, error) {
	switch t := tmpl.(type) {
	case string:
		src, ok := isExpr(t)
		if !ok {
			return t, nil
		}
		if x, ok := p.exprs[src]; ok {
			return x, nil
		}
		x, err := compileExpr(src)
		if err != nil {
			return nil, fmt.Errorf("%s: JSONata expression %q: %w", where, src, err)
		}
		p.exprs[src] = x
		return x, nil
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, v := range t {
			c, err := p.compile(where, v)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, v := range t {
			c, err := p.compile(where, v)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	default:
		return t, nil
	}
}

// compileAssign compiles an Assign object.
func (p *parser) compileAssign(where string, v any) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: field \"Assign\" must be an object", where)
	}
	c, err := p.compile(where, m)
	if err != nil {
		return nil, err
	}
	return c.(map[string]any), nil
}

func onlyFields(where string, obj map[string]any, allowed map[string]bool) error {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !allowed[k] {
			return fmt.Errorf("%s: field %q is not supported", where, k)
		}
	}
	return nil
}

func (p *parser) graph(obj map[string]any) (*graph, error) {
	start, _ := obj["StartAt"].(string)
	rawStates, ok := obj["States"].(map[string]any)
	if start == "" || !ok || len(rawStates) == 0 {
		return nil, fmt.Errorf("definition needs StartAt and States")
	}
	g := &graph{StartAt: start, States: map[string]*state{}}
	keys := make([]string, 0, len(rawStates))
	for k := range rawStates {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, name := range keys {
		if p.names[name] {
			return nil, fmt.Errorf("state %q: duplicate state name", name)
		}
		p.names[name] = true
		raw, ok := rawStates[name].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("state %q: not an object", name)
		}
		s, err := p.state(name, raw)
		if err != nil {
			return nil, err
		}
		g.States[name] = s
	}
	if g.States[start] == nil {
		return nil, fmt.Errorf("StartAt %q names no state", start)
	}
	check := func(from, to string) error {
		if g.States[to] == nil {
			return fmt.Errorf("state %q: transition to %q, which is not a state of the same scope", from, to)
		}
		return nil
	}
	for _, name := range keys {
		s := g.States[name]
		targets := []string{}
		if s.Next != "" {
			targets = append(targets, s.Next)
		}
		if s.Default != "" {
			targets = append(targets, s.Default)
		}
		for _, c := range s.Choices {
			targets = append(targets, c.Next)
		}
		for _, c := range s.Catch {
			targets = append(targets, c.Next)
		}
		for _, t := range targets {
			if err := check(name, t); err != nil {
				return nil, err
			}
		}
	}
	return g, nil
}

func (p *parser) state(name string, raw map[string]any) (*state, error) {
	where := fmt.Sprintf("state %q", name)
	typ, _ := raw["Type"].(string)
	allowed, ok := stateFlds[typ]
	if !ok {
		return nil, fmt.Errorf("%s: field \"Type\" value %q is not supported", where, typ)
	}
	if err := onlyFields(where, raw, allowed); err != nil {
		return nil, err
	}
	if ql, ok := raw["QueryLanguage"]; ok && ql != "JSONata" {
		return nil, fmt.Errorf("%s: field \"QueryLanguage\" must be \"JSONata\"", where)
	}
	s := &state{Name: name, Type: typ}
	// compile is p.compile for this state's fields; the first error is kept.
	var cerr error
	compile := func(v any) any {
		c, err := p.compile(where, v)
		if cerr == nil {
			cerr = err
		}
		return c
	}
	if v, ok := raw["Next"]; ok {
		s.Next, _ = v.(string)
		if s.Next == "" {
			return nil, fmt.Errorf("%s: field \"Next\" must be a state name", where)
		}
	}
	if v, ok := raw["End"]; ok {
		s.End, _ = v.(bool)
		if !s.End {
			return nil, fmt.Errorf("%s: field \"End\" must be true when present", where)
		}
	}
	if allowed["Next"] && (s.Next == "") == !s.End {
		return nil, fmt.Errorf("%s: exactly one of \"Next\" and \"End\" is required", where)
	}
	if v, ok := raw["Assign"]; ok {
		m, err := p.compileAssign(where, v)
		if err != nil {
			return nil, err
		}
		s.Assign = m
	}
	if v, ok := raw["Output"]; ok {
		s.Output, s.hasOutput = compile(v), true
	}
	switch typ {
	case "Task":
		s.Resource, _ = raw["Resource"].(string)
		switch s.Resource {
		case resourceLambdaInvoke:
		case resourceLambdaWait:
			s.waitForToken = true
		case resourceStartSync:
			s.startSync = true
		default:
			return nil, fmt.Errorf("%s: field \"Resource\" value %q is not supported (only %s, %s and %s)", where, s.Resource, resourceLambdaInvoke, resourceLambdaWait, resourceStartSync)
		}
		if p.express && (s.waitForToken || s.startSync) {
			return nil, fmt.Errorf("%s: field \"Resource\" value %q is not supported by an EXPRESS state machine", where, s.Resource)
		}
		if s.startSync {
			for _, f := range []string{"TimeoutSeconds", "HeartbeatSeconds"} {
				if _, ok := raw[f]; ok {
					return nil, fmt.Errorf("%s: field %q is not supported for %s", where, f, s.Resource)
				}
			}
		}
		v, ok := raw["Arguments"]
		required, fields := "FunctionName", argFields
		if s.startSync {
			required, fields = "StateMachineArn", syncFields
		}
		if !ok {
			return nil, fmt.Errorf("%s: field \"Arguments\" with %s is required for %s", where, required, s.Resource)
		}
		if m, ok := v.(map[string]any); ok {
			if err := onlyFields(where+" Arguments", m, fields); err != nil {
				return nil, err
			}
			if _, ok := m[required]; !ok {
				return nil, fmt.Errorf("%s: field \"Arguments.%s\" is required", where, required)
			}
		}
		s.Arguments, s.hasArguments = compile(v), true
		for _, f := range []string{"TimeoutSeconds", "HeartbeatSeconds"} {
			v, ok := raw[f]
			if !ok {
				continue
			}
			if err := numberOrExpr(v); err != nil {
				return nil, fmt.Errorf("%s: field %q: %w", where, f, err)
			}
			if f == "TimeoutSeconds" {
				s.TimeoutSeconds = compile(v)
			} else {
				s.HeartbeatSeconds = compile(v)
			}
		}
	case "Choice":
		rules, ok := raw["Choices"].([]any)
		if !ok || len(rules) == 0 {
			return nil, fmt.Errorf("%s: field \"Choices\" must be a non-empty array", where)
		}
		for i, r := range rules {
			m, ok := r.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: Choices[%d] is not an object", where, i)
			}
			cw := fmt.Sprintf("%s Choices[%d]", where, i)
			if err := onlyFields(cw, m, choiceFields); err != nil {
				return nil, err
			}
			var c choiceRule
			cond, _ := m["Condition"].(string)
			if _, ok := isExpr(cond); !ok {
				return nil, fmt.Errorf("%s: field \"Condition\" must be a {%% ... %%} expression", cw)
			}
			cx, err := p.compile(cw, cond)
			if err != nil {
				return nil, err
			}
			c.Condition = cx.(*expr)
			c.Next, _ = m["Next"].(string)
			if c.Next == "" {
				return nil, fmt.Errorf("%s: field \"Next\" is required", cw)
			}
			if a, ok := m["Assign"]; ok {
				if c.Assign, err = p.compileAssign(cw, a); err != nil {
					return nil, err
				}
			}
			if o, ok := m["Output"]; ok {
				c.Output, c.hasOutput = compile(o), true
			}
			s.Choices = append(s.Choices, c)
		}
		if v, ok := raw["Default"]; ok {
			s.Default, _ = v.(string)
		}
	case "Map":
		proc, ok := raw["ItemProcessor"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: field \"ItemProcessor\" is required", where)
		}
		if err := onlyFields(where+" ItemProcessor", proc, procFields); err != nil {
			return nil, err
		}
		if pc, ok := proc["ProcessorConfig"]; ok {
			m, _ := pc.(map[string]any)
			for k, v := range m {
				if k != "Mode" || v != "INLINE" {
					return nil, fmt.Errorf("%s: field \"ItemProcessor.ProcessorConfig.%s\" value %v is not supported (only Mode INLINE)", where, k, v)
				}
			}
		}
		g, err := p.graph(proc)
		if err != nil {
			return nil, fmt.Errorf("%s ItemProcessor: %w", where, err)
		}
		s.processor = g
		if v, ok := raw["Items"]; ok {
			s.Items, s.hasItems = compile(v), true
		}
		if v, ok := raw["ItemSelector"]; ok {
			s.ItemSelector, s.hasSelector = compile(v), true
		}
		if v, ok := raw["MaxConcurrency"]; ok {
			if err := numberOrExpr(v); err != nil {
				return nil, fmt.Errorf("%s: field \"MaxConcurrency\": %w", where, err)
			}
			s.MaxConcurrency = compile(v)
		}
	case "Fail":
		s.Error, s.Cause = compile(raw["Error"]), compile(raw["Cause"])
	}
	if typ == "Task" || typ == "Map" {
		var err error
		if s.Retry, err = parseRetry(where, raw["Retry"]); err != nil {
			return nil, err
		}
		if s.Catch, err = p.catch(where, raw["Catch"]); err != nil {
			return nil, err
		}
	}
	if cerr != nil {
		return nil, cerr
	}
	return s, nil
}

func numberOrExpr(v any) error {
	switch t := v.(type) {
	case float64:
		if t < 0 || t != float64(int64(t)) {
			return fmt.Errorf("must be a non-negative integer, got %v", t)
		}
		return nil
	case string:
		if _, ok := isExpr(t); ok {
			return nil
		}
	}
	return fmt.Errorf("must be an integer or a {%% ... %%} expression, got %v", v)
}

func errorNames(where string, v any) ([]string, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return nil, fmt.Errorf("%s: field \"ErrorEquals\" must be a non-empty array", where)
	}
	out := make([]string, 0, len(arr))
	for _, e := range arr {
		s, ok := e.(string)
		if !ok || s == "" {
			return nil, fmt.Errorf("%s: field \"ErrorEquals\" holds a non-string", where)
		}
		if s == "States.ALL" && len(arr) != 1 {
			return nil, fmt.Errorf("%s: \"States.ALL\" must appear alone in ErrorEquals", where)
		}
		out = append(out, s)
	}
	return out, nil
}

// entries reads field (Retry or Catch) of where: an array of objects with
// only the allowed fields. It returns them with each one's place, as
// errors name it ("<where> Retry[1]").
func entries(where, field string, v any, allowed map[string]bool) ([]map[string]any, []string, error) {
	arr, ok := v.([]any)
	if !ok {
		return nil, nil, fmt.Errorf("%s: field %q must be an array", where, field)
	}
	objs, places := make([]map[string]any, len(arr)), make([]string, len(arr))
	for i, x := range arr {
		places[i] = fmt.Sprintf("%s %s[%d]", where, field, i)
		m, ok := x.(map[string]any)
		if !ok {
			return nil, nil, fmt.Errorf("%s: not an object", places[i])
		}
		if err := onlyFields(places[i], m, allowed); err != nil {
			return nil, nil, err
		}
		objs[i] = m
	}
	return objs, places, nil
}

func parseRetry(where string, v any) ([]retrier, error) {
	if v == nil {
		return nil, nil
	}
	objs, places, err := entries(where, "Retry", v, retryFields)
	if err != nil {
		return nil, err
	}
	var out []retrier
	for i, m := range objs {
		rw := places[i]
		r := retrier{IntervalSeconds: 1, MaxAttempts: 3, BackoffRate: 2, JitterStrategy: "NONE"}
		var err error
		if r.ErrorEquals, err = errorNames(rw, m["ErrorEquals"]); err != nil {
			return nil, err
		}
		num := func(f string, min float64) (float64, bool, error) {
			v, ok := m[f]
			if !ok {
				return 0, false, nil
			}
			n, ok := v.(float64)
			if !ok || n < min {
				return 0, false, fmt.Errorf("%s: field %q must be a number >= %v", rw, f, min)
			}
			return n, true, nil
		}
		if n, ok, err := num("IntervalSeconds", 1); err != nil {
			return nil, err
		} else if ok {
			r.IntervalSeconds = n
		}
		if n, ok, err := num("MaxAttempts", 0); err != nil {
			return nil, err
		} else if ok {
			r.MaxAttempts = int(n)
		}
		if n, ok, err := num("BackoffRate", 1); err != nil {
			return nil, err
		} else if ok {
			r.BackoffRate = n
		}
		if n, ok, err := num("MaxDelaySeconds", 1); err != nil {
			return nil, err
		} else if ok {
			r.MaxDelaySeconds = n
		}
		if j, ok := m["JitterStrategy"]; ok {
			js, _ := j.(string)
			if js != "FULL" && js != "NONE" {
				return nil, fmt.Errorf("%s: field \"JitterStrategy\" must be FULL or NONE", rw)
			}
			r.JitterStrategy = js
		}
		out = append(out, r)
	}
	return out, nil
}

func (p *parser) catch(where string, v any) ([]catcher, error) {
	if v == nil {
		return nil, nil
	}
	objs, places, err := entries(where, "Catch", v, catchFields)
	if err != nil {
		return nil, err
	}
	var out []catcher
	for i, m := range objs {
		cw := places[i]
		var c catcher
		var err error
		if c.ErrorEquals, err = errorNames(cw, m["ErrorEquals"]); err != nil {
			return nil, err
		}
		c.Next, _ = m["Next"].(string)
		if c.Next == "" {
			return nil, fmt.Errorf("%s: field \"Next\" is required", cw)
		}
		if a, ok := m["Assign"]; ok {
			if c.Assign, err = p.compileAssign(cw, a); err != nil {
				return nil, err
			}
		}
		if o, ok := m["Output"]; ok {
			if c.Output, err = p.compile(cw, o); err != nil {
				return nil, err
			}
			c.hasOutput = true
		}
		out = append(out, c)
	}
	return out, nil
}

// functionName resolves a Lambda function name, full or partial ARN
// (arn:aws:lambda:region:acct:function:NAME[:qualifier]) to NAME.
func functionName(nameOrARN string) string {
	if strings.HasPrefix(nameOrARN, "arn:") {
		parts := strings.Split(nameOrARN, ":")
		if len(parts) >= 7 && parts[5] == "function" {
			return parts[6]
		}
		return nameOrARN
	}
	if i := strings.Index(nameOrARN, ":"); i > 0 {
		return nameOrARN[:i] // NAME:qualifier
	}
	return nameOrARN
}
