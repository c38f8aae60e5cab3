package sfnlocal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda/messages"
)

// fuzzBound is how long (real time) one fuzz input may take to load, run
// to its end, or evaluate: 2 s while fuzzing, where it finds the inputs
// that hang or crawl; a minute when go test replays the corpus, where it
// only guards against a hang, because on a loaded machine a fine input can
// take longer than 2 s (issue 31).
// (A function: the test flags are parsed after package initialization.)
var fuzzBound = sync.OnceValue(func() time.Duration {
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		return 2 * time.Second
	}
	return time.Minute
})

// fuzzFunctions are the function names the definitions use
// (statemachine/turn.asl.json substituted as the local stack does, and
// testdata/*.asl.json).
var fuzzFunctions = []string{"LLMStep", "ValidateBatch", "Await", "InvokeCall", "AppendResults", "FailTurn", "Flaky", "Work", "Echo"}

// turnDefinition is statemachine/turn.asl.json (or, with file, another
// definition there: loop.asl.json) with its functions named.
func turnDefinition(f *testing.F, file ...string) []byte {
	name := "turn.asl.json"
	if len(file) > 0 {
		name = file[0]
	}
	b, err := os.ReadFile(filepath.Join("..", "..", "statemachine", name))
	if err != nil {
		f.Fatal(err)
	}
	return Substitute(b, map[string]string{"LLMStepFunction": "LLMStep", "ValidateFunction": "ValidateBatch",
		"AwaitFunction": "Await", "InvokeFunction": "InvokeCall", "AppendFunction": "AppendResults"})
}

// seedDefinitions are the turn machine and testdata/*.asl.json without
// their comments and white space: the same machines in fewer bytes, so a
// new interesting input is minimized in seconds.
func seedDefinitions(f *testing.F) [][]byte {
	defs := [][]byte{turnDefinition(f), turnDefinition(f, "loop.asl.json")}
	names, _ := filepath.Glob(filepath.Join("testdata", "*.asl.json"))
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		defs = append(defs, b)
	}
	for i, d := range defs {
		var v any
		if err := json.Unmarshal(d, &v); err != nil {
			f.Fatal(err)
		}
		var drop func(v any)
		drop = func(v any) {
			switch x := v.(type) {
			case map[string]any:
				delete(x, "Comment")
				for _, e := range x {
					drop(e)
				}
			case []any:
				for _, e := range x {
					drop(e)
				}
			}
		}
		drop(v)
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			f.Fatal(err)
		}
		defs[i] = bytes.TrimSpace(buf.Bytes())
	}
	return defs
}

// capMinimize bounds how long the fuzzer minimizes a new interesting (or
// failing) input to d, unless -fuzzminimizetime is given. Its default, 60s,
// is longer than a short -fuzztime: with inputs of kilobytes that cost
// milliseconds each, minimizing the first interesting one would take the
// whole run (the fuzzer reports 0 execs/s meanwhile).
func capMinimize(d time.Duration) {
	set := false
	flag.Visit(func(fl *flag.Flag) { set = set || fl.Name == "test.fuzzminimizetime" })
	if !set {
		_ = flag.Set("test.fuzzminimizetime", d.String())
	}
}

// script is what the trivial handlers of one fuzz input do, read from the
// execution input: replies[fn] are function fn's answers in order (then it
// echoes its payload), answers are the answers to task tokens in order
// (then {}). An answer or reply {"error": name} fails with that error
// name, {"panic": …} panics; anything else is the output. A function's
// last reply with "repeat": true is its answer from then on.
type script struct {
	mu      sync.Mutex
	replies map[string][]json.RawMessage
	answers []json.RawMessage
}

func newScript(input []byte) *script {
	var in struct {
		Replies map[string][]json.RawMessage `json:"replies"`
		Answers []json.RawMessage            `json:"answers"`
	}
	_ = json.Unmarshal(input, &in)
	return &script{replies: in.Replies, answers: in.Answers}
}

func (s *script) next(fn string) (json.RawMessage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fn == "" {
		if len(s.answers) == 0 {
			return nil, false
		}
		r := s.answers[0]
		s.answers = s.answers[1:]
		return r, true
	}
	rs := s.replies[fn]
	if len(rs) == 0 {
		return nil, false
	}
	var last struct {
		Repeat bool `json:"repeat"`
	}
	if len(rs) > 1 || json.Unmarshal(rs[0], &last) != nil || !last.Repeat {
		s.replies[fn] = rs[1:]
	}
	return rs[0], true
}

