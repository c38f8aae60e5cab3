package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/turn/turnlambda"
	"github.com/clientagent/clientagent/pkg/wire"
)

// workflowAnswerer is a model that only writes the final answer from a
// workflow's result, and counts on the platform for everything before it.
func workflowAnswerer() *model {
	return &model{decide: func(req llm.Request) *llm.Response {
		for id, r := range toolResults(req) {
			if strings.HasPrefix(id, "call_wf_") || strings.HasPrefix(id, "wf") {
				if e, ok := r["error"].(string); ok {
					return answer("workflow " + r["status"].(string) + ": " + e)
				}
				return answer("workflow " + r["status"].(string))
			}
		}
		return answer("no workflow result")
	}}
}

// startWorkflow posts a message body and returns the new turn's id.
func (c *client) startWorkflow(cid string, body map[string]any) string {
	c.t.Helper()
	var out struct {
		TurnID string `json:"turn_id"`
	}
	if code := c.do("POST", "/v1/conversations/"+cid+"/messages", body, &out); code != http.StatusAccepted {
		c.t.Fatalf("POST %v = %d, want 202", body, code)
	}
	return out.TurnID
}

// pngOf returns the PNG artifact of v, failing the test without one.
func (c *client) pngOf(cid string, v wire.Turn) {
	c.t.Helper()
	for _, a := range v.Artifacts {
		if a.MimeType == "image/png" {
			if ink := inkFraction(c.downloadPNG(cid, a.ID)); ink < 0.01 {
				c.t.Errorf("PNG %s ink = %.3f, want the word drawn", a.ID, ink)
			}
			return
		}
	}
	c.t.Fatalf("turn artifacts = %+v, want a PNG", v.Artifacts)
}

// Issue 8 acceptance, docs/design.md §3.4: the text-to-PNG workflow started from the
// catalog with its input runs as a synthetic call (no LLM routing
// decision): exactly 1 LLM call, the final answer, and a PNG.
func TestWorkflowFromCatalog(t *testing.T) {
	t.Parallel()
	m := workflowAnswerer()
	_, c := stack(t, m)
	var cat struct {
		Workflows []catalog.WorkflowInfo `json:"workflows"`
	}
	if code := c.do("GET", "/v1/catalog", nil, &cat); code != http.StatusOK {
		t.Fatalf("GET /v1/catalog = %d", code)
	}
	var wf *catalog.WorkflowInfo
	for i := range cat.Workflows {
		if cat.Workflows[i].ID == "word_to_png" {
			wf = &cat.Workflows[i]
		}
	}
	if wf == nil || len(wf.Inputs) != 1 || wf.Inputs[0].Path != "word" || wf.Inputs[0].Type != "string" {
		t.Fatalf("catalog workflow word_to_png = %+v, want one string input word", wf)
	}
	cid := c.newConversation()
	tid := c.startWorkflow(cid, map[string]any{"text": "", "workflow": map[string]any{"id": "word_to_png", "inputs": map[string]any{"word": "Flow"}}})
	v := c.wait(cid, tid)
	if v.Status != "succeeded" || v.Reply != "workflow succeeded" || v.LLMCalls != 1 || len(v.Artifacts) != 2 {
		t.Fatalf("turn = %s %q, %d LLM calls, %d artifacts; want succeeded with 1 LLM call and the SVG and PNG", v.Status, v.Reply, v.LLMCalls, len(v.Artifacts))
	}
	c.pngOf(cid, v)
	if reqs := m.requests(); len(reqs) != 1 || !strings.Contains(lastUser(reqs[0]), "word_to_png") {
		t.Errorf("LLM requests = %d, want 1 whose user message names the workflow", len(reqs))
	}
}

