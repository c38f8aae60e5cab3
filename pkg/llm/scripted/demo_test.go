package scripted_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/scripted"
	"github.com/google/go-cmp/cmp"
)

// demoTools are the demo specialists' skills as the platform offers them.
var demoTools = []llm.ToolDefinition{
	{Name: "create_svg_artifact", Parameters: json.RawMessage(`{"type":"object","properties":{"word":{"type":"string"}},"required":["word"]}`)},
	{Name: "convert_svg_to_png", Parameters: json.RawMessage(`{"type":"object","properties":{"artifact_id":{"type":"string"}},"required":["artifact_id"]}`)},
	{Name: "design_valve_flange", Parameters: json.RawMessage(`{"type":"object","properties":{"holes":{"type":"integer"},"outer_diameter_mm":{"type":"number"},"material":{"type":"string"}},"required":["holes","outer_diameter_mm"]}`)},
	{Name: "publish_artifact", Parameters: json.RawMessage(`{"type":"object","properties":{"artifact_id":{"type":"string"},"channel":{"type":"string"}},"required":["artifact_id","channel"]}`)},
}

// fakePlatform answers a call with a compact tool result (docs/design.md §3.5), the
// way the orchestrator would after running the specialist.
type fakePlatform func(call llm.ToolCall, n int) string

func succeeded(call llm.ToolCall, n int) string {
	var args map[string]any
	_ = json.Unmarshal([]byte(call.Arguments), &args)
	r := map[string]any{"status": "succeeded", "summary": "done"}
	switch call.Name {
	case "create_svg_artifact":
		r["artifacts"] = []map[string]any{{"artifact_id": fmt.Sprintf("svg%d", n), "name": fmt.Sprintf("%v.svg", args["word"]), "mime_type": "image/svg+xml"}}
	case "convert_svg_to_png":
		r["artifacts"] = []map[string]any{{"artifact_id": fmt.Sprintf("png%d", n), "name": "word.png", "mime_type": "image/png"}}
	case "design_valve_flange":
		// material came from the form (docs/design.md §3.5 input_sources).
		r["artifacts"] = []map[string]any{{"artifact_id": fmt.Sprintf("fl%d", n), "name": "flange.svg", "mime_type": "image/svg+xml"}}
		r["inputs"] = map[string]any{"material": "steel"}
		r["input_sources"] = map[string]any{"holes": "model", "outer_diameter_mm": "model", "material": "user"}
	case "publish_artifact":
		r["summary"] = "published at https://example.test/p/1"
	}
	b, _ := json.Marshal(r)
	return string(b)
}

func withStatus(tool, result string) fakePlatform {
	return func(call llm.ToolCall, n int) string {
		if call.Name == tool {
			return result
		}
		return succeeded(call, n)
	}
}

// drive runs the demo model like the loop does (docs/design.md §2): it appends every
// assistant message and one result per call, until a final text. It
// returns the calls of each step as "name args" and the final text.
func drive(t *testing.T, p llm.Provider, system, user string, history []llm.Message, tools []llm.ToolDefinition, platform fakePlatform) ([][]string, string) {
	t.Helper()
	msgs := append(append([]llm.Message(nil), history...), llm.Message{Role: llm.RoleUser, Content: user})
	var steps [][]string
	n := 0
	for range 10 {
		res, err := p.Complete(t.Context(), llm.Request{System: "rules", Context: system, Messages: msgs, Tools: tools})
		if err != nil {
			t.Fatalf("Complete() error = %v", err)
		}
		if len(res.ToolCalls) == 0 {
			return steps, res.Text
		}
		msgs = append(msgs, res.AssistantMessage())
		var step []string
		seen := map[string]bool{}
		for _, c := range res.ToolCalls {
			if seen[c.ID] || !strings.HasPrefix(c.ID, "call_") {
				t.Errorf("tool call id %q is duplicate or malformed", c.ID)
			}
			seen[c.ID] = true
			step = append(step, c.Name+" "+c.Arguments)
		}
		for _, c := range res.ToolCalls {
			n++
			msgs = append(msgs, llm.ToolResultMessage(c.ID, platform(c, n)))
		}
		steps = append(steps, step)
	}
	t.Fatalf("demo model did not finish within 10 steps: %v", steps)
	return nil, ""
}