// scripted reads one reply: its error name, whether it panics, its output.
func scripted(r json.RawMessage) (errName string, panics bool, out json.RawMessage) {
	var m map[string]json.RawMessage
	if json.Unmarshal(r, &m) == nil && m != nil {
		if e, ok := m["error"]; ok {
			var name string
			if json.Unmarshal(e, &name) != nil || name == "" {
				name = "ScriptedError"
			}
			return name, false, nil
		}
		if _, ok := m["panic"]; ok {
			return "", true, nil
		}
	}
	return "", false, r
}

// fuzzRun runs definition def with input on a fresh engine on a fake
// clock with trivial handlers (each answers as script says), driving time
// and task tokens when the execution is idle: open tokens are answered
// (before the clock moves when answerFirst), pending timers fire. It
// returns the ended execution and its history, or fails t when the
// execution has not ended within fuzzBound.
func fuzzRun(t *testing.T, def, input []byte, answerFirst bool) (Execution, []HistoryEvent, bool) {
	clock := NewFakeClock(epoch0)
	e := New(Options{Clock: clock})
	defer func() {
		closed := make(chan struct{})
		go func() { e.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(fuzzBound()):
			t.Fatalf("the engine did not close within %s", fuzzBound())
		}
	}()
	sc := newScript(input)
	var running atomic.Int32
	for _, fn := range fuzzFunctions {
		e.RegisterFunction(fn, func(_ context.Context, p json.RawMessage) (json.RawMessage, error) {
			running.Add(1)
			defer running.Add(-1)
			r, ok := sc.next(fn)
			if !ok {
				return p, nil
			}
			name, panics, out := scripted(r)
			switch {
			case panics:
				panic("scripted panic")
			case name != "":
				return nil, messages.InvokeResponse_Error{Type: name, Message: "scripted failure"}
			}
			return out, nil
		})
	}

	start := time.Now()
	arn, err := e.CreateStateMachine("fz", def)
	if d := time.Since(start); d > fuzzBound() {
		t.Fatalf("CreateStateMachine took %s", d)
	}
	if err != nil {
		if !errors.Is(err, ErrInvalidDefinition) || !strings.Contains(err.Error(), ": ") {
			t.Fatalf("CreateStateMachine() = %v, want ErrInvalidDefinition with a message", err)
		}
		return Execution{}, nil, false
	}
	var tree any
	_ = json.Unmarshal(def, &tree)
	for _, src := range templateExprs(tree) {
		if unboundedJSONata(src) {
			return Execution{}, nil, false
		}
	}
	arn, _, err = e.StartExecution(t.Context(), arn, "x", input)
	if err != nil {
		var in any
		if json.Unmarshal(input, &in) == nil && len(strings.TrimSpace(string(input))) > 0 || !errors.Is(err, ErrInvalidExecutionInput) {
			t.Fatalf("StartExecution(%q) = %v", input, err)
		}
		return Execution{}, nil, false
	}
	x, err := e.lookup(t.Context(), arn)
	if err != nil {
		t.Fatal(err)
	}
	events := func() int {
		x.mu.Lock()
		defer x.mu.Unlock()
		return len(x.history)
	}
	deadline := time.Now().Add(fuzzBound())
	for {
		select {
		case <-x.done:
			x.mu.Lock()
			h := append([]HistoryEvent(nil), x.history...)
			x.mu.Unlock()
			return x.describe(), h, true
		default:
		}
		if time.Now().After(deadline) {
			x.mu.Lock()
			n, last := len(x.history), x.history[max(0, len(x.history)-6):]
			x.mu.Unlock()
			var types []string
			for _, ev := range last {
				types = append(types, ev.Type)
			}
			t.Fatalf("the execution has not ended after %s (%d events, the last %v)", fuzzBound(), n, types)
		}
		n := events()
		time.Sleep(20 * time.Microsecond)
		if events() != n || running.Load() > 0 {
			continue // progressing
		}
		x.mu.Lock()
		var tokens []string
		for tok, ot := range x.open {
			if !ot.answered {
				tokens = append(tokens, tok)
			}
		}
		x.mu.Unlock()
		switch {
		case len(tokens) > 0 && (answerFirst || clock.Timers() == 0):
			for _, tok := range tokens {
				r, ok := sc.next("")
				if !ok {
					r = json.RawMessage("{}")
				}
				if name, panics, out := scripted(r); name != "" || panics {
					_ = e.SendTaskFailure(t.Context(), tok, name, "scripted failure")
				} else {
					_ = e.SendTaskSuccess(t.Context(), tok, out)
				}
			}
		case clock.Timers() > 0:
			clock.Advance(100 * 365 * 24 * time.Hour)
		}
	}
}