// Issue 8 acceptance, docs/design.md §3.4: a selection without an input pauses with
// a typed form for it (there is no model to tell), the answer runs the
// workflow; "/workflow <id>" without text is the same selection.
func TestWorkflowMissingInputAsksForm(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]map[string]any{
		"workflow field":   {"text": "", "workflow": map[string]any{"id": "word_to_png"}},
		"slash command":    {"text": "/workflow word_to_png"},
		"empty inputs too": {"workflow": map[string]any{"id": "word_to_png", "inputs": map[string]any{}}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := workflowAnswerer()
			_, c := stack(t, m)
			cid := c.newConversation()
			tid := c.startWorkflow(cid, body)
			v := c.wait(cid, tid)
			if v.Status != "awaiting_input" || v.Form == nil || len(v.Form.Calls) != 1 {
				t.Fatalf("turn = %s form %+v, want awaiting_input with one call's form", v.Status, v.Form)
			}
			f := v.Form.Calls[0]
			if f.Tool != "workflow_word_to_png" || len(f.Fields) != 1 || f.Fields[0].Name != "word" || f.Fields[0].Type != "string" || !f.Fields[0].Required {
				t.Fatalf("form = %+v, want the required string field word of workflow_word_to_png", f)
			}
			if v.LLMCalls != 0 {
				t.Errorf("LLM calls before the form = %d, want 0", v.LLMCalls)
			}
			if code := c.input(cid, tid, map[string]any{"answers": map[string]any{f.CallID: map[string]any{"word": "Formed"}}}); code != http.StatusAccepted {
				t.Fatalf("answer = %d", code)
			}
			v = c.wait(cid, tid)
			if v.Status != "succeeded" || v.LLMCalls != 1 {
				t.Fatalf("turn = %s %q with %d LLM calls, want succeeded with 1", v.Status, v.Reply, v.LLMCalls)
			}
			c.pngOf(cid, v)
		})
	}
}

