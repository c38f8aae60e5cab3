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

// docs/design.md §3.2: a workflow tool's parameters are its inputs as flat
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
// is unavailable now (its agent is down) is marked unavailable.
func TestWorkflowTool_ApprovalAndAvailability(t *testing.T) {
	t.Parallel()
	caps := demoCaps(t)
	for i := range caps {
		if caps[i].Tool == "convert_svg_to_png" {
			caps[i].Unavailable = true
		}
	}
	wf := catalog.Workflow{ID: "pub", Name: "Publish", Inputs: []catalog.WorkflowInput{{Path: "id"}},
		Steps: []catalog.WorkflowStep{{Skill: "publish_artifact", Arguments: map[string]any{"artifact_id": "{{inputs.id}}", "channel": "web"}}}}
	c := catalog.New(caps, append(demoWorkflows(t), wf))
	if e, _ := c.Lookup("workflow_pub"); !e.RequiresApproval {
		t.Errorf("Lookup(workflow_pub).RequiresApproval = false, want true")
	}
	if e, _ := c.Lookup("workflow_flange_drawing"); e.RequiresApproval || e.Unavailable {
		t.Errorf("Lookup(workflow_flange_drawing) approval %v unavailable %v, want neither", e.RequiresApproval, e.Unavailable)
	}
	desc, _ := toolParams(t, c, "workflow_word_to_png")
	if !strings.HasPrefix(desc, "(currently unavailable)") {
		t.Errorf("workflow_word_to_png description = %q, want it to start with (currently unavailable)", desc)
	}
}