// FuzzDefinition loads arbitrary definitions (seeded with
// statemachine/turn.asl.json and testdata/*.asl.json) and runs the ones
// that load on arbitrary inputs (issue 20). A definition is rejected with
// ErrInvalidDefinition and a message, or loads, in bounded time; a loaded
// one run on an engine with trivial in-process handlers (scripted by the
// input: "replies" per function, "answers" to task tokens) and a fake
// clock that moves whenever the execution is idle ends within fuzzBound:
// it succeeds with JSON output, fails with an error name (a Fail state may
// name none), or times out only under a TimeoutSeconds, and its history
// runs from ExecutionStarted to one end event with consecutive ids, at
// most MaxHistoryEvents of them (the quota ends a machine that loops
// forever, as on AWS; before, it ran until the process ran out of memory).
func FuzzDefinition(f *testing.F) {
	capMinimize(5 * time.Second)
	turnRun := `{"conversation_id":"c1","turn_id":"t1","await_timeout_seconds":3600,"max_concurrency":2,` +
		`"replies":{"LLMStep":[{"next":"tools"},{"next":"done"}],"ValidateBatch":[{"next":"await"},{"next":"invoke","calls":["k1","k2"]}],` +
		`"InvokeCall":[{"call_id":"k1"},{"error":"WorkflowContinuesError"},{"call_id":"k2"}],"AppendResults":[{"next":"llm"}]},` +
		`"answers":[{"answers":{"k1":{"material":"steel"}}}]}`
	inputs := []string{
		`{"conversation_id":"c1","turn_id":"t1","await_timeout_seconds":3600,"max_concurrency":2}`,
		turnRun,
		`{"conversation_id":"c1","turn_id":"t1","await_timeout_seconds":60,"max_concurrency":0,"replies":{"LLMStep":[{"next":"tools"},{"error":"TransientError"},{"panic":1}],"ValidateBatch":[{"next":"await"}]}}`,
		`{"conversation_id":"c1","turn_id":"t1","await_timeout_seconds":60,"max_concurrency":1,"replies":{"LLMStep":[{"next":"failed"}]}}`,
		`{"replies":{"LLMStep":[{"error":"ModelUnavailableError"},{"error":"ModelUnavailableError"},{"error":"ModelUnavailableError"},{"error":"ModelUnavailableError"}]}}`,
		`{"conversation_id":"c1","turn_id":"t1","next":"validate","calls":[{"call_id":"k1"},{"call_id":"k2"}],"items":[{"v":1},{"v":2,"fail":true}],"fn":"Echo","max":2,"timeout":60,"heartbeat":0}`,
		`[]`,
		`not json`,
	}
	defs := seedDefinitions(f)
	for i, d := range defs {
		for j, in := range inputs {
			if i == 0 || j >= 4 {
				f.Add(d, []byte(in), uint8(i+j))
			}
		}
	}
	f.Add([]byte(`{"QueryLanguage":"JSONata","StartAt":"A","States":{"A":{"Type":"Pass","Next":"A"}}}`), []byte(`{}`), uint8(0))
	f.Add([]byte(`{"QueryLanguage":"JSONata","StartAt":"A","TimeoutSeconds":5,"States":{"A":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke.waitForTaskToken","Arguments":{"FunctionName":"Await"},"HeartbeatSeconds":2,"End":true}}}`), []byte(`{}`), uint8(0))
	f.Add([]byte(`{"QueryLanguage":"JSONata","StartAt":"A","States":{"A":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","Arguments":{"FunctionName":"Flaky"},"Retry":[{"ErrorEquals":["States.ALL"],"MaxAttempts":99999999,"IntervalSeconds":1}],"End":true}}}`), []byte(`{"replies":{"Flaky":[{"error":"E"},{"error":"E"}]}}`), uint8(0))
	f.Add([]byte(`{"QueryLanguage":"JSONata","StartAt":"A","States":{"A":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","Arguments":{"FunctionName":"Flaky"},"Retry":[{"ErrorEquals":["States.ALL"],"MaxAttempts":99999999,"IntervalSeconds":1}],"End":true}}}`), []byte(`{"replies":{"Flaky":[{"error":"E","repeat":true}]}}`), uint8(0))
	f.Add([]byte(`{"QueryLanguage":"JSONata","StartAt":"A","States":{"A":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","Arguments":{"FunctionName":"Work"},"Catch":[{"ErrorEquals":["States.ALL"],"Next":"A"}],"End":true}}}`), []byte(`{"replies":{"Work":[{"error":"E","repeat":true}]}}`), uint8(0))
	f.Add([]byte(`{"QueryLanguage":"JSONata","StartAt":"M","States":{"M":{"Type":"Map","Items":"{% $states.input.items %}","MaxConcurrency":2,"ItemProcessor":{"StartAt":"L","States":{"L":{"Type":"Pass","Next":"L"}}},"End":true}}}`), []byte(`{"items":[1,2,3]}`), uint8(0))
	// The JSONata parser panicked on "!é" (FuzzJSONata found it).
	f.Add([]byte(`{"QueryLanguage":"JSONata","StartAt":"P","States":{"P":{"Type":"Pass","Output":"{% !é %}","End":true}}}`), []byte(`{}`), uint8(0))
	f.Add([]byte(`{"QueryLanguage":"JSONata","StartAt":"F","States":{"F":{"Type":"Fail","Error":"{% $states.input.e %}","Cause":"{% $string($states.input) %}"}}}`), []byte(`{"e":"Boom"}`), uint8(0))

	f.Fuzz(func(t *testing.T, def, input []byte, mode uint8) {
		x, h, ran := fuzzRun(t, def, input, mode&1 == 1)
		if !ran {
			return
		}
		if testing.Verbose() {
			t.Logf("%s %s %q after %d events", x.Status, x.Error, x.Cause, len(h))
		}
		if len(h) < 2 || h[0].Type != "ExecutionStarted" {
			t.Fatalf("history %v does not start with ExecutionStarted", typesOf(h))
		}
		for i, ev := range h {
			if ev.ID != int64(i+1) {
				t.Fatalf("event %d has id %d (history %v)", i, ev.ID, typesOf(h))
			}
		}
		if len(h) > MaxHistoryEvents || x.Error == ErrNameHistoryFull && strings.Contains(x.Cause, "history events") && len(h) != MaxHistoryEvents {
			t.Fatalf("%d events (%s %s), want at most %d, exactly that many when the quota ended it", len(h), x.Error, x.Cause, MaxHistoryEvents)
		}
		end := h[len(h)-1].Type
		switch x.Status {
		case StatusSucceeded:
			if end != "ExecutionSucceeded" || !json.Valid(x.Output) {
				t.Errorf("succeeded with output %q, last event %s", x.Output, end)
			}
		case StatusFailed:
			if end != "ExecutionFailed" {
				t.Errorf("failed, last event %s", end)
			}
			if x.Error == "" && !hasEvent(h, "FailStateEntered") {
				t.Errorf("failed without an error name (cause %q) and no Fail state ran", x.Cause)
			}
		case StatusTimedOut:
			var top map[string]any
			_ = json.Unmarshal(def, &top)
			if end != "ExecutionTimedOut" || top["TimeoutSeconds"] == nil {
				t.Errorf("timed out without TimeoutSeconds, last event %s", end)
			}
		default:
			t.Errorf("ended %s, want SUCCEEDED, FAILED or TIMED_OUT", x.Status)
		}
	})
}