const catalogPrompt = `You are the client agent.

Artifacts in this conversation:
- artifact_id=a_old name=old.svg mime_type=image/svg+xml
- artifact_id=a_png name=word.png mime_type=image/png
- artifact_id=a_new name=flange.svg mime_type=image/svg+xml description=A flange

Recent skill inputs:
- create_svg_artifact: {"word":"Hi"}
- design_valve_flange: {"holes":4,"material":"steel","outer_diameter_mm":120}`

func TestDemo(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		system    string
		user      string
		tools     []llm.ToolDefinition // nil: demoTools
		platform  fakePlatform         // nil: every call succeeds
		wantSteps [][]string
		wantFinal []string // substrings of the final text
		wantExact string   // the whole final text, when set
	}{
		{
			name: "docs/design.md §2: PNG with a word chains svg then png",
			user: "Create a PNG image with the word Popelnase",
			wantSteps: [][]string{
				{`create_svg_artifact {"word":"Popelnase"}`},
				{`convert_svg_to_png {"artifact_id":"svg1"}`},
			},
			wantFinal: []string{"Here is the PNG image with the word Popelnase.", "png2"},
		},
		{
			name:      "SVG only stops after the SVG",
			user:      "Create an SVG with the word Hello",
			wantSteps: [][]string{{`create_svg_artifact {"word":"Hello"}`}},
			wantFinal: []string{"SVG image with the word Hello", "svg1"},
		},
		{
			name:      "quoted words",
			user:      `Create a png with the text "Hello World"`,
			wantSteps: [][]string{{`create_svg_artifact {"word":"Hello World"}`}, {`convert_svg_to_png {"artifact_id":"svg1"}`}},
			wantFinal: []string{"Hello World", "png2"},
		},
		{
			name:      "valve: no material, the platform asks for it (docs/design.md §3.3)",
			user:      "Design a valve flange with 4 holes",
			wantSteps: [][]string{{`design_valve_flange {"holes":4,"outer_diameter_mm":120}`}},
			wantFinal: []string{"4 holes", "material steel", "fl1"},
		},
		{
			name:      "redo uses recent skill inputs from the system prompt (docs/design.md §3.5)",
			system:    catalogPrompt,
			user:      "Redo the valve with 6 holes",
			wantSteps: [][]string{{`design_valve_flange {"holes":6,"material":"steel","outer_diameter_mm":120}`}},
			wantFinal: []string{"6 holes"},
		},
		{
			name:      "redo without recent inputs starts fresh",
			user:      "Redo the valve with six holes",
			wantSteps: [][]string{{`design_valve_flange {"holes":6,"outer_diameter_mm":120}`}},
			wantFinal: []string{"6 holes"},
		},
		{
			name:      "publish the newest catalog artifact",
			system:    catalogPrompt,
			user:      "Publish it to web",
			wantSteps: [][]string{{`publish_artifact {"artifact_id":"a_new","channel":"web"}`}},
			wantFinal: []string{"Published a_new to web"},
		},
		{
			name:      "issue 28: a publish edited on approval is told as it ran, once",
			system:    catalogPrompt,
			user:      "Publish it to web",
			platform:  withStatus("publish_artifact", `{"status":"succeeded","summary":"Published flange.svg to the print channel as pub_1.","inputs":{"artifact_id":"a_new","channel":"print"}}`),
			wantSteps: [][]string{{`publish_artifact {"artifact_id":"a_new","channel":"web"}`}},
			wantExact: "Published flange.svg to the print channel as pub_1.",
		},
		{
			name:      "publish the newest PNG when the text says PNG",
			system:    catalogPrompt,
			user:      "Publish the PNG to the archive.",
			wantSteps: [][]string{{`publish_artifact {"artifact_id":"a_png","channel":"archive"}`}},
			wantFinal: []string{"Published a_png to archive"},
		},
		{
			name:      "publish rejected is not published",
			system:    catalogPrompt,
			user:      "Publish it to web",
			platform:  withStatus("publish_artifact", `{"status":"rejected","summary":"The user rejected the call."}`),
			wantSteps: [][]string{{`publish_artifact {"artifact_id":"a_new","channel":"web"}`}},
			wantFinal: []string{"Not published", "rejected"},
		},
		{
			name:      "publish with nothing to publish",
			system:    "Artifacts in this conversation:\nnone yet",
			user:      "Publish it to web",
			wantFinal: []string{"no artifact"},
		},
		{
			name: "three pictures in one batch (docs/design.md §3.3 parallel)",
			user: "Make three pictures: cat, dog and bird",
			wantSteps: [][]string{{
				`create_svg_artifact {"word":"cat"}`,
				`create_svg_artifact {"word":"dog"}`,
				`create_svg_artifact {"word":"bird"}`,
			}},
			wantFinal: []string{"3 pictures", "cat: cat.svg (artifact_id svg1)", "dog: dog.svg (artifact_id svg2)", "bird: bird.svg (artifact_id svg3)"},
		},
		{
			name: "svg list",
			user: "svg A, B and C",
			wantSteps: [][]string{{
				`create_svg_artifact {"word":"A"}`,
				`create_svg_artifact {"word":"B"}`,
				`create_svg_artifact {"word":"C"}`,
			}},
			wantFinal: []string{"3 pictures"},
		},
		{
			name:      "failed result is quoted, no retry",
			user:      "Create a PNG image with the word Popelnase",
			platform:  withStatus("convert_svg_to_png", `{"status":"failed","error":"rasterizer crashed"}`),
			wantSteps: [][]string{{`create_svg_artifact {"word":"Popelnase"}`}, {`convert_svg_to_png {"artifact_id":"svg1"}`}},
			wantFinal: []string{"convert_svg_to_png", "rasterizer crashed"},
		},
		{
			name:      "validation error result is quoted",
			user:      "Design a valve flange with 40 holes",
			platform:  withStatus("design_valve_flange", `{"status":"failed","error":"holes: must be <= 24"}`),
			wantSteps: [][]string{{`design_valve_flange {"holes":40,"outer_diameter_mm":120}`}},
			wantFinal: []string{"holes: must be <= 24"},
		},
		{
			name:      "tool not offered",
			user:      "Create a PNG image with the word X",
			tools:     []llm.ToolDefinition{},
			wantFinal: []string{"create_svg_artifact", "not offered"},
		},
		{
			name:      "anything else: says it is the demo model and how to configure one",
			user:      "What is the weather in Berlin?",
			wantFinal: []string{"offline demo model", "OPENAI_BASE_URL", "OPENAI_API_KEY", "CLIENTAGENT_MODEL", "CLIENTAGENT_LLM=bedrock", "Popelnase"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tools := tt.tools
			if tools == nil {
				tools = demoTools
			}
			platform := tt.platform
			if platform == nil {
				platform = succeeded
			}
			p := scripted.Demo()
			steps, final := drive(t, p, tt.system, tt.user, nil, tools, platform)
			if diff := cmp.Diff(tt.wantSteps, steps); diff != "" {
				t.Errorf("Demo() tool calls mismatch (-want +got):\n%s", diff)
			}
			for _, w := range tt.wantFinal {
				if !strings.Contains(final, w) {
					t.Errorf("Demo() final text = %q, want it to contain %q", final, w)
				}
			}
			if tt.wantExact != "" && final != tt.wantExact {
				t.Errorf("Demo() final text = %q, want %q", final, tt.wantExact)
			}
			if got, want := p.Calls(), len(tt.wantSteps)+1; got != want {
				t.Errorf("Demo() LLM calls = %d, want %d", got, want)
			}
		})
	}
}