// Issue 8 acceptance, docs/design.md §3.4: "/workflow <id> some text" is a hint: the
// model fills the workflow's inputs from the text (here the offline demo
// model, as `make run` has it).
func TestWorkflowFreeTextModelFillsInputs(t *testing.T) {
	t.Parallel()
	_, c := stack(t, nil)
	cid := c.newConversation()
	tid := c.startWorkflow(cid, map[string]any{"text": "/workflow word_to_png please render Hinted"})
	v := c.wait(cid, tid)
	if v.Status != "succeeded" || v.LLMCalls != 2 || !strings.Contains(v.Reply, "Word to PNG finished") {
		t.Fatalf("turn = %s %q with %d LLM calls, want succeeded after 2 (fill the inputs, answer)", v.Status, v.Reply, v.LLMCalls)
	}
	c.pngOf(cid, v)
	var conv struct {
		History []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"history"`
	}
	c.do("GET", "/v1/conversations/"+cid, nil, &conv)
	if len(conv.History) == 0 || conv.History[0].Content != "/workflow word_to_png please render Hinted" {
		t.Errorf("history = %+v, want the user's own text first", conv.History)
	}
	for _, e := range c.historyOf(cid) {
		if args, ok := e["arguments"].(map[string]any); ok && e["tool"] == "workflow_word_to_png" && args["word"] != "Hinted" {
			t.Errorf("workflow call arguments = %v, want word Hinted from the text", args)
		}
	}
}

// Issue 8 acceptance: a failing step is reported with the step's name and
// the specialist's message; templates come from the configured folder.
func TestWorkflowFailingStepIsNamed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tpl := `{"id": "badge", "name": "Badge", "description": "A coloured word as PNG.",
	  "inputs": [{"path": "word"}, {"path": "style.color", "description": "Text colour."}],
	  "steps": [
	    {"id": "svg", "name": "Draw the badge", "skill": "create_svg_artifact", "arguments": {"word": "{{inputs.word}}", "color": "{{inputs.style.color}}"}},
	    {"id": "png", "name": "Rasterize", "skill": "convert_svg_to_png", "arguments": {"artifact_id": "{{steps.svg.artifact}}"}}
	  ]}`
	writeTemplate(t, dir, "badge.json", tpl)
	_, c := stack(t, workflowAnswerer(), func(cfg *Config) { cfg.WorkflowsDir = dir })
	cid := c.newConversation()
	tid := c.startWorkflow(cid, map[string]any{"workflow": map[string]any{"id": "badge", "inputs": map[string]any{"word": "Hi", "style.color": "ultraviolet"}}})
	v := c.wait(cid, tid)
	step, msg := `workflow failed: workflow badge step 1 "Draw the badge" (create_svg_artifact) failed: `, `color "ultraviolet" is not supported`
	if v.Status != "succeeded" || !strings.HasPrefix(v.Reply, step) || !strings.Contains(v.Reply, msg) {
		t.Fatalf("turn = %s %q, want the answer to start with %q and give the specialist's %q", v.Status, v.Reply, step, msg)
	}
	if len(v.Artifacts) != 0 {
		t.Errorf("artifacts = %+v, want none", v.Artifacts)
	}

	// The same template runs through both steps with a colour it knows.
	tid = c.startWorkflow(cid, map[string]any{"workflow": map[string]any{"id": "badge", "inputs": map[string]any{"word": "Hi", "style.color": "navy"}}})
	if v = c.wait(cid, tid); v.Status != "succeeded" || v.Reply != "workflow succeeded" {
		t.Fatalf("turn = %s %q, want succeeded", v.Status, v.Reply)
	}
	c.pngOf(cid, v)
}

// Issue 8: what cannot start is a 4xx with a message, before any turn.
func TestWorkflowSelectionErrors(t *testing.T) {
	t.Parallel()
	_, c := stack(t, workflowAnswerer())
	cid := c.newConversation()
	tests := []struct {
		name       string
		body       map[string]any
		code, want string
	}{
		{"slash without id", map[string]any{"text": "/workflow"}, "invalid_workflow", "usage: /workflow <id> [text]; workflows: flange_drawing, publish_word, word_to_png"},
		{"unknown id", map[string]any{"text": "/workflow nope"}, "unknown_workflow", "no workflow nope; workflows: flange_drawing, publish_word, word_to_png"},
		{"both ways", map[string]any{"text": "/workflow word_to_png", "workflow": map[string]any{"id": "word_to_png"}}, "invalid_workflow", "not both"},
		{"wrong input type", map[string]any{"workflow": map[string]any{"id": "flange_drawing", "inputs": map[string]any{"drawing.holes": "six"}}},
			"invalid_workflow_inputs", "drawing.holes"},
		{"unknown input", map[string]any{"workflow": map[string]any{"id": "word_to_png", "inputs": map[string]any{"word": "a", "colour": "red"}}},
			"invalid_workflow_inputs", "colour"},
	}
	for _, tt := range tests {
		var out struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		code := c.do("POST", "/v1/conversations/"+cid+"/messages", tt.body, &out)
		if code != http.StatusBadRequest || out.Error.Code != tt.code || !strings.Contains(out.Error.Message, tt.want) {
			t.Errorf("%s: POST = %d %s %q, want 400 %s containing %q", tt.name, code, out.Error.Code, out.Error.Message, tt.code, tt.want)
		}
	}
	var list struct {
		Turns []any `json:"turns"`
	}
	if c.do("GET", "/v1/conversations/"+cid, nil, &list); len(list.Turns) != 0 {
		t.Errorf("turns = %d, want none started by refused selections", len(list.Turns))
	}
}

// Issue 8: a template whose bindings do not resolve stops the stack at
// start with an error naming the file, the step and the binding; one that
// names an unknown skill is left out of the catalog with its reason.
func TestWorkflowCompileErrorsAtLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := `{"id": "broken", "inputs": [{"path": "word"}], "steps": [{"id": "svg", "skill": "create_svg_artifact", "arguments": {"word": "{{inputs.wrod}}"}}]}`
	writeTemplate(t, dir, "broken.json", bad)
	_, err := Start(t.Context(), Config{Addr: "127.0.0.1:0", DataDir: t.TempDir(), WorkflowsDir: dir})
	want := `broken.json: invalid workflow template: broken: step 1 "svg" (create_svg_artifact): unresolved binding {{inputs.wrod}}: no input "wrod" is declared (inputs: word)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Start() error = %v, want it to contain %q", err, want)
	}

	unknown := `{"id": "paint", "inputs": [{"path": "word"}], "steps": [{"name": "Paint", "skill": "paint_picture", "arguments": {"subject": "{{inputs.word}}"}}]}`
	writeTemplate(t, dir, "broken.json", unknown)
	st, c := stack(t, nil, func(cfg *Config) { cfg.WorkflowsDir = dir })
	banner := st.Banner("test")
	if !strings.Contains(banner, `left out:  invalid workflow template: paint: step 1 "Paint" (paint_picture): unknown skill "paint_picture"`) {
		t.Errorf("Banner() = %q, want the left-out template and why", banner)
	}
	var cat struct {
		Workflows []catalog.WorkflowInfo `json:"workflows"`
	}
	if c.do("GET", "/v1/catalog", nil, &cat); len(cat.Workflows) != 0 {
		t.Errorf("catalog workflows = %+v, want none", cat.Workflows)
	}
}