func typesOf(h []HistoryEvent) []string {
	out := make([]string, len(h))
	for i, ev := range h {
		out[i] = ev.Type
	}
	return out
}

func hasEvent(h []HistoryEvent, typ string) bool {
	for _, ev := range h {
		if ev.Type == typ {
			return true
		}
	}
	return false
}

// FuzzJSONata evaluates arbitrary JSONata expressions as a definition's
// "{% %}" fields are (compileExpr, then eval with $states and the workflow
// variables bound) on arbitrary input (issue 20): compiling gives an error
// or an expression, never a panic, and evaluating gives an error or a
// plain JSON value within fuzzBound (expressions the library cannot bound,
// unboundedJSONata, are only compiled). Evaluating the same compiled
// expression again (a pooled copy, rebound) gives the same answer, unless
// it reads the clock or random numbers; the same up to the order of
// arrays, since objects are Go maps here: $keys, $each, $spread, $sift
// and "*" list keys or values in a random order (jsonata-js keeps the
// input's order; none of our definitions depends on it).
func FuzzJSONata(f *testing.F) {
	var samples []struct {
		States    map[string]any `json:"states"`
		Variables map[string]any `json:"variables"`
	}
	b, err := os.ReadFile(filepath.Join("testdata", "jsonata-samples.json"))
	if err != nil {
		f.Fatal(err)
	}
	if err := json.Unmarshal(b, &samples); err != nil {
		f.Fatal(err)
	}
	var exprs []string
	for _, d := range seedDefinitions(f) {
		var v any
		_ = json.Unmarshal(d, &v)
		exprs = append(exprs, templateExprs(v)...)
	}
	exprs = append(exprs, `$count($states.input.calls)`, `$map($states.input.items.v, $string)`,
		`$states.input.items[fail = true].v`, `$sum([1..100])`, `$uppercase($who) & " " & $string($max)`,
		`$states.input ~> $keys()`, `{"a": $states.input.nothing, "b": [$states.input.calls.call_id]}`)
	for i, e := range exprs {
		s := samples[i%len(samples)]
		in, _ := json.Marshal(map[string]any{"states": s.States, "variables": s.Variables})
		f.Add(e, in)
	}
	f.Fuzz(func(t *testing.T, src string, input []byte) {
		var in struct {
			States    map[string]any `json:"states"`
			Variables map[string]any `json:"variables"`
		}
		if json.Unmarshal(input, &in) != nil {
			in.States = map[string]any{"input": string(input)}
		}
		type answer struct {
			v   any
			err error
		}
		run := func(what string, f func() answer) answer {
			c := make(chan answer, 1)
			go func() { c <- f() }()
			select {
			case a := <-c:
				return a
			case <-time.After(fuzzBound()):
				t.Fatalf("%s %q did not end within %s", what, src, fuzzBound())
				return answer{}
			}
		}
		var x *expr
		if a := run("compiling", func() answer {
			var err error
			x, err = compileExpr(src)
			return answer{err: err}
		}); a.err != nil || unboundedJSONata(src) {
			return
		}
		eval := func() answer {
			return run("evaluating", func() answer {
				v, err := x.eval(in.States, in.Variables)
				return answer{v, err}
			})
		}
		first := eval()
		if first.err == nil {
			if _, err := json.Marshal(first.v); err != nil {
				t.Fatalf("eval(%q) = %#v, which is not JSON: %v", src, first.v, err)
			}
			if !plainJSON(first.v) {
				t.Fatalf("eval(%q) = %#v, not plain decoded JSON", src, first.v)
			}
		}
		for _, clock := range []string{"$now", "$millis", "$random", "$uuid"} {
			if strings.Contains(src, clock) {
				return
			}
		}
		second := eval()
		if (first.err == nil) != (second.err == nil) || first.err == nil && !reflect.DeepEqual(unordered(first.v), unordered(second.v)) {
			t.Fatalf("eval(%q) = %#v, %v; again = %#v, %v", src, first.v, first.err, second.v, second.err)
		}
	})
}

