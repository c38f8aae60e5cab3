package eval

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSummarize(t *testing.T) {
	t.Parallel()
	scenarios := []*Scenario{{Name: "a", Tags: []string{"x"}}, {Name: "b"}}
	fail := Failure{Turn: 1, Expectation: "status", Want: "succeeded", Got: "failed"}
	results := []Result{
		{Scenario: "a", Run: 1, Pass: true, LLMCalls: 2, Tokens: 100, CostUSD: 0.01, LatencyMS: 10},
		{Scenario: "a", Run: 2, Pass: false, Failures: []Failure{fail}, LLMCalls: 4, Tokens: 300, CostUSD: 0.03, LatencyMS: 30},
		{Scenario: "b", Run: 1, Pass: true, LLMCalls: 1, Tokens: 50, LatencyMS: 5},
		{Scenario: "b", Run: 2, Pass: true, LLMCalls: 1, Tokens: 50, LatencyMS: 5},
	}
	rep := Summarize(scenarios, results, 0.9)
	if rep.Runs != 4 || rep.Passed != 3 || rep.PassRate != 0.75 || rep.OK || rep.LLMCalls != 8 || rep.Tokens != 500 {
		t.Errorf("Summarize() = %d runs, %d passed, rate %v, ok %v, %d LLM calls, %d tokens; want 4, 3, 0.75, false, 8, 500",
			rep.Runs, rep.Passed, rep.PassRate, rep.OK, rep.LLMCalls, rep.Tokens)
	}
	a := rep.Scenarios[0]
	if a.PassRate != 0.5 || a.LLMCalls != 3 || a.Tokens != 200 || math.Abs(a.CostUSD-0.02) > 1e-12 {
		t.Errorf("scenario a = rate %v, %v LLM calls, %v tokens, $%v; want 0.5, 3, 200, 0.02", a.PassRate, a.LLMCalls, a.Tokens, a.CostUSD)
	}
	if diff := cmp.Diff(Spread{Mean: 20, Min: 10, Max: 30, StdDev: 10}, a.Latency); diff != "" {
		t.Errorf("scenario a latency (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]FailureCount{{Reason: fail.String(), Runs: 1}}, a.Failures); diff != "" {
		t.Errorf("scenario a failures (-want +got):\n%s", diff)
	}
	if !Summarize(scenarios, results, 0.75).OK {
		t.Error("Summarize(min 0.75).OK = false, want true at a pass rate of 0.75")
	}
	if Summarize(nil, nil, 0).OK {
		t.Error("Summarize(no runs).OK = true, want false: nothing ran")
	}

	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"SCENARIO  RESULT  PASS  LLM CALLS  TOKENS  COST USD  LATENCY ms (mean min–max ±sd)",
		"a         FLAKY   1/2   3          200     0.020000  20 10–30 ±10",
		"b         pass    2/2   1          50      0.000000  5 5–5 ±0",
		"a failed:\n  - turn 1: status: want succeeded, got failed [1 of 2 runs]",
		"FAIL: 3 of 4 runs passed (75.0%, min 90.0%); 8 LLM calls, 500 tokens, $0.040000",
	} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("WriteTable() =\n%s\nwant it to contain %q", table.String(), want)
		}
	}
}

// The JSON report's shape is the contract CI reads (docs/evals.md).
func TestReportJSONShape(t *testing.T) {
	t.Parallel()
	results := []Result{{Scenario: "a", Run: 1, Pass: false, Failures: []Failure{{Turn: 1, Expectation: "status", Want: "succeeded", Got: "failed"}},
		Turns: []TurnResult{{Turn: 1, TurnID: "t1", Status: "failed", Calls: []Call{{Tool: "x", CallID: "c1", Status: "failed"}}, Artifacts: []ArtifactRef{}}}}}
	b, err := json.Marshal(Summarize([]*Scenario{{Name: "a", Path: "a.yaml"}}, results, 1))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	assertKeys(t, "report", got, "runs", "passed", "pass_rate", "min_pass", "ok", "llm_calls", "tokens", "cost_usd", "scenarios")
	sc := got["scenarios"].([]any)[0].(map[string]any)
	assertKeys(t, "scenario", sc, "name", "file", "runs", "passed", "pass_rate", "llm_calls", "tokens", "cost_usd", "latency_ms", "failures", "results")
	assertKeys(t, "latency", sc["latency_ms"].(map[string]any), "mean", "min", "max", "stddev")
	res := sc["results"].([]any)[0].(map[string]any)
	assertKeys(t, "result", res, "scenario", "run", "pass", "failures", "turns", "llm_calls", "tokens", "cost_usd", "latency_ms")
	assertKeys(t, "failure", res["failures"].([]any)[0].(map[string]any), "turn", "expectation", "want", "got")
	turn := res["turns"].([]any)[0].(map[string]any)
	assertKeys(t, "turn", turn, "turn", "turn_id", "status", "calls", "artifacts", "llm_calls", "tokens", "cached_tokens", "cost_usd", "latency_ms")
	assertKeys(t, "call", turn["calls"].([]any)[0].(map[string]any), "tool", "call_id", "status")
}

func assertKeys(t *testing.T, what string, m map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			t.Errorf("%s has no %q: %v", what, k, m)
		}
	}
}
