package main

import (
	"encoding/json"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The state machines' own files (statemachine/turn.asl.json and its loop,
// loop.asl.json), read as what Step Functions runs: these tests need no
// synthesis.

// lambdaErrors are the errors of Lambda's own service that AWS recommends
// retrying on every Task that invokes a function: the function never ran,
// or its answer was lost on the way.
var lambdaErrors = []string{
	"Lambda.ServiceException",
	"Lambda.AWSLambdaException",
	"Lambda.SdkClientException",
	"Lambda.ClientExecutionTimeoutException",
	"Lambda.TooManyRequestsException",
}

// aslStates returns every state of a definition by name, those of Map
// item processors and Parallel branches included.
func aslStates(def map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	var walk func(states map[string]any)
	walk = func(states map[string]any) {
		for name, st := range states {
			sm := asMap(st)
			out[name] = sm
			for _, key := range []string{"ItemProcessor", "Iterator"} {
				walk(asMap(asMap(sm[key])["States"]))
			}
			for _, b := range asList(sm["Branches"]) {
				walk(asMap(asMap(b)["States"]))
			}
		}
	}
	walk(asMap(def["States"]))
	return out
}

// missingLambdaRetries returns "<state>: <error>" for each Task state whose
// Retry does not name one of lambdaErrors (States.ALL does not count: it is
// a retrier for the handler's own errors, with its own budget).
func missingLambdaRetries(def map[string]any) []string {
	var out []string
	for name, st := range aslStates(def) {
		if st["Type"] != "Task" || !isLambdaTask(st) {
			continue
		}
		var named []string
		for _, r := range asList(st["Retry"]) {
			for _, e := range asList(asMap(r)["ErrorEquals"]) {
				if s, ok := e.(string); ok {
					named = append(named, s)
				}
			}
		}
		for _, e := range lambdaErrors {
			if !slices.Contains(named, e) {
				out = append(out, name+": "+e)
			}
		}
	}
	sort.Strings(out)
	return out
}

// isLambdaTask reports whether a Task state invokes a Lambda function, as
// every Task but one starting an execution does (the turn's RunLoop starts
// the loop's).
func isLambdaTask(st map[string]any) bool {
	r, _ := st["Resource"].(string)
	return !strings.HasPrefix(r, "arn:aws:states:::states:")
}

func readASL(t *testing.T) map[string]any {
	t.Helper()
	return readASLFile(t, aslPath)
}

func readLoopASL(t *testing.T) map[string]any {
	t.Helper()
	return readASLFile(t, loopPath)
}

func readASLFile(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var def map[string]any
	if err := json.Unmarshal(b, &def); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return def
}

// Issue 14: every Task retries Lambda's own errors, as AWS recommends.
func TestEveryTaskRetriesLambdaErrors(t *testing.T) {
	t.Parallel()
	var tasks []string
	for _, def := range []map[string]any{readASL(t), readLoopASL(t)} {
		for name, st := range aslStates(def) {
			if st["Type"] == "Task" {
				tasks = append(tasks, name)
			}
		}
		if got := missingLambdaRetries(def); len(got) > 0 {
			t.Errorf("Task states that do not retry Lambda's errors: %v", got)
		}
	}
	sort.Strings(tasks)
	// The walk reaches every Task of both machines, the Map's too.
	if diff := cmp.Diff([]string{"AppendResults", "AwaitUser", "CallFailed", "FailTurn", "InvokeCall", "LLMStep", "RunLoop", "ValidateBatch"}, tasks); diff != "" {
		t.Errorf("Task states (-want +got):\n%s", diff)
	}

	// The check sees a missing name, in a Map too, and does not take
	// States.ALL for the names.
	var bad map[string]any
	if err := json.Unmarshal([]byte(`{"States":{
		"A":{"Type":"Task","Retry":[{"ErrorEquals":["States.ALL"]}]},
		"M":{"Type":"Map","ItemProcessor":{"States":{"B":{"Type":"Task","Retry":[
			{"ErrorEquals":["Lambda.ServiceException","Lambda.AWSLambdaException","Lambda.SdkClientException"]},
			{"ErrorEquals":["Lambda.ClientExecutionTimeoutException"]}]}}}},
		"P":{"Type":"Pass"}}}`), &bad); err != nil {
		t.Fatal(err)
	}
	want := []string{"B: Lambda.TooManyRequestsException"}
	for _, e := range lambdaErrors {
		want = append(want, "A: "+e)
	}
	sort.Strings(want)
	if diff := cmp.Diff(want, missingLambdaRetries(bad)); diff != "" {
		t.Errorf("missingLambdaRetries() (-want +got):\n%s", diff)
	}
}

// Issue 14: a turn that a limit ended (LLMStep's "failed": the call limit,
// the budget, no progress, an empty answer) is a normal outcome: its
// execution succeeds, so only faults fail executions and fire the alarm on
// ExecutionsFailed. A fault still ends in a Fail state, through FailTurn.
// Issue 30: the loop (EXPRESS) never fails on a step's error: it returns
// "failed" or "fault" to the turn, whose states decide as before.
func TestOnlyFaultsFailTheExecution(t *testing.T) {
	t.Parallel()
	states, loop := aslStates(readASL(t)), aslStates(readLoopASL(t))
	typeAfter := func(in map[string]map[string]any, from, next string) string {
		if st, ok := in[next]; ok {
			return from + " → " + next + " (" + st["Type"].(string) + ")"
		}
		return from + " → " + next + " (missing)"
	}
	var got []string
	for _, c := range asList(loop["AfterLLMStep"]["Choices"]) {
		cm := asMap(c)
		if cm["Condition"] == `{% $states.input.next = "failed" %}` {
			got = append(got, typeAfter(loop, "loop: failed", cm["Next"].(string)))
		}
	}
	for _, c := range asList(states["AfterLoop"]["Choices"]) {
		cm := asMap(c)
		for _, word := range []string{"failed", "fault"} {
			if cm["Condition"] == `{% $states.input.next = "`+word+`" %}` {
				got = append(got, typeAfter(states, word, cm["Next"].(string)))
			}
		}
	}
	failTurn := states["FailTurn"]
	got = append(got, typeAfter(states, "FailTurn", failTurn["Next"].(string)))
	for _, c := range asList(failTurn["Catch"]) {
		got = append(got, typeAfter(states, "FailTurn catch", asMap(c)["Next"].(string)))
	}
	want := []string{"loop: failed → EndedWithMessage (Succeed)", "failed → TurnEndedWithMessage (Succeed)", "fault → FailTurn (Task)",
		"FailTurn → TurnFailed (Fail)", "FailTurn catch → TurnFailed (Fail)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("how turns end (-want +got):\n%s", diff)
	}
	if got := loop["EndedWithMessage"]["Output"]; got != `{% {"next": "failed"} %}` {
		t.Errorf("the loop's EndedWithMessage outputs %v, want next failed", got)
	}
	// Nothing else reaches a Fail state: every other error goes through FailTurn.
	for name, st := range states {
		for _, next := range append([]any{st["Next"], st["Default"]}, nextsOf(st)...) {
			n, _ := next.(string)
			if target, ok := states[n]; ok && target["Type"] == "Fail" && name != "FailTurn" {
				t.Errorf("%s → %s: a Fail state reached without FailTurn", name, n)
			}
		}
	}
	// The loop has no Fail state, and every Catch of it returns a fault.
	for name, st := range loop {
		if st["Type"] == "Fail" {
			t.Errorf("loop state %s is a Fail state: a fault must reach the turn's FailTurn", name)
		}
		if st["Catch"] == nil {
			continue
		}
		for _, c := range asList(st["Catch"]) {
			if n := asMap(c)["Next"]; n != "Fault" && !(name == "InvokeCall" || name == "CallFailed") {
				t.Errorf("loop state %s catches to %v, want Fault", name, n)
			}
		}
	}
}

// nextsOf returns the Next of each Choice and Catch of a state.
func nextsOf(st map[string]any) []any {
	var out []any
	for _, key := range []string{"Choices", "Catch"} {
		for _, c := range asList(st[key]) {
			out = append(out, asMap(c)["Next"])
		}
	}
	return out
}

// retryBudget is the longest a retrier keeps retrying: the sum of its
// waits, each its interval times BackoffRate^n capped at MaxDelaySeconds
// (with FULL jitter a wait is drawn below that, so the expected sum is
// half of it).
func retryBudget(r map[string]any) time.Duration {
	interval, _ := r["IntervalSeconds"].(float64)
	if interval == 0 {
		interval = 1
	}
	rate, _ := r["BackoffRate"].(float64)
	if rate == 0 {
		rate = 2
	}
	maxDelay, _ := r["MaxDelaySeconds"].(float64)
	attempts, _ := r["MaxAttempts"].(float64)
	var sum float64
	for i := 0; i < int(attempts); i++ {
		w := interval * math.Pow(rate, float64(i))
		if maxDelay > 0 {
			w = math.Min(w, maxDelay)
		}
		sum += w
	}
	if r["JitterStrategy"] == "FULL" {
		sum /= 2
	}
	return time.Duration(sum * float64(time.Second))
}

// Every Task rides out a 2-minute store outage (TransientError) and 2
// minutes of the account's Lambda throttling (TooManyRequestsException,
// with its own retrier: the other service errors need not wait that long),
// and the execution as a whole has a timeout beyond any turn's waits.
func TestTaskRetryBudgets(t *testing.T) {
	t.Parallel()
	def := readASL(t)
	states := aslStates(def)
	maps.Copy(states, aslStates(readLoopASL(t)))
	for name, st := range states {
		if st["Type"] != "Task" || name == "FailTurn" || !isLambdaTask(st) {
			continue // FailTurn records the failure of a turn that already failed; RunLoop invokes no function
		}
		budgets := map[string]time.Duration{}
		for _, r := range asList(st["Retry"]) {
			for _, e := range asList(asMap(r)["ErrorEquals"]) {
				if s, ok := e.(string); ok {
					budgets[s] = retryBudget(asMap(r))
				}
			}
		}
		for _, e := range []string{"TransientError", "Lambda.TooManyRequestsException"} {
			if budgets[e] < 2*time.Minute {
				t.Errorf("%s retries %s for %v, want at least 2m", name, e, budgets[e])
			}
		}
	}
	// pkg/turn's default wait for the user is 24 h per pause.
	const awaitDefault = 24 * time.Hour
	timeout, _ := def["TimeoutSeconds"].(float64)
	if time.Duration(timeout)*time.Second != ExecutionTimeout {
		t.Errorf("execution TimeoutSeconds = %v, want ExecutionTimeout %v (which awaitTimeout must stay below)", timeout, ExecutionTimeout)
	}
	if time.Duration(timeout)*time.Second < 2*awaitDefault {
		t.Errorf("execution TimeoutSeconds = %v, want at least two of the default waits for the user (%v)", timeout, awaitDefault)
	}
}

// Issue 30: an EXPRESS execution runs at most five minutes; the loop hands
// the turn back before that (its budget, checked at each round) and never
// waits for a token.
func TestLoopFitsExpress(t *testing.T) {
	t.Parallel()
	loop := readLoopASL(t)
	if got, _ := loop["TimeoutSeconds"].(float64); got != 300 {
		t.Errorf("loop TimeoutSeconds = %v, want 300 (EXPRESS's limit)", got)
	}
	for name, st := range aslStates(loop) {
		if r, _ := st["Resource"].(string); strings.Contains(r, "waitForTaskToken") || strings.Contains(r, ".sync") {
			t.Errorf("loop state %s uses %s, which an EXPRESS machine cannot", name, r)
		}
	}
	init := aslStates(loop)["Init"]
	budget, _ := asMap(init["Assign"])["budgetMs"].(string)
	if !strings.Contains(budget, "150000") {
		t.Errorf("loop budget = %q, want 150 s by default: a round then has half the 5 minutes", budget)
	}
}
