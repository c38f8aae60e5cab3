package eval

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The same scenario in YAML and JSON parses to the same thing.
func TestParseYAMLAndJSON(t *testing.T) {
	t.Parallel()
	y := `
name: valve
tags: [form]
turns:
  - text: Design a valve flange with 4 holes
    form: [{tool: design_valve_flange, values: {material: brass}}]
    expect:
      status: succeeded
      calls: [{tool: design_valve_flange, arguments: {subset: {holes: 4}}}]
      max_llm_calls: 2
`
	j := `{"name": "valve", "tags": ["form"], "turns": [{"text": "Design a valve flange with 4 holes",
  "form": [{"tool": "design_valve_flange", "values": {"material": "brass"}}],
  "expect": {"status": "succeeded", "calls": [{"tool": "design_valve_flange", "arguments": {"subset": {"holes": 4}}}], "max_llm_calls": 2}}]}`
	fromYAML, err := Parse([]byte(y), true)
	if err != nil {
		t.Fatalf("Parse(YAML) error = %v", err)
	}
	fromJSON, err := Parse([]byte(j), false)
	if err != nil {
		t.Fatalf("Parse(JSON) error = %v", err)
	}
	if diff := cmp.Diff(fromJSON, fromYAML, cmpopts.IgnoreUnexported(ArgumentsExpect{})); diff != "" {
		t.Errorf("Parse(YAML) differs from Parse(JSON) (-json +yaml):\n%s", diff)
	}
}

func TestParseRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src, want string
	}{
		{"no turns", "name: x", "at least one turn"},
		{"misspelt expectation", "turns: [{text: hi, expect: {stauts: succeeded}}]", `unknown field "stauts"`},
		{"no prompt", "turns: [{expect: {status: succeeded}}]", "turn 1: text or workflow is required"},
		{"bad status", "turns: [{text: hi, expect: {status: done}}]", `turn 1: expect.status "done"`},
		{"bad order", "turns: [{text: hi, expect: {tools_order: random}}]", `expect.tools_order "random"`},
		{"bad regexp", "turns: [{text: hi, expect: {reply_matches: ['(']}}]", "expect.reply_matches"},
		{"two ways to check arguments", "turns: [{text: hi, expect: {calls: [{tool: t, arguments: {exact: {a: 1}, subset: {a: 1}}}]}}]", "exactly one of exact, subset, schema"},
		{"bad schema", "turns: [{text: hi, expect: {calls: [{tool: t, arguments: {schema: {type: 12}}}]}}]", "arguments.schema"},
		{"external schema", "turns: [{text: hi, expect: {calls: [{tool: t, arguments: {schema: {$ref: 'file:///etc/passwd'}}}]}}]", "not allowed"},
		{"bad decision", "turns: [{text: hi, approval: [{decision: maybe}]}]", `approval decision "maybe"`},
		{"edit with reject", "turns: [{text: hi, approval: [{decision: reject, arguments: {t: {a: 1}}}]}]", "only with approve"},
		{"artifact count and at_least", "turns: [{text: hi, expect: {artifacts: [{mime_type: image/png, count: 1, at_least: 1}]}}]", "one of count, at_least"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.src), true)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(%q) error = %v, want it to contain %q", tt.src, err, tt.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b.yaml", "turns: [{text: hi}]")
	write("sub/a.json", `{"name": "first", "turns": [{"text": "hi"}]}`)
	write("notes.txt", "not a scenario")
	got, err := Load(dir)
	if err != nil {
		t.Fatalf("Load() error = %v", err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"b", "first"}, names); diff != "" {
		t.Errorf("Load() names (-want +got):\n%s", diff)
	}
	write("sub/c.yml", "name: b\nturns: [{text: hi}]")
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), `scenario name "b" is already used`) {
		t.Errorf("Load() with a repeated name error = %v, want the name conflict", err)
	}
	if _, err := Load(t.TempDir()); !errors.Is(err, ErrNoScenarios) {
		t.Errorf("Load(empty folder) error = %v, want ErrNoScenarios", err)
	}
}

// The shipped scenarios parse and cover the docs/design.md §10 set (issue 16).
func TestShippedScenarios(t *testing.T) {
	t.Parallel()
	scenarios, err := Load(filepath.Join("..", "..", "testdata", "evals"))
	if err != nil {
		t.Fatalf("Load(testdata/evals) error = %v", err)
	}
	tags := map[string]int{}
	for _, s := range scenarios {
		for _, tag := range s.Tags {
			tags[tag]++
		}
	}
	for tag, least := range map[string]int{"multi-step": 3, "designed-to-fail": 1, "distractor": 1, "form": 1, "approval": 1,
		"rejection": 1, "parallel": 1, "workflow": 1} {
		if tags[tag] < least {
			t.Errorf("testdata/evals has %d scenarios tagged %s, want at least %d", tags[tag], tag, least)
		}
	}
}
