package eval_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clientagent/clientagent/pkg/devstack"
	"github.com/clientagent/clientagent/pkg/eval"
)

// localRunner starts a local stack with the scripted demo model in process
// and returns a runner against its API.
func localRunner(t *testing.T) *eval.Runner {
	t.Helper()
	st, err := devstack.Start(t.Context(), devstack.Config{Addr: "127.0.0.1:0", DataDir: t.TempDir()})
	if err != nil {
		t.Fatalf("devstack.Start() error = %v", err)
	}
	t.Cleanup(func() { st.Close() })
	tok, err := st.Token("eval")
	if err != nil {
		t.Fatal(err)
	}
	return &eval.Runner{Client: &eval.Client{BaseURL: st.URL(), Token: tok}}
}

// Every shipped scenario passes against the scripted demo model: this is
// what `make test` (and so CI) runs of `clientagent eval testdata/evals`.
func TestShippedScenariosPass(t *testing.T) {
	t.Parallel()
	scenarios, err := eval.Load(filepath.Join("..", "..", "testdata", "evals"))
	if err != nil {
		t.Fatalf("Load() error = %v", err)
	}
	r := localRunner(t)
	results := r.RunAll(t.Context(), scenarios, 1, 2)
	if len(results) != len(scenarios) {
		t.Fatalf("RunAll() = %d results, want %d", len(results), len(scenarios))
	}
	for _, res := range results {
		if !res.Pass {
			var reasons []string
			for _, f := range res.Failures {
				reasons = append(reasons, f.String())
			}
			t.Errorf("scenario %s failed:\n  %s", res.Scenario, strings.Join(reasons, "\n  "))
		}
	}
	rep := eval.Summarize(scenarios, results, 1)
	if !rep.OK || rep.Runs != len(scenarios) || rep.LLMCalls == 0 || rep.Tokens == 0 {
		t.Errorf("Summarize() = ok %v, %d runs, %d LLM calls, %d tokens; want ok, %d runs and some spend", rep.OK, rep.Runs, rep.LLMCalls, rep.Tokens, len(scenarios))
	}
}

// A scenario whose expectation is wrong fails, and the reason says which
// expectation, what was wanted and what the stack did.
func TestWrongExpectationFails(t *testing.T) {
	t.Parallel()
	r := localRunner(t)
	tests := []struct {
		name     string
		scenario string
		want     []string // the failures' String(), up to a "…" suffix wildcard
		turns    int      // turns played
	}{
		{
			name: "status",
			scenario: `
turns:
  - text: Create an SVG with the word Hello
    expect: {status: failed}`,
			want:  []string{"turn 1: status: want failed, got succeeded (Here is the SVG image with the word Hello. Artifact: Hello.svg (artifact_id art_…"},
			turns: 1,
		},
		{
			name: "a distractor is called",
			scenario: `
turns:
  - text: Create a PNG image with the word Hello
    expect:
      tools: [create_svg_artifact]
      not_called: [convert_svg_to_png]`,
			want: []string{
				"turn 1: tools (sequence): want [create_svg_artifact], got [create_svg_artifact, convert_svg_to_png]",
				"turn 1: not_called: want convert_svg_to_png not called, got [create_svg_artifact, convert_svg_to_png]",
			},
			turns: 1,
		},
		{
			name: "arguments in the second turn",
			scenario: `
turns:
  - text: Design a valve flange with 4 holes
    form: [{tool: design_valve_flange, values: {material: brass}}]
  - text: Redo the valve with 6 holes
    expect:
      calls: [{tool: design_valve_flange, arguments: {subset: {material: steel}}}]
      artifacts: [{mime_type: image/png, at_least: 1}]
      max_llm_calls: 1`,
			want: []string{
				`turn 2: calls design_valve_flange arguments subset: want {"material":"steel"}, got {"holes":6,"material":"brass","outer_diameter_mm":120} (differs at /material)`,
				"turn 2: artifacts image/png: want at least 1, got 0 (produced image/svg+xml)",
				"turn 2: max_llm_calls: want at most 1, got 2",
			},
			turns: 2,
		},
		{
			name: "a scripted form that never comes",
			scenario: `
turns:
  - text: Create an SVG with the word Hello
    form: [{tool: design_valve_flange, values: {material: brass}}]`,
			want:  []string{"turn 1: form: want a form for design_valve_flange, got none asked"},
			turns: 1,
		},
		{
			name: "a pause without a scripted answer stops the scenario",
			scenario: `
turns:
  - text: Design a valve flange with 4 holes
  - text: Create an SVG with the word Hello`,
			want:  []string{"turn 1: run (no scripted answer: the turn asks for material of design_valve_flange (form call 1) and the scenario has no unused form answer for it)"},
			turns: 1,
		},
		{
			name: "a rejection expected to succeed",
			scenario: `
turns:
  - text: Create an SVG with the word Hello
  - text: Publish it to web
    approval: [{decision: reject}]
    expect:
      status: succeeded
      calls: [{tool: publish_artifact, status: succeeded}]
      reply_contains: [Published]`,
			want: []string{
				"turn 2: calls publish_artifact status: want succeeded, got rejected (call_…",
				`turn 2: reply_contains: want "Published", got "Not published: publishing art_…`,
			},
			turns: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := eval.Parse([]byte(tt.scenario), true)
			if err != nil {
				t.Fatalf("Parse() error = %v", err)
			}
			s.Name = tt.name
			res := r.Run(t.Context(), s, 1)
			if res.Pass {
				t.Fatalf("Run() passed, want it to fail with %q", tt.want)
			}
			var got []string
			for _, f := range res.Failures {
				got = append(got, f.String())
			}
			if len(got) != len(tt.want) {
				t.Fatalf("Run() failures = %q, want %q", got, tt.want)
			}
			for i, w := range tt.want {
				if !matches(w, got[i]) {
					t.Errorf("Run() failure %d = %q, want %q", i, got[i], w)
				}
			}
			if len(res.Turns) != tt.turns {
				t.Errorf("Run() played %d turns, want %d", len(res.Turns), tt.turns)
			}
		})
	}
}

// matches compares a failure with its expected text, where a trailing "…"
// stands for the rest (ids differ from run to run).
func matches(want, got string) bool {
	if prefix, ok := strings.CutSuffix(want, "…"); ok {
		return strings.HasPrefix(got, prefix)
	}
	return want == got
}

// A turn the harness gives up on is cancelled, not left waiting.
func TestUnansweredPauseIsCancelled(t *testing.T) {
	t.Parallel()
	r := localRunner(t)
	r.KeepConversations = true
	s, err := eval.Parse([]byte("turns: [{text: Design a valve flange with 4 holes}]"), true)
	if err != nil {
		t.Fatal(err)
	}
	res := r.Run(t.Context(), s, 1)
	if res.Pass || len(res.Turns) != 1 {
		t.Fatalf("Run() = pass %v, %d turns; want a failure in turn 1", res.Pass, len(res.Turns))
	}
	v, err := r.Client.Turn(context.Background(), res.ConversationID, res.Turns[0].TurnID)
	if err != nil {
		t.Fatalf("Turn() error = %v", err)
	}
	if diff := cmp.Diff("cancelled", string(v.Status)); diff != "" {
		t.Errorf("turn status (-want +got):\n%s", diff)
	}
}