// Issue 8: the second demo template shows a form: flange_drawing's material
// is a user-input field of its skill, so even with the other inputs given
// the selection pauses for it; the answer produces the drawing.
func TestFlangeWorkflowAsksMaterial(t *testing.T) {
	t.Parallel()
	_, c := stack(t, workflowAnswerer())
	cid := c.newConversation()
	tid := c.startWorkflow(cid, map[string]any{"workflow": map[string]any{"id": "flange_drawing", "inputs": map[string]any{"drawing.holes": 6, "drawing.outer_diameter_mm": 140}}})
	v := c.wait(cid, tid)
	if v.Status != "awaiting_input" || v.Form == nil || len(v.Form.Calls) != 1 || len(v.Form.Calls[0].Fields) != 1 {
		t.Fatalf("turn = %s form %+v, want awaiting_input for one field", v.Status, v.Form)
	}
	if f := v.Form.Calls[0].Fields[0]; f.Name != "drawing.material" || len(f.Enum) != 4 {
		t.Fatalf("form field = %+v, want drawing.material with the skill's 4 materials", f)
	}
	if code := c.input(cid, tid, map[string]any{"answers": map[string]any{v.Form.Calls[0].CallID: map[string]any{"drawing.material": "stainless"}}}); code != http.StatusAccepted {
		t.Fatalf("answer = %d", code)
	}
	if v = c.wait(cid, tid); v.Status != "succeeded" || v.Reply != "workflow succeeded" || len(v.Artifacts) != 1 || v.LLMCalls != 1 {
		t.Fatalf("turn = %s %q, %d artifacts, %d LLM calls; want succeeded with the drawing after 1 LLM call", v.Status, v.Reply, len(v.Artifacts), v.LLMCalls)
	}
}

// docs/design.md §3.2, §3.4: the user is never asked for an artifact reference, not
// even for a workflow they started: the synthetic call's error result
// sends the model to the catalog, and the model picks the artifact.
func TestWorkflowSelectionMissingArtifactGoesToModel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tpl := `{"id": "svg_to_png", "name": "SVG to PNG", "description": "Rasterize an SVG.",
	  "inputs": [{"path": "source"}],
	  "steps": [{"id": "png", "name": "Rasterize", "skill": "convert_svg_to_png", "arguments": {"artifact_id": "{{inputs.source}}"}}]}`
	writeTemplate(t, dir, "svg_to_png.json", tpl)
	idRe := regexp.MustCompile(`art_[0-9a-f]+`)
	m := &model{decide: func(req llm.Request) *llm.Response {
		res := toolResults(req)
		if r, ok := res["w2"]; ok {
			return answer("png: " + r["status"].(string))
		}
		for id, r := range res {
			if e, _ := r["error"].(string); strings.HasPrefix(id, "call_wf_") && strings.Contains(e, "missing required artifact reference") {
				if art := idRe.FindString(e); art != "" {
					return calls(call("w2", "workflow_svg_to_png", map[string]any{"source": art}))
				}
			}
		}
		return answer("stuck")
	}}
	_, c := stack(t, m, func(cfg *Config) { cfg.WorkflowsDir = dir })
	cid := c.newConversation()
	up := c.upload(cid, "box.svg", "image/svg+xml", boxSVG)
	tid := c.startWorkflow(cid, map[string]any{"text": "/workflow svg_to_png", "files": []string{up}})
	v := c.wait(cid, tid)
	if v.Status != "succeeded" || v.Reply != "png: succeeded" || v.Form != nil || v.LLMCalls != 2 {
		t.Fatalf("turn = %s %q form %+v, %d LLM calls; want succeeded without a form after 2 LLM calls", v.Status, v.Reply, v.Form, v.LLMCalls)
	}
	if len(v.Artifacts) != 1 || v.Artifacts[0].MimeType != "image/png" {
		t.Errorf("artifacts = %+v, want the PNG", v.Artifacts)
	}
	if u := lastUser(m.requests()[0]); !strings.Contains(u, up) {
		t.Errorf("user message %q does not name the file uploaded with the selection", u)
	}
}

