package catalog_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/clientagent/clientagent/pkg/catalog"
)

// FuzzWorkflowTemplate feeds arbitrary template files and call inputs
// through loading, compiling against the demo skills, the tool's
// validation, planning and argument resolution: a broken template is an
// ErrInvalidWorkflow, never a panic, and a template that compiles resolves
// any inputs to arguments or a clear error.
func FuzzWorkflowTemplate(f *testing.F) {
	caps := demoCaps(f)
	seeds, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "workflows", "*.json"))
	for _, s := range seeds {
		tpl, _ := os.ReadFile(s)
		f.Add(tpl, []byte(`{"word":"hi","drawing.holes":6,"drawing.outer_diameter_mm":120,"channel":"web"}`))
	}
	f.Add([]byte(`{"id":"x","inputs":[{"path":"a"}],"steps":[{"id":"s","skill":"create_svg_artifact","arguments":{"word":"{{inputs.a}} {{steps.s.result.x}}"}}]}`), []byte(`{"a":{"b":[1,2]}}`))
	f.Add([]byte(`{"id":"y","steps":[{"skill":"create_svg_artifact","arguments":{"word":"w"}},{"skill":"convert_svg_to_png","arguments":{"artifact_id":"{{steps.0.result.a.b}}","width":"{{steps.0.summary}}"}}]}`), []byte(`null`))
	f.Fuzz(func(t *testing.T, tpl, inputs []byte) {
		wfs, err := catalog.LoadWorkflows(fstest.MapFS{"w.json": {Data: tpl}}, ".")
		if err != nil {
			if !errors.Is(err, catalog.ErrInvalidWorkflow) {
				t.Fatalf("LoadWorkflows() error %v does not wrap ErrInvalidWorkflow", err)
			}
			return
		}
		c := catalog.New(caps, wfs)
		for _, err := range c.WorkflowErrors() {
			if !errors.Is(err, catalog.ErrInvalidWorkflow) {
				t.Fatalf("WorkflowErrors() %v does not wrap ErrInvalidWorkflow", err)
			}
		}
		var in map[string]any
		_ = json.Unmarshal(inputs, &in)
		for _, w := range c.Workflows() {
			e, ok := c.Lookup(catalog.WorkflowToolName(w.ID))
			if !ok {
				t.Fatalf("Workflows() lists %s but Lookup() does not find its tool", w.ID)
			}
			_ = e.Validate(in)
			_ = e.Workflow.Plan(in)
			outs := []catalog.StepOutput{}
			for i := range e.Workflow.Steps {
				_, _ = e.Workflow.StepArguments(i, in, outs)
				_ = e.Workflow.StepSources(i, map[string]string{"a": "user"})
				outs = append(outs, catalog.StepOutput{Artifacts: []string{"art_1"}, Summary: "s", Result: in})
			}
		}
	})
}