// unboundedJSONata reports whether src uses what blues/jsonata-go
// evaluates without any bound, which the engine cannot bound either (the
// library takes no context and has no limits): a function definition
// (unbounded recursion overflows the Go stack, a fatal error that no
// recover catches), the range operator (10^7 items per range, and ranges
// multiply) and $pad (a string of any width). None of our definitions uses
// them; the fuzz targets compile such expressions but do not run them,
// rather than find these known limits again and again.
func unboundedJSONata(src string) bool {
	for _, s := range []string{"function", "λ", "..", "$pad"} {
		if strings.Contains(src, s) {
			return true
		}
	}
	return false
}

// unordered is v with every array sorted by its elements' JSON.
func unordered(v any) any {
	switch x := v.(type) {
	case []any:
		out := make([]any, len(x))
		keys := make([]string, len(x))
		for i, e := range x {
			out[i] = unordered(e)
			b, _ := json.Marshal(out[i])
			keys[i] = string(b)
		}
		sort.Sort(byKey{keys, out})
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = unordered(e)
		}
		return out
	}
	return v
}

type byKey struct {
	keys []string
	vals []any
}

func (b byKey) Len() int           { return len(b.keys) }
func (b byKey) Less(i, j int) bool { return b.keys[i] < b.keys[j] }
func (b byKey) Swap(i, j int) {
	b.keys[i], b.keys[j] = b.keys[j], b.keys[i]
	b.vals[i], b.vals[j] = b.vals[j], b.vals[i]
}

// plainJSON reports whether v is made of what encoding/json decodes into
// an any: nil, bool, float64, string, []any and map[string]any.
func plainJSON(v any) bool {
	switch x := v.(type) {
	case nil, bool, float64, string:
		return true
	case []any:
		for _, e := range x {
			if !plainJSON(e) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range x {
			if !plainJSON(e) {
				return false
			}
		}
		return true
	}
	return false
}