// Seed 003 "plan approve/reject", docs/design.md §3.3: a workflow with a step that
// needs approval waits, before anything runs, with its plan: every step
// with the arguments it will get. Rejected, nothing runs; approved, the
// whole chain runs and publishes once.
func TestWorkflowPlanApproval(t *testing.T) {
	t.Parallel()
	st, c := stack(t, workflowAnswerer())
	cid := c.newConversation()
	start := func() (string, wire.Turn) {
		tid := c.startWorkflow(cid, map[string]any{"text": "", "workflow": map[string]any{"id": "publish_word", "inputs": map[string]any{"word": "Planned", "channel": "web"}}})
		return tid, c.wait(cid, tid)
	}
	tid, v := start()
	if v.Status != "awaiting_approval" || v.Approval == nil || len(v.Approval.Calls) != 1 {
		t.Fatalf("turn = %s approval %+v, want awaiting_approval for one call", v.Status, v.Approval)
	}
	want := []catalog.PlanStep{
		{Name: "Draw the word", Skill: "create_svg_artifact", Arguments: map[string]any{"word": "Planned"}},
		{Name: "Convert to PNG", Skill: "convert_svg_to_png", Arguments: map[string]any{"artifact_id": "<artifact 1 of step 1>"}},
		{Name: "Publish", Skill: "publish_artifact", Arguments: map[string]any{"artifact_id": "<artifact 1 of step 2>", "channel": "web"}},
	}
	if diff := cmp.Diff(want, v.Approval.Calls[0].Steps); diff != "" {
		t.Fatalf("approval plan mismatch (-want +got):\n%s", diff)
	}
	if len(v.Artifacts) != 0 {
		t.Errorf("artifacts before approval = %+v, want none: nothing runs before the plan is approved", v.Artifacts)
	}

	if code := c.decide(cid, tid, "reject", map[string]any{"note": "not today"}); code != http.StatusAccepted {
		t.Fatalf("reject = %d", code)
	}
	if v = c.wait(cid, tid); v.Status != "succeeded" || !strings.HasPrefix(v.Reply, "workflow rejected") || len(v.Artifacts) != 0 {
		t.Fatalf("rejected turn = %s %q, %d artifacts; want the rejection reported and nothing run", v.Status, v.Reply, len(v.Artifacts))
	}

	tid, v = start()
	if code := c.decide(cid, tid, "approve", nil); code != http.StatusAccepted {
		t.Fatalf("approve = %d (%s)", code, v.Status)
	}
	if v = c.wait(cid, tid); v.Status != "succeeded" || v.Reply != "workflow succeeded" || len(v.Artifacts) != 2 {
		t.Fatalf("approved turn = %s %q, %d artifacts; want succeeded with the SVG and PNG", v.Status, v.Reply, len(v.Artifacts))
	}
	if pubs := st.Publications.List(); len(pubs) != 1 {
		t.Errorf("publications = %d, want 1", len(pubs))
	}
}

// A workflow longer than one invoke Lambda's time runs on through the
// state machine: the invoke step stops after step 1 (WorkflowContinuesError),
// the InvokeCall state retries it by name, and the retry runs step 2 only.
// The invoke function gets a Lambda's deadline here, as on AWS.
func TestWorkflowContinuesThroughStateMachineRetry(t *testing.T) {
	t.Parallel()
	st, c := stack(t, workflowAnswerer())
	h := st.Platform.Handlers
	h.CallTimeout = time.Hour // each specialist call may take an hour; the Lambda has ten minutes
	invoke := turnlambda.JSON(h.Invoke)
	st.Engine.RegisterFunction(functionNames["InvokeFunction"], func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		return invoke(ctx, payload)
	})
	cid := c.newConversation()
	tid := c.startWorkflow(cid, map[string]any{"workflow": map[string]any{"id": "word_to_png", "inputs": map[string]any{"word": "Resumed"}}})
	v := c.wait(cid, tid)
	if v.Status != "succeeded" || v.Reply != "workflow succeeded" || len(v.Artifacts) != 2 || v.LLMCalls != 1 {
		t.Fatalf("turn = %s %q, %d artifacts, %d LLM calls; want succeeded with the SVG and PNG after 1 LLM call", v.Status, v.Reply, len(v.Artifacts), v.LLMCalls)
	}
	c.pngOf(cid, v)
	hist, err := st.history(t.Context(), tid)
	if err != nil {
		t.Fatal(err)
	}
	var continued int
	for _, e := range hist {
		if d := e.TaskFailedEventDetails; e.Type == "TaskFailed" && d != nil && d.Error == "WorkflowContinuesError" {
			continued++
		}
	}
	if got := countHistory(hist); continued != 1 || got.Lambdas != 6 {
		t.Errorf("history: %d WorkflowContinuesError, %d Lambda invocations; want 1 and 6 (the invoke step twice)", continued, got.Lambdas)
	}
}