// A new user message starts over: results of an earlier turn do not count
// as this turn's results.
func TestDemoSecondTurnStartsOver(t *testing.T) {
	t.Parallel()
	p := scripted.Demo()
	history := []llm.Message{
		{Role: llm.RoleUser, Content: "Create a PNG image with the word One"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_x_0", Name: "create_svg_artifact", Arguments: `{"word":"One"}`}}},
		llm.ToolResultMessage("call_x_0", `{"status":"failed","error":"old failure"}`),
		{Role: llm.RoleAssistant, Content: "create_svg_artifact did not succeed"},
	}
	steps, final := drive(t, p, "", "Create a PNG image with the word Two", history, demoTools, succeeded)
	want := [][]string{{`create_svg_artifact {"word":"Two"}`}, {`convert_svg_to_png {"artifact_id":"svg1"}`}}
	if diff := cmp.Diff(want, steps); diff != "" {
		t.Errorf("Demo() tool calls mismatch (-want +got):\n%s", diff)
	}
	if !strings.Contains(final, "word Two") {
		t.Errorf("Demo() final = %q, want the PNG answer for Two", final)
	}
	// The first request of the turn differs from the first turn's, so call ids differ.
	reqs := p.Requests()
	if len(reqs) != 3 || len(reqs[2].Messages) != len(history)+5 {
		t.Errorf("Requests() = %d requests, want 3 with the growing transcript", len(reqs))
	}
}

// The demo does not loop when a result never arrives in the expected shape.
func TestDemoIsBounded(t *testing.T) {
	t.Parallel()
	p := scripted.Demo()
	odd := func(llm.ToolCall, int) string { return "not json at all" }
	_, final := drive(t, p, "", "Create a PNG image with the word Z", nil, demoTools, odd)
	if final == "" {
		t.Errorf("Demo() final text empty, want an explanation")
	}
}

// Issue 28: "it" is the artifact the transcript names last, even when the
// platform's catalog lists an older one after it; a workflow's end is
// told once, by its summary.
func TestDemoNewestAndWorkflowWording(t *testing.T) {
	t.Parallel()
	p := scripted.Demo()
	history := []llm.Message{
		{Role: llm.RoleUser, Content: "Create an SVG with the word Latest"},
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "create_svg_artifact", Arguments: `{"word":"Latest"}`}}},
		llm.ToolResultMessage("c1", `{"status":"succeeded","summary":"done","artifacts":[{"artifact_id":"a_latest","name":"Latest.svg","mime_type":"image/svg+xml"}]}`),
		{Role: llm.RoleAssistant, Content: "Here is the SVG image with the word Latest. Artifact: Latest.svg (artifact_id a_latest)."},
	}
	// The catalog names a_latest first and an older upload after it.
	system := "Artifacts in this conversation:\n- artifact_id=a_latest name=Latest.svg mime_type=image/svg+xml\n- artifact_id=a_upload name=old.svg mime_type=image/svg+xml\n"
	steps, _ := drive(t, p, system, "Publish it to web", history, demoTools, succeeded)
	if len(steps) == 0 || steps[0][0] != `publish_artifact {"artifact_id":"a_latest","channel":"web"}` {
		t.Errorf("Demo() published %v, want the newest artifact a_latest", steps)
	}

	wf := []llm.ToolDefinition{{Name: "workflow_word_to_png", Parameters: json.RawMessage(`{"type":"object","properties":{"word":{"type":"string"}}}`)}}
	result := `{"status":"succeeded","summary":"Workflow Word to PNG finished 2 steps.\nsvg: made Hi.svg\npng: made Hi.png","artifacts":[{"artifact_id":"a1","name":"Hi.svg"},{"artifact_id":"a2","name":"Hi.png"}]}`
	_, final := drive(t, scripted.Demo(), "", "Run the workflow_word_to_png with the word Hi: call the tool workflow_word_to_png", nil, wf, func(llm.ToolCall, int) string { return result })
	if strings.Count(final, "finished") != 1 || strings.Count(final, "Hi.png") != 1 {
		t.Errorf("Demo() workflow end = %q, want it said once, each artifact named once", final)
	}
}