// Issue 8: compiling a template against the skills yields its
// required_input_paths: each input takes the type, enum, user-input and
// artifact-reference marks of the skill parameter it is bound to.
func TestCompile_RequiredInputPaths(t *testing.T) {
	t.Parallel()
	c := catalog.New(demoCaps(t), demoWorkflows(t))
	if errs := c.WorkflowErrors(); len(errs) != 0 {
		t.Fatalf("WorkflowErrors() = %v, want none for the demo templates", errs)
	}
	got := map[string][]catalog.WorkflowInput{}
	for _, w := range c.Workflows() {
		got[w.ID] = w.Inputs
	}
	want := map[string][]catalog.WorkflowInput{
		"word_to_png": {{Path: "word", Type: "string", Description: "The word to render."}},
		"publish_word": {
			{Path: "word", Type: "string", Description: "The word to render."},
			{Path: "channel", Type: "string", Description: "Where to publish the PNG.", Enum: []string{"web", "print", "archive"}},
		},
		"flange_drawing": {
			{Path: "drawing.holes", Type: "integer", Description: "Number of bolt holes (3 to 24)."},
			{Path: "drawing.outer_diameter_mm", Type: "number", Description: "Outer diameter of the flange in millimetres."},
			{Path: "drawing.material", Type: "string", Description: "Material of the flange.", Enum: []string{"steel", "stainless", "brass", "pvc"}, UserInput: true},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("compiled inputs mismatch (-want +got):\n%s", diff)
	}

	src := catalog.Workflow{ID: "png_of", Inputs: []catalog.WorkflowInput{{Path: "source"}},
		Steps: []catalog.WorkflowStep{{Skill: "convert_svg_to_png", Arguments: map[string]any{"artifact_id": "{{inputs.source}}"}}}}
	c = catalog.New(demoCaps(t), []catalog.Workflow{src})
	desc, params := toolParams(t, c, "workflow_png_of")
	if want := map[string]any{"type": "string", "description": "artifact_id of an existing conversation artifact"}; !cmp.Equal(want, params["properties"].(map[string]any)["source"]) {
		t.Errorf("workflow_png_of source = %v, want %v (%s)", params["properties"], want, desc)
	}
}

// Issue 8: a template that cannot run is rejected when the catalog is
// built, with an error naming the template, the step and what is wrong.
func TestCompile_Errors(t *testing.T) {
	t.Parallel()
	svg := func(args map[string]any) []catalog.WorkflowStep {
		return []catalog.WorkflowStep{{ID: "svg", Name: "Draw", Skill: "create_svg_artifact", Arguments: args}}
	}
	tests := []struct {
		name string
		wf   catalog.Workflow
		want string
	}{
		{"unknown skill", catalog.Workflow{ID: "x", Steps: []catalog.WorkflowStep{{Name: "Paint", Skill: "paint_picture"}}},
			`x: step 1 "Paint" (paint_picture): unknown skill "paint_picture" (skills: convert_svg_to_png, create_svg_artifact, design_valve_flange, publish_artifact)`},
		{"unresolved input", catalog.Workflow{ID: "x", Inputs: []catalog.WorkflowInput{{Path: "word"}}, Steps: svg(map[string]any{"word": "{{inputs.wrod}}"})},
			`x: step 1 "Draw" (create_svg_artifact): unresolved binding {{inputs.wrod}}: no input "wrod" is declared (inputs: word)`},
		{"unresolved step", catalog.Workflow{ID: "x", Steps: append(svg(map[string]any{"word": "hi"}),
			catalog.WorkflowStep{Skill: "convert_svg_to_png", Arguments: map[string]any{"artifact_id": "{{steps.sgv.artifact}}"}})},
			`x: step 2 (convert_svg_to_png): unresolved binding {{steps.sgv.artifact}}: no step "sgv"`},
		{"later step", catalog.Workflow{ID: "x", Steps: []catalog.WorkflowStep{
			{Skill: "convert_svg_to_png", Arguments: map[string]any{"artifact_id": "{{steps.svg.artifacts.0}}"}},
			{ID: "svg", Skill: "create_svg_artifact", Arguments: map[string]any{"word": "hi"}}}},
			`x: step 1 (convert_svg_to_png): unresolved binding {{steps.svg.artifacts.0}}: it names step 2 "svg" (create_svg_artifact), which is not an earlier step`},
		{"not a parameter", catalog.Workflow{ID: "x", Steps: svg(map[string]any{"word": "hi", "colour": "red"})},
			`x: step 1 "Draw" (create_svg_artifact): argument "colour" is not a parameter of create_svg_artifact (parameters: word, font_size, color)`},
		{"required parameter unbound", catalog.Workflow{ID: "x", Steps: svg(map[string]any{"color": "red"})},
			`x: step 1 "Draw" (create_svg_artifact): create_svg_artifact requires "word", which is bound to nothing`},
		{"type mismatch", catalog.Workflow{ID: "x", Inputs: []catalog.WorkflowInput{{Path: "size", Type: "boolean"}},
			Steps: svg(map[string]any{"word": "hi", "font_size": "{{inputs.size}}"})},
			`x: step 1 "Draw" (create_svg_artifact): argument font_size: input size is boolean, but parameter font_size is number`},
		{"unused input", catalog.Workflow{ID: "x", Inputs: []catalog.WorkflowInput{{Path: "extra"}}, Steps: svg(map[string]any{"word": "hi"})},
			`x: input extra is bound to no step argument`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := catalog.New(demoCaps(t), []catalog.Workflow{tt.wf})
			errs := c.WorkflowErrors()
			if len(errs) != 1 || !errors.Is(errs[0], catalog.ErrInvalidWorkflow) || !strings.Contains(errs[0].Error(), tt.want) {
				t.Fatalf("WorkflowErrors() = %v, want one ErrInvalidWorkflow containing %q", errs, tt.want)
			}
			if _, ok := c.Lookup("workflow_x"); ok {
				t.Errorf("Lookup(workflow_x) found a tool, want the template left out")
			}
		})
	}
}