// docs/design.md §3.3 input-required inside a workflow: a step's specialist that asks
// for more input pauses the workflow call with the specialist's form (the
// finished steps kept); the answer continues that specialist's task and the
// workflow goes on. Here the flange is too small for 24 holes.
func TestWorkflowStepInputRequiredPauses(t *testing.T) {
	t.Parallel()
	_, c := stack(t, workflowAnswerer())
	cid := c.newConversation()
	tid := c.startWorkflow(cid, map[string]any{"workflow": map[string]any{"id": "flange_drawing",
		"inputs": map[string]any{"drawing.holes": 24, "drawing.outer_diameter_mm": 60, "drawing.material": "steel"}}})
	v := c.wait(cid, tid)
	if v.Status != "awaiting_input" || v.Form == nil || len(v.Form.Calls) != 1 {
		t.Fatalf("turn = %s %q form %+v, want the specialist's question as a form", v.Status, v.Reply, v.Form)
	}
	f := v.Form.Calls[0]
	if f.Tool != "workflow_flange_drawing" || !strings.Contains(f.Note, `step 1 "Design the flange" (design_valve_flange) of workflow flange_drawing asks:`) {
		t.Fatalf("form = %+v, want the workflow call's form naming the step", f)
	}
	var field bool
	for _, fl := range f.Fields {
		field = field || fl.Name == "outer_diameter_mm"
	}
	if !field {
		t.Fatalf("form fields = %+v, want outer_diameter_mm", f.Fields)
	}
	if code := c.input(cid, tid, map[string]any{"answers": map[string]any{f.CallID: map[string]any{"outer_diameter_mm": 1200}}}); code != http.StatusAccepted {
		t.Fatalf("answer = %d", code)
	}
	if v = c.wait(cid, tid); v.Status != "succeeded" || v.Reply != "workflow succeeded" || len(v.Artifacts) != 1 || v.LLMCalls != 1 {
		t.Fatalf("turn = %s %q, %d artifacts, %d LLM calls; want succeeded with the drawing after 1 LLM call", v.Status, v.Reply, len(v.Artifacts), v.LLMCalls)
	}
	var summary string
	for _, e := range c.historyOf(cid) {
		if e["tool"] == "workflow_flange_drawing" {
			summary += fmt.Sprint(e["content"])
		}
	}
	if !strings.Contains(summary, "1200") {
		t.Errorf("workflow result %q, want the drawing made with the answered diameter 1200", summary)
	}
}

// Issue 8: a step's arguments may be bound to earlier steps' outputs
// beyond artifacts: here the SVG step draws the material the flange step
// reports in its structured result.
func TestWorkflowBindsEarlierStepResult(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tpl := `{"id": "flange_label", "name": "Flange label", "description": "A flange and a label of its material.",
	  "inputs": [{"path": "holes"}, {"path": "od"}, {"path": "material"}],
	  "steps": [
	    {"id": "flange", "name": "Design", "skill": "design_valve_flange", "arguments": {"holes": "{{inputs.holes}}", "outer_diameter_mm": "{{inputs.od}}", "material": "{{inputs.material}}"}},
	    {"id": "label", "name": "Label", "skill": "create_svg_artifact", "arguments": {"word": "{{steps.flange.result.material}}"}}
	  ]}`
	writeTemplate(t, dir, "flange_label.json", tpl)
	_, c := stack(t, workflowAnswerer(), func(cfg *Config) { cfg.WorkflowsDir = dir })
	cid := c.newConversation()
	tid := c.startWorkflow(cid, map[string]any{"workflow": map[string]any{"id": "flange_label", "inputs": map[string]any{"holes": 6, "od": 150, "material": "brass"}}})
	v := c.wait(cid, tid)
	if v.Status != "succeeded" || v.Reply != "workflow succeeded" || len(v.Artifacts) != 2 {
		t.Fatalf("turn = %s %q, %d artifacts; want succeeded with the drawing and the label", v.Status, v.Reply, len(v.Artifacts))
	}
	if name := v.Artifacts[1].Name; name != "brass.svg" {
		t.Errorf("label artifact = %q, want brass.svg (the flange step's material)", name)
	}
}

// writeTemplate puts a workflow template file into dir.
func writeTemplate(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
