package catalog_test

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/clientagent/clientagent/pkg/catalog"
)

func TestWorkflowToolName(t *testing.T) {
	t.Parallel()
	tests := []struct{ id, want string }{
		{"word_to_png", "workflow_word_to_png"},
		{"flange drawing/v2", "workflow_flange_drawing_v2"},
	}
	for _, tt := range tests {
		if got := catalog.WorkflowToolName(tt.id); got != tt.want {
			t.Errorf("WorkflowToolName(%q) = %q, want %q", tt.id, got, tt.want)
		}
	}
	if got := catalog.WorkflowToolName(strings.Repeat("a", 80)); len(got) > 64 {
		t.Errorf("WorkflowToolName(long) = %q (%d chars), want ≤ 64", got, len(got))
	}
}

// spec §3.2: a workflow tool's parameters are its inputs as flat
// properties keyed by dotted path, all required except user input.
func TestWorkflowTool_FlatInputs(t *testing.T) {
	t.Parallel()
	c := catalog.New(demoCaps(t), demoWorkflows(t))
	desc, got := toolParams(t, c, "workflow_flange_drawing")
	want := map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []any{"drawing.holes", "drawing.outer_diameter_mm"},
		"properties": map[string]any{
			"drawing.holes":             map[string]any{"type": "integer", "description": "Number of bolt holes (3 to 24)."},
			"drawing.outer_diameter_mm": map[string]any{"type": "number", "description": "Outer diameter of the flange in millimetres."},
			"drawing.material": map[string]any{"type": "string", "description": "Material of the flange.",
				"enum": []any{"steel", "stainless", "brass", "pvc"}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("workflow tool parameters mismatch (-want +got):\n%s", diff)
	}
	if !strings.Contains(desc, "Never invent drawing.material") {
		t.Errorf("workflow tool description = %q, want the never-invent rule for drawing.material", desc)
	}
}

// A workflow with a step needing approval needs approval; one whose skill
// is missing is marked unavailable.
func TestWorkflowTool_ApprovalAndAvailability(t *testing.T) {
	t.Parallel()
	wf := catalog.Workflow{ID: "pub", Name: "Publish", RequiredInputPaths: []catalog.WorkflowInput{{Path: "id", Type: "string"}},
		Steps: []catalog.WorkflowStep{{Skill: "publish_artifact", Arguments: map[string]any{"artifact_id": "{{inputs.id}}", "channel": "web"}}}}
	missing := catalog.Workflow{ID: "gone", Steps: []catalog.WorkflowStep{{Skill: "no_such_skill"}}}
	c := catalog.New(demoCaps(t), []catalog.Workflow{wf, missing})
	e, _ := c.Lookup("workflow_pub")
	if !e.RequiresApproval {
		t.Errorf("Lookup(workflow_pub).RequiresApproval = false, want true")
	}
	desc, _ := toolParams(t, c, "workflow_gone")
	if !strings.HasPrefix(desc, "(currently unavailable)") {
		t.Errorf("workflow_gone description = %q, want it to start with (currently unavailable)", desc)
	}
}

func TestLoadWorkflows(t *testing.T) {
	t.Parallel()
	wfs := demoWorkflows(t)
	var ids []string
	for _, w := range wfs {
		ids = append(ids, w.ID)
	}
	if diff := cmp.Diff([]string{"flange_drawing", "word_to_png"}, ids); diff != "" {
		t.Errorf("LoadWorkflows() ids mismatch (-want +got):\n%s", diff)
	}

	bad := []struct {
		name, body string
	}{
		{"no id", `{"steps":[{"skill":"a"}]}`},
		{"no steps", `{"id":"x"}`},
		{"bad type", `{"id":"x","required_input_paths":[{"path":"p","type":"date"}],"steps":[{"skill":"a"}]}`},
		{"undeclared input", `{"id":"x","steps":[{"skill":"a","arguments":{"w":"{{inputs.word}}"}}]}`},
		{"later step", `{"id":"x","steps":[{"skill":"a","arguments":{"w":"{{steps.0.artifacts.0}}"}}]}`},
		{"unknown template", `{"id":"x","steps":[{"skill":"a","arguments":{"w":"{{env.HOME}}"}}]}`},
	}
	for _, tt := range bad {
		fsys := fstest.MapFS{"wf/x.json": {Data: []byte(tt.body)}}
		if _, err := catalog.LoadWorkflows(fsys, "wf"); !errors.Is(err, catalog.ErrInvalidWorkflow) {
			t.Errorf("LoadWorkflows(%s) error = %v, want ErrInvalidWorkflow", tt.name, err)
		}
	}
	dup := fstest.MapFS{
		"a.json": {Data: []byte(`{"id":"x","steps":[{"skill":"a"}]}`)},
		"b.json": {Data: []byte(`{"id":"x","steps":[{"skill":"a"}]}`)},
	}
	if _, err := catalog.LoadWorkflows(dup, "."); !errors.Is(err, catalog.ErrInvalidWorkflow) {
		t.Errorf("LoadWorkflows(duplicate ids) error = %v, want ErrInvalidWorkflow", err)
	}
	if _, err := catalog.LoadWorkflows(fstest.MapFS{"a.json": {Data: []byte(`{`)}}, "."); err == nil {
		t.Errorf("LoadWorkflows(broken JSON) error = nil, want one")
	}
}

func TestStepArguments(t *testing.T) {
	t.Parallel()
	byID := map[string]catalog.Workflow{}
	for _, w := range demoWorkflows(t) {
		byID[w.ID] = w
	}
	embedded := catalog.Workflow{ID: "e", RequiredInputPaths: []catalog.WorkflowInput{{Path: "n", Type: "integer"}, {Path: "opt", Type: "string"}},
		Steps: []catalog.WorkflowStep{
			{Skill: "a", Arguments: map[string]any{"label": "{{inputs.n}} holes", "opt": "{{ inputs.opt }}", "fixed": 3.5}},
			{Skill: "b", Arguments: map[string]any{"ids": []any{"{{steps.0.artifacts.1}}"}, "title": "of {{inputs.opt}}"}},
		}}
	tests := []struct {
		name      string
		wf        catalog.Workflow
		step      int
		inputs    map[string]any
		artifacts [][]string
		want      map[string]any
		wantErr   bool
	}{
		{name: "input keeps its string", wf: byID["word_to_png"], step: 0, inputs: map[string]any{"word": "Popelnase"},
			want: map[string]any{"word": "Popelnase"}},
		{name: "earlier step's artifact", wf: byID["word_to_png"], step: 1, inputs: map[string]any{"word": "Popelnase"},
			artifacts: [][]string{{"a1"}}, want: map[string]any{"artifact_id": "a1"}},
		{name: "whole template keeps the JSON type", wf: byID["flange_drawing"], step: 0,
			inputs: map[string]any{"drawing.holes": float64(6), "drawing.outer_diameter_mm": 120.5, "drawing.material": "brass"},
			want:   map[string]any{"holes": float64(6), "outer_diameter_mm": 120.5, "material": "brass"}},
		{name: "nested inputs are read too", wf: byID["flange_drawing"], step: 0,
			inputs: map[string]any{"drawing": map[string]any{"holes": 8, "outer_diameter_mm": 90, "material": "pvc"}},
			want:   map[string]any{"holes": 8, "outer_diameter_mm": 90, "material": "pvc"}},
		{name: "embedded template formats, absent optional left out", wf: embedded, step: 0, inputs: map[string]any{"n": float64(6)},
			want: map[string]any{"label": "6 holes", "fixed": 3.5}},
		{name: "missing step artifact", wf: byID["word_to_png"], step: 1, artifacts: [][]string{{}}, wantErr: true},
		{name: "embedded absent input", wf: embedded, step: 1, artifacts: [][]string{{"a", "b"}}, wantErr: true},
		{name: "no such step", wf: embedded, step: 2, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := tt.wf.StepArguments(tt.step, tt.inputs, tt.artifacts)
			if (err != nil) != tt.wantErr {
				t.Fatalf("StepArguments() error = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("StepArguments() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
