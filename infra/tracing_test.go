package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// xrayEndpoint is the synthesized OTEL_EXPORTER_OTLP_TRACES_ENDPOINT.
var xrayEndpoint = mustJSON(map[string]any{"Fn::Join": []any{"", []any{"https://xray.", map[string]any{"Ref": "AWS::Region"}, ".", map[string]any{"Ref": "AWS::URLSuffix"}, "/v1/traces"}}})

// Every environment of cdk.json says whether it traces (issue 16).
func TestCDKJSONTracingPerEnvironment(t *testing.T) {
	t.Parallel()
	ctx, err := ReadCDKJSONContext(filepath.Join("..", "cdk.json"))
	if err != nil {
		t.Fatal(err)
	}
	envs, _ := ctx[CtxEnvironments].(map[string]any)
	for _, env := range []string{"dev", "staging", "prod"} {
		block, _ := envs[env].(map[string]any)
		if _, ok := block[CtxTracing].(bool); !ok {
			t.Errorf("cdk.json environments.%s.%s = %v, want true or false", env, CtxTracing, block[CtxTracing])
		}
	}
}

// With tracing on (cdk.json's environments, and the default): Lambda
// active tracing on every function, Step Functions tracing, and every
// function exporting its spans to X-Ray's OTLP endpoint with exactly the
// permission that endpoint checks, xray:PutTraceSegments.
func TestTracingOn(t *testing.T) {
	t.Parallel()
	for _, config := range []string{"bedrock", "dev", "prod"} {
		s := synth(t, config)
		if !s.props.TracingOn() {
			t.Fatalf("%s: TracingOn() = false, want true", config)
		}
		_, sm := s.turnMachine(t)
		if got := mustJSON(sm["TracingConfiguration"]); got != `{"Enabled":true}` {
			t.Errorf("%s: state machine TracingConfiguration = %s, want enabled", config, got)
		}
		fns := s.resources("AWS::Lambda::Function")
		if len(fns) == 0 {
			t.Fatalf("%s: no functions", config)
		}
		for id, fn := range fns {
			if got := mustJSON(fn["TracingConfig"]); got != `{"Mode":"Active"}` {
				t.Errorf("%s: %s TracingConfig = %s, want Active", config, id, got)
			}
			if got := mustJSON(envOf(fn)["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]); got != xrayEndpoint {
				t.Errorf("%s: %s OTEL_EXPORTER_OTLP_TRACES_ENDPOINT = %s, want %s", config, id, got, xrayEndpoint)
			}
			var exporter []map[string]any
			for _, st := range s.roleStatements(t, fn, "Role") {
				if st["Sid"] == "XRayOTLPSpans" {
					exporter = append(exporter, st)
				}
			}
			if len(exporter) != 1 || mustJSON(exporter[0]["Action"]) != `"xray:PutTraceSegments"` || mustJSON(exporter[0]["Resource"]) != `"*"` || exporter[0]["Effect"] != "Allow" {
				t.Errorf("%s: %s exporter statement = %s, want one Allow of xray:PutTraceSegments on *", config, id, mustJSON(exporter))
			}
		}
	}
}

// With tracing off: no active tracing, no state machine tracing, no
// exporter and no X-Ray action on any role.
func TestTracingOff(t *testing.T) {
	t.Parallel()
	props := baseProps()
	off := false
	props.Tracing = &off
	dir, err := os.MkdirTemp("", "clientagent-cdk-out-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	synthMu.Lock()
	s, err := synthesize(props, dir)
	synthMu.Unlock()
	if err != nil {
		t.Fatalf("synth without tracing: %v", err)
	}
	_, sm := s.turnMachine(t)
	if got := mustJSON(sm["TracingConfiguration"]); strings.Contains(got, "true") {
		t.Errorf("state machine TracingConfiguration = %s, want off", got)
	}
	for id, fn := range s.resources("AWS::Lambda::Function") {
		if got := mustJSON(fn["TracingConfig"]); strings.Contains(got, "Active") {
			t.Errorf("%s TracingConfig = %s, want no active tracing", id, got)
		}
		if v, ok := envOf(fn)["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]; ok {
			t.Errorf("%s exports spans to %s with tracing off", id, mustJSON(v))
		}
		for _, st := range s.roleStatements(t, fn, "Role") {
			if slices.ContainsFunc(actionsOf(st), func(a string) bool { return strings.HasPrefix(a, "xray:") }) {
				t.Errorf("%s role may %v with tracing off", id, actionsOf(st))
			}
		}
	}
}

// The dashboard shows the per-turn metrics the functions log as EMF when a
// turn ends: turns by status, cost, tokens, LLM calls, steps, duration.
func TestDashboardTurnMetrics(t *testing.T) {
	t.Parallel()
	s := synth(t, "bedrock")
	_, d := s.one(t, "AWS::CloudWatch::Dashboard")
	body := mustJSON(d["DashboardBody"])
	want := []string{`\"clientagent/test\",\"TurnCostUSD\"`, `\"clientagent/test\",\"TurnTokens\"`, `\"clientagent/test\",\"TurnCachedTokens\"`,
		`\"clientagent/test\",\"TurnLLMCalls\"`, `\"clientagent/test\",\"TurnSteps\"`, `\"clientagent/test\",\"TurnDuration\"`, `\"clientagent/test\",\"TurnUserWait\"`}
	for _, status := range TurnStatuses {
		want = append(want, `\"clientagent/test\",\"TurnEnded\",\"Status\",\"`+status+`\"`)
	}
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("dashboard body lacks %s", w)
		}
	}
}