func TestLoadWorkflows(t *testing.T) {
	t.Parallel()
	wfs := demoWorkflows(t)
	var ids []string
	for _, w := range wfs {
		ids = append(ids, w.ID)
	}
	if diff := cmp.Diff([]string{"flange_drawing", "publish_word", "word_to_png"}, ids); diff != "" {
		t.Errorf("LoadWorkflows() ids mismatch (-want +got):\n%s", diff)
	}

	bad := []struct {
		name, body string
	}{
		{"no id", `{"steps":[{"skill":"a"}]}`},
		{"no steps", `{"id":"x"}`},
		{"bad type", `{"id":"x","inputs":[{"path":"p","type":"date"}],"steps":[{"skill":"a"}]}`},
		{"undeclared input", `{"id":"x","steps":[{"skill":"a","arguments":{"w":"{{inputs.word}}"}}]}`},
		{"unknown key", `{"id":"x","input":[{"path":"w"}],"steps":[{"skill":"a"}]}`},
		{"computed key", `{"id":"x","required_input_paths":[{"path":"w"}],"steps":[{"skill":"a"}]}`},
		{"numeric step id", `{"id":"x","steps":[{"id":"1","skill":"a"}]}`},
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

// docs/design.md §3.5 input_sources: a step's argument bound to a workflow input has
// that input's source; what the template supplies is the platform's.
func TestStepSources(t *testing.T) {
	t.Parallel()
	wf := catalog.Workflow{ID: "s", Steps: []catalog.WorkflowStep{{Skill: "a", Arguments: map[string]any{
		"material": "{{inputs.drawing.material}}", "holes": "{{inputs.drawing.holes}}", "od": "{{inputs.od}}",
		"label": "{{inputs.od}} mm", "channel": "web", "id": "{{steps.0.artifact}}"}}}}
	got := wf.StepSources(0, map[string]string{"drawing.material": "user", "drawing.holes": "model"})
	want := map[string]string{"material": "user", "holes": "model", "od": "model", "label": "context", "channel": "context", "id": "context"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("StepSources() mismatch (-want +got):\n%s", diff)
	}
}

func TestStepArguments(t *testing.T) {
	t.Parallel()
	byID := map[string]catalog.Workflow{}
	for _, w := range demoWorkflows(t) {
		byID[w.ID] = w
	}
	embedded := catalog.Workflow{ID: "e", Inputs: []catalog.WorkflowInput{{Path: "n", Type: "integer"}, {Path: "opt", Type: "string"}},
		Steps: []catalog.WorkflowStep{
			{Skill: "a", Arguments: map[string]any{"label": "{{inputs.n}} holes", "opt": "{{ inputs.opt }}", "fixed": 3.5}},
			{Skill: "b", Arguments: map[string]any{"ids": []any{"{{steps.0.artifacts.1}}"}, "title": "of {{inputs.opt}}"}},
		}}
	// Step outputs beyond artifacts: the summary and the structured result.
	outputs := catalog.Workflow{ID: "o", Steps: []catalog.WorkflowStep{
		{ID: "flange", Skill: "a"},
		{Skill: "b", Arguments: map[string]any{"holes": "{{steps.flange.result.holes}}", "word": "{{steps.flange.result.spec.material}} flange",
			"all": "{{steps.flange.result}}", "note": "{{steps.flange.summary}}", "id": "{{steps.flange.artifact}}"}},
	}}
	flangeOut := []catalog.StepOutput{{Artifacts: []string{"art_d"}, Summary: "drew it",
		Result: map[string]any{"holes": float64(6), "spec": map[string]any{"material": "brass"}}}}
	tests := []struct {
		name      string
		wf        catalog.Workflow
		step      int
		inputs    map[string]any
		artifacts [][]string
		outputs   []catalog.StepOutput
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
		{name: "summary and result paths keep their JSON types", wf: outputs, step: 1, outputs: flangeOut,
			want: map[string]any{"holes": float64(6), "word": "brass flange", "all": flangeOut[0].Result, "note": "drew it", "id": "art_d"}},
		{name: "a result without the path", wf: outputs, step: 1, outputs: []catalog.StepOutput{{Artifacts: []string{"x"}, Result: map[string]any{}}}, wantErr: true},
		{name: "pending steps are placeholders", wf: outputs, step: 1, outputs: catalog.PendingOutputs(2),
			want: map[string]any{"holes": catalog.Placeholder("<result.holes of step 1>"), "word": "<result.spec.material of step 1> flange",
				"all": catalog.Placeholder("<result of step 1>"), "note": catalog.Placeholder("<summary of step 1>"), "id": catalog.Placeholder("<artifact 1 of step 1>")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			outs := tt.outputs
			for _, ids := range tt.artifacts {
				outs = append(outs, catalog.StepOutput{Artifacts: ids})
			}
			got, err := tt.wf.StepArguments(tt.step, tt.inputs, outs)
			if (err != nil) != tt.wantErr {
				t.Fatalf("StepArguments() error = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("StepArguments() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
