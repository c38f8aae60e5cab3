package eval

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// mustExpect parses one turn's expectations from YAML, as a scenario file
// would give them (schemas compiled, regexps checked).
func mustExpect(t *testing.T, yamlExpect string) Expect {
	t.Helper()
	src := "turns:\n  - text: x\n    expect:\n" + indent(yamlExpect, "      ")
	s, err := Parse([]byte(src), true)
	if err != nil {
		t.Fatalf("Parse(%q) error = %v", src, err)
	}
	return s.Turns[0].Expect
}

func indent(s, by string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = by + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

// pngTurn is what the demo's "Create a PNG image with the word Popelnase" does.
var pngTurn = TurnResult{
	Turn:   1,
	Status: "succeeded",
	Reply:  "Here is the PNG image with the word Popelnase. Artifact: Popelnase.png (artifact_id art_2).",
	Calls: []Call{
		{Tool: "create_svg_artifact", CallID: "c1", Status: "succeeded", Arguments: map[string]any{"word": "Popelnase"}},
		{Tool: "convert_svg_to_png", CallID: "c2", Status: "succeeded", Arguments: map[string]any{"artifact_id": "art_1"}},
	},
	Artifacts: []ArtifactRef{{ID: "art_1", MimeType: "image/svg+xml"}, {ID: "art_2", MimeType: "image/png"}},
	LLMCalls:  3,
	Tokens:    6833,
	CostUSD:   0.002,
}

func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		expect string
		want   []string
	}{
		{"all met", `
status: succeeded
tools: [create_svg_artifact, convert_svg_to_png]
not_called: [publish_artifact]
calls:
  - {tool: create_svg_artifact, status: succeeded, arguments: {exact: {word: Popelnase}}}
  - {tool: convert_svg_to_png, arguments: {schema: {type: object, properties: {artifact_id: {pattern: "^art_"}}}}}
reply_contains: [Popelnase]
reply_matches: ['art_\d']
artifacts: [{mime_type: image/png, count: 1}, {mime_type: image/svg+xml, at_least: 1}]
max_llm_calls: 3
max_tokens: 7000
max_cost_usd: 0.01
`, nil},
		{"status", "status: failed", []string{`turn 1: status: want failed, got succeeded (Here is the PNG image with the word Popelnase. Artifact: Popelnase.png (artifact_id art_2).)`}},
		{"tools in order", "tools: [convert_svg_to_png, create_svg_artifact]",
			[]string{"turn 1: tools (sequence): want [convert_svg_to_png, create_svg_artifact], got [create_svg_artifact, convert_svg_to_png]"}},
		{"tools as a set", "tools: [convert_svg_to_png, create_svg_artifact]\ntools_order: set", nil},
		{"tools as a set, one missing", "tools: [convert_svg_to_png, create_svg_artifact, publish_artifact]\ntools_order: set",
			[]string{"turn 1: tools (set): want [convert_svg_to_png, create_svg_artifact, publish_artifact], got [create_svg_artifact, convert_svg_to_png]"}},
		{"tools included", "tools: [convert_svg_to_png]\ntools_order: includes", nil},
		{"no tools", "tools: []", []string{"turn 1: tools (sequence): want [], got [create_svg_artifact, convert_svg_to_png]"}},
		{"distractor called", "not_called: [convert_svg_to_png]",
			[]string{"turn 1: not_called: want convert_svg_to_png not called, got [create_svg_artifact, convert_svg_to_png]"}},
		{"exact arguments", "calls: [{tool: create_svg_artifact, arguments: {exact: {word: Hello}}}]",
			[]string{`turn 1: calls create_svg_artifact arguments exact: want {"word":"Hello"}, got {"word":"Popelnase"}`}},
		{"subset arguments", "calls: [{tool: create_svg_artifact, arguments: {subset: {word: Popelnase, color: red}}}]",
			[]string{`turn 1: calls create_svg_artifact arguments subset: want {"color":"red","word":"Popelnase"}, got {"word":"Popelnase"} (differs at /color)`}},
		{"schema arguments", "calls: [{tool: convert_svg_to_png, arguments: {schema: {properties: {artifact_id: {pattern: '^png_'}}}}}]",
			[]string{`turn 1: calls convert_svg_to_png arguments schema: want arguments valid against the schema, got {"artifact_id":"art_1"} (/artifact_id: does not match pattern '^png_')`}},
		{"call status", "calls: [{tool: convert_svg_to_png, status: rejected}]",
			[]string{"turn 1: calls convert_svg_to_png status: want rejected, got succeeded (c2)"}},
		{"nth call missing", "calls: [{tool: convert_svg_to_png, nth: 2}]",
			[]string{"turn 1: calls convert_svg_to_png #2: want at least 2 calls, got 1"}},
		{"call missing", "calls: [{tool: publish_artifact}]", []string{"turn 1: calls publish_artifact: want a call, got none"}},
		{"reply", "reply_contains: [Hello]\nreply_matches: ['^Published']", []string{
			`turn 1: reply_contains: want "Hello", got "Here is the PNG image with the word Popelnase. Artifact: Popelnase.png (artifact_id art_2)."`,
			`turn 1: reply_matches: want /^Published/, got "Here is the PNG image with the word Popelnase. Artifact: Popelnase.png (artifact_id art_2)."`,
		}},
		{"artifacts", "artifacts: [{mime_type: image/png, count: 2}, {mime_type: application/pdf, at_least: 1}]", []string{
			"turn 1: artifacts image/png: want 2, got 1 (produced image/svg+xml, image/png)",
			"turn 1: artifacts application/pdf: want at least 1, got 0 (produced image/svg+xml, image/png)",
		}},
		{"spend", "max_llm_calls: 2\nmax_tokens: 100\nmax_cost_usd: 0.001", []string{
			"turn 1: max_llm_calls: want at most 2, got 3",
			"turn 1: max_tokens: want at most 100, got 6833",
			"turn 1: max_cost_usd: want at most $0.001, got $0.002",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, f := range Check(1, mustExpect(t, tt.expect), pngTurn) {
				got = append(got, f.String())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Check() failures (-want +got):\n%s", diff)
			}
		})
	}
}

// A call whose arguments the API does not show cannot pass an arguments
// expectation, and the reason says why.
func TestCheckArgumentsNotShown(t *testing.T) {
	t.Parallel()
	tr := TurnResult{Status: "succeeded", Calls: []Call{{Tool: "publish_artifact", CallID: "c1", Status: "failed"}}}
	got := Check(2, mustExpect(t, "calls: [{tool: publish_artifact, arguments: {subset: {channel: web}}}]"), tr)
	want := []Failure{{Turn: 2, Expectation: "calls publish_artifact arguments", Want: "arguments to check", Got: "none shown by the API",
		Detail: "the API shows a call's arguments only for a succeeded skill call or an approval (docs/evals.md)"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Check() (-want +got):\n%s", diff)
	}
}
