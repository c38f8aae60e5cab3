package sfnlocal

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A compiled expression is evaluated many times, concurrently, each time
// with its own bindings: no evaluation sees another's variables, a
// variable bound before and absent now reads as undefined (or as the
// built-in function of its name), and "~>", which the library rewrites
// while evaluating, gives the same result every time.
func TestCompiledExpressions(t *testing.T) {
	t.Parallel()
	compile := func(src string) *expr {
		t.Helper()
		x, err := compileExpr(src)
		if err != nil {
			t.Fatalf("compileExpr(%q) = %v", src, err)
		}
		return x
	}
	sum := compile(`{"cid": $cid, "n": $states.input.n + 1, "up": $uppercase($states.input.s)}`)
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for i := range 400 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			states := map[string]any{"input": map[string]any{"n": float64(i), "s": fmt.Sprint("s", i)}}
			v, err := sum.eval(states, map[string]any{"cid": fmt.Sprint("c", i)})
			want := map[string]any{"cid": fmt.Sprint("c", i), "n": float64(i + 1), "up": fmt.Sprint("S", i)}
			if err != nil || !cmp.Equal(any(want), v) {
				errs <- fmt.Errorf("eval %d = %v, %v, want %v", i, v, err, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// $count is a built-in function until a variable of that name is bound.
	count := compile(`$count($states.input.items)`)
	items := map[string]any{"input": map[string]any{"items": []any{1.0, 2.0}}}
	if v, err := count.eval(items, map[string]any{"count": float64(5)}); err == nil {
		t.Errorf("with the variable $count = 5: %v, want an error (5 is not a function)", v)
	}
	if v, err := count.eval(items, map[string]any{}); err != nil || v != float64(2) {
		t.Errorf("without the variable: %v, %v, want 2 from the built-in, not the stale 5", v, err)
	}
	cid := compile(`$cid`)
	if _, err := cid.eval(nil, map[string]any{"cid": "c1"}); err != nil {
		t.Fatal(err)
	}
	if v, err := cid.eval(nil, map[string]any{}); !errors.Is(err, errUndefined) {
		t.Errorf("$cid unbound after a bound evaluation = %v, %v, want undefined", v, err)
	}

	// Only the fields of $states an expression reads are converted for it;
	// $states alone is all of them.
	three := map[string]any{"input": map[string]any{"a": 1.0}, "context": map[string]any{}, "result": "r"}
	if v, err := compile(`$count($keys($states)) & $states.input.a`).eval(three, nil); err != nil || v != "31" {
		t.Errorf("$count($keys($states)) & $states.input.a = %v, %v, want \"31\"", v, err)
	}

	chain := compile(`$states.input.s ~> $uppercase()`)
	for range 3 {
		v, err := chain.eval(map[string]any{"input": map[string]any{"s": "ab"}}, nil)
		if err != nil || v != "AB" {
			t.Fatalf(`"ab" ~> $uppercase() = %v, %v, want "AB" every time`, v, err)
		}
	}
}

// BenchmarkEvalTemplate evaluates ValidateBatch's Arguments and a Choice
// condition of statemachine/turn.asl.json, compiled once, from goroutines
// at once (docs/benchmarks.md).
func BenchmarkEvalTemplate(b *testing.B) {
	p := &parser{names: map[string]bool{}, exprs: map[string]*expr{}}
	args, err := p.compile("ValidateBatch", map[string]any{
		"FunctionName": "clientagent-validate",
		"Payload": map[string]any{"conversation_id": "{% $cid %}", "turn_id": "{% $tid %}",
			"reply": "{% $exists($states.input.reply) ? $states.input.reply : null %}"},
	})
	if err != nil {
		b.Fatal(err)
	}
	cond, err := p.compile("AfterLLMStep", `{% $states.input.next = "tools" %}`)
	if err != nil {
		b.Fatal(err)
	}
	b.RunParallel(func(pb *testing.PB) {
		states := map[string]any{"input": map[string]any{"next": "tools", "calls": []any{"call_1"}},
			"context": map[string]any{"Execution": map[string]any{"Id": "arn", "Name": "t"}, "State": map[string]any{"Name": "LLMStep", "RetryCount": 0.0}}}
		vars := map[string]any{"cid": "c_1", "tid": "t_1", "awaitTimeout": 86400.0, "maxConcurrency": 8.0}
		for pb.Next() {
			if _, err := evalTemplate(args, states, vars); err != nil {
				b.Fatal(err)
			}
			if _, err := evalTemplate(cond, states, vars); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A plain path, a path compared with a string and $exists(p) ? p : literal
// are read directly from the values; each gives what the library gives,
// including where the library has to answer itself: an array on the way,
// a missing field, JSON null, a value of another type, a name that is not
// a bound variable.
func TestPlainPathsReadDirectly(t *testing.T) {
	t.Parallel()
	states := map[string]any{
		"input": map[string]any{
			"next": "tools", "n": 3.0, "none": nil, "obj": map[string]any{"a": "x"},
			"list": []any{map[string]any{"next": "tools"}, map[string]any{"next": "done"}},
			"one":  []any{map[string]any{"next": "tools"}},
		},
		"context": map[string]any{"Map": map[string]any{"Item": map[string]any{"Value": "v"}}},
	}
	vars := map[string]any{"cid": "c_1", "n": 2.0}
	for _, src := range []string{
		`$states.input.next`, `$states.input.obj`, `$states.input.obj.a`, `$states.input.none`, `$states.input.missing`,
		`$states.input.list.next`, `$states.input.one.next`, `$states.context.Map.Item.Value`, `$cid`, `$unbound`, `$states`,
		`$states.input.next = "tools"`, `$states.input.next = "done"`, `$states.input.n = "3"`, `$states.input.none = "x"`,
		`$states.input.missing = "tools"`, `$states.input.one.next = "tools"`, `$states.input.list.next = "done"`, `$cid = "c_1"`,
		`$exists($states.input.next) ? $states.input.next : ""`, `$exists($states.input.missing) ? $states.input.missing : null`,
		`$exists($states.input.none) ? $states.input.none : 7`, `$exists($states.input.one.next) ? $states.input.one.next : "no"`,
		`$exists($n) ? $n : 1`, `$exists($unbound) ? $unbound : "u"`,
	} {
		fast, err := compileExpr(src)
		if err != nil {
			t.Fatalf("compileExpr(%q) = %v", src, err)
		}
		if !fast.path && fast.eqPath == "" && fast.orPath == "" {
			t.Errorf("%s: not read directly", src)
		}
		slow, _ := compileExpr(src)
		slow.path, slow.eqPath, slow.orPath = false, "", ""
		got, gerr := fast.eval(states, vars)
		want, werr := slow.eval(states, vars)
		if (gerr == nil) != (werr == nil) || errors.Is(gerr, errUndefined) != errors.Is(werr, errUndefined) || !cmp.Equal(got, want) {
			t.Errorf("%s = %#v, %v; the library gives %#v, %v", src, got, gerr, want, werr)
		}
	}
}

// The loop's time-budget check, $toMillis(p) - $toMillis(q) compared with a
// number, is read directly over two timestamps and a number, and gives what
// the library gives, which answers everything else.
func TestBudgetCheckReadsDirectly(t *testing.T) {
	t.Parallel()
	def, err := os.ReadFile("../../statemachine/loop.asl.json")
	if err != nil {
		t.Fatal(err)
	}
	budget := `$toMillis($states.context.State.EnteredTime) - $toMillis($states.context.Execution.StartTime) >= $budgetMs`
	if !strings.Contains(string(def), budget) {
		t.Fatalf("the loop no longer checks its budget with %s: update this test", budget)
	}
	ctx := func(entered, started any) map[string]any {
		return map[string]any{"context": map[string]any{
			"State":     map[string]any{"Name": "AfterAppend", "EnteredTime": entered},
			"Execution": map[string]any{"StartTime": started},
		}}
	}
	for _, src := range []string{budget,
		strings.Replace(budget, ">=", "<", 1), strings.Replace(budget, ">=", ">", 1), strings.Replace(budget, ">=", "<=", 1),
	} {
		fast, err := compileExpr(src)
		if err != nil {
			t.Fatal(err)
		}
		if fast.since == nil {
			t.Fatalf("%s: not read directly", src)
		}
		slow, _ := compileExpr(src)
		slow.since = nil
		for _, tc := range []struct {
			states map[string]any
			vars   map[string]any
		}{
			{ctx("2026-12-04T01:26:18.120Z", "2026-12-04T01:26:16.337Z"), map[string]any{"budgetMs": 150000.0}},
			{ctx("2026-12-04T01:28:46.337Z", "2026-12-04T01:26:16.337Z"), map[string]any{"budgetMs": 150000.0}},
			{ctx("2026-12-04T01:28:46.338Z", "2026-12-04T01:26:16.337Z"), map[string]any{"budgetMs": 150000.0}},
			{ctx("2026-12-04T03:28:46.5+02:00", "2026-12-04T01:26:16Z"), map[string]any{"budgetMs": 150000.0}},
			{ctx("2026-12-04T01:26:16.337Z", "2026-12-04T01:26:18.120Z"), map[string]any{"budgetMs": -2000.0}},
			{ctx("2026-12-04T01:26:18.120Z", "2026-12-04T01:26:16.337Z"), map[string]any{"budgetMs": "150000"}},
			{ctx("2026-12-04T01:26:18.120Z", "2026-12-04T01:26:16.337Z"), map[string]any{}},
			{ctx("2026-12-04T01:26:18.120Z", 5.0), map[string]any{"budgetMs": 1.0}},
			{ctx("2026-12-04", "2026-12-03"), map[string]any{"budgetMs": 1.0}},
			{map[string]any{"context": map[string]any{}}, map[string]any{"budgetMs": 1.0}},
		} {
			got, gerr := fast.eval(tc.states, tc.vars)
			want, werr := slow.eval(tc.states, tc.vars)
			if (gerr == nil) != (werr == nil) || errors.Is(gerr, errUndefined) != errors.Is(werr, errUndefined) || !cmp.Equal(got, want) {
				t.Errorf("%s over %v, %v = %#v, %v; the library gives %#v, %v", src, tc.states, tc.vars, got, gerr, want, werr)
			}
		}
	}
}

// BenchmarkEvalBudgetCheck is the loop's AfterAppend condition: whether the
// execution has spent its time budget, once per tool round.
func BenchmarkEvalBudgetCheck(b *testing.B) {
	p := &parser{names: map[string]bool{}, exprs: map[string]*expr{}}
	cond, err := p.compile("AfterAppend", `{% $toMillis($states.context.State.EnteredTime) - $toMillis($states.context.Execution.StartTime) >= $budgetMs %}`)
	if err != nil {
		b.Fatal(err)
	}
	states := map[string]any{"input": map[string]any{"next": "llm"},
		"context": map[string]any{
			"Execution": map[string]any{"Id": "arn:aws:states:us-east-1:123456789012:execution:clientagent-loop:t_1-1", "Name": "t_1-1", "StartTime": "2026-12-04T01:26:16.337Z",
				"Input": map[string]any{"conversation_id": "c_1", "turn_id": "t_1", "trace": "", "budget_seconds": 150.0}, "RoleArn": "arn:aws:iam::123456789012:role/x"},
			"State":        map[string]any{"Name": "AfterAppend", "EnteredTime": "2026-12-04T01:26:18.120Z", "RetryCount": 0.0},
			"StateMachine": map[string]any{"Id": "arn:aws:states:us-east-1:123456789012:stateMachine:clientagent-loop", "Name": "clientagent-loop"},
		}}
	vars := map[string]any{"cid": "c_1", "tid": "t_1", "budgetMs": 150000.0}
	b.ReportAllocs()
	for b.Loop() {
		v, err := evalTemplate(cond, states, vars)
		if err != nil || v != false {
			b.Fatalf("budget check = %v, %v; want false", v, err)
		}
	}
}
