package catalog_test

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/llm"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata")

// demoCaps loads the demo skills' capabilities (testdata/capabilities.json).
func demoCaps(t testing.TB) []catalog.Capability {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "capabilities.json"))
	if err != nil {
		t.Fatal(err)
	}
	var caps []catalog.Capability
	if err := json.Unmarshal(b, &caps); err != nil {
		t.Fatal(err)
	}
	return caps
}

func demoWorkflows(t *testing.T) []catalog.Workflow {
	t.Helper()
	wfs, err := catalog.LoadWorkflows(os.DirFS(filepath.Join("..", "..", "testdata", "workflows")), ".")
	if err != nil {
		t.Fatalf("LoadWorkflows() error = %v", err)
	}
	return wfs
}

// goldenTool is a ToolDefinition with its parameters decoded, so the golden
// file is readable and compared structurally.
type goldenTool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Parameters  any    `json:"parameters"`
}

func toGolden(t *testing.T, defs []llm.ToolDefinition) []goldenTool {
	t.Helper()
	out := make([]goldenTool, 0, len(defs))
	for _, d := range defs {
		var p any
		if err := json.Unmarshal(d.Parameters, &p); err != nil {
			t.Fatalf("tool %s parameters are not JSON: %v", d.Name, err)
		}
		out = append(out, goldenTool{Name: d.Name, Description: d.Description, Parameters: p})
	}
	return out
}

// docs/design.md §3.2: the tools the model sees for the demo skills and templates.
func TestTools_Golden(t *testing.T) {
	t.Parallel()
	c := catalog.New(demoCaps(t), demoWorkflows(t))
	got := toGolden(t, c.Tools())
	path := filepath.Join("testdata", "tools.golden.json")
	if *update {
		b, err := json.MarshalIndent(got, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create it): %v", err)
	}
	var want []goldenTool
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Tools() mismatch (-want +got):\n%s", diff)
	}
}

// docs/design.md §3.2: skills by tool name, then workflows, then ask_user.
func TestTools_Order(t *testing.T) {
	t.Parallel()
	caps := demoCaps(t)
	// Reverse the input: the order must not depend on it.
	for i, j := 0, len(caps)-1; i < j; i, j = i+1, j-1 {
		caps[i], caps[j] = caps[j], caps[i]
	}
	wfs := demoWorkflows(t)
	wfs[0], wfs[1] = wfs[1], wfs[0]
	c := catalog.New(caps, wfs)
	var got []string
	for _, d := range c.Tools() {
		got = append(got, d.Name)
	}
	want := []string{
		"convert_svg_to_png", "create_svg_artifact", "design_valve_flange", "publish_artifact",
		"workflow_flange_drawing", "workflow_publish_word", "workflow_word_to_png", "ask_user",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Tools() names mismatch (-want +got):\n%s", diff)
	}
}

func toolParams(t *testing.T, c *catalog.Catalog, name string) (string, map[string]any) {
	t.Helper()
	for _, d := range c.Tools() {
		if d.Name == name {
			var p map[string]any
			if err := json.Unmarshal(d.Parameters, &p); err != nil {
				t.Fatal(err)
			}
			return d.Description, p
		}
	}
	t.Fatalf("no tool %s", name)
	return "", nil
}

// docs/design.md §3.2: each rule of a skill tool's schema and description.
func TestSkillTool_Rules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cap      catalog.Capability
		wantDesc []string // substrings of the description
		noDesc   []string // must not appear
		want     map[string]any
	}{
		{
			name: "vendor keywords stripped recursively, property names kept",
			cap: catalog.Capability{Tool: "t", Description: "d", SkillExtension: catalog.SkillExtension{InputSchema: json.RawMessage(`{
				"type":"object","x-owner":"team",
				"properties":{
					"x_offset":{"type":"number","x_unit":"mm"},
					"opts":{"type":"object","x_group":"a","properties":{"k":{"type":"string","x-hint":"h"}}},
					"list":{"type":"array","items":{"type":"string","x_artifact_kind":"svg"}},
					"either":{"anyOf":[{"type":"string","x_a":1},{"type":"number"}]}
				}}`)}},
			want: map[string]any{"type": "object", "properties": map[string]any{
				"x_offset": map[string]any{"type": "number"},
				"opts":     map[string]any{"type": "object", "properties": map[string]any{"k": map[string]any{"type": "string"}}},
				"list":     map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
				"either":   map[string]any{"anyOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}},
			}},
		},
		{
			name: "artifact reference described, existing description kept",
			cap: catalog.Capability{Tool: "t", Description: "d", SkillExtension: catalog.SkillExtension{InputSchema: json.RawMessage(`{
				"type":"object","properties":{
					"src":{"type":"string","x_artifact_ref":true},
					"other":{"type":"string","x-artifact-ref":true,"description":"The mask."}},
				"required":["src"]}`)}},
			want: map[string]any{"type": "object", "required": []any{"src"}, "properties": map[string]any{
				"src":   map[string]any{"type": "string", "description": "artifact_id of an existing conversation artifact"},
				"other": map[string]any{"type": "string", "description": "The mask. artifact_id of an existing conversation artifact"},
			}},
		},
		{
			name: "artifacts, conversation_id and x_context removed, also from required",
			cap: catalog.Capability{Tool: "t", Description: "d", SkillExtension: catalog.SkillExtension{InputSchema: json.RawMessage(`{
				"type":"object","properties":{
					"q":{"type":"string"},
					"artifacts":{"type":"array"},
					"conversation_id":{"type":"string"},
					"user":{"type":"string","x_context":"user_id"}},
				"required":["q","artifacts","conversation_id","user"]}`)}},
			want: map[string]any{"type": "object", "required": []any{"q"}, "properties": map[string]any{
				"q": map[string]any{"type": "string"},
			}},
		},
		{
			name: "user input not required, model told never to invent it",
			cap: catalog.Capability{Tool: "t", Description: "Design.", SkillExtension: catalog.SkillExtension{
				UserInput:   []string{"material"},
				InputSchema: json.RawMessage(`{"type":"object","properties":{"holes":{"type":"integer"},"material":{"type":"string"}},"required":["holes","material"]}`)}},
			wantDesc: []string{"Design.", "Never invent material: leave it out if the user has not given it; the user will be asked."},
			noDesc:   []string{"Never invent holes"},
			want: map[string]any{"type": "object", "required": []any{"holes"}, "properties": map[string]any{
				"holes": map[string]any{"type": "integer"}, "material": map[string]any{"type": "string"},
			}},
		},
		{
			name: "approval and usage notes in the description",
			cap: catalog.Capability{Tool: "t", Description: "Publish.", SkillExtension: catalog.SkillExtension{
				RequiresApproval: true, UsageNotes: "Only finished work.",
				InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)}},
			wantDesc: []string{"Publish.\nOnly finished work.\nRequires user approval before it runs."},
			want:     map[string]any{"type": "object", "properties": map[string]any{}},
		},
		{
			name:     "unavailable skill says so",
			cap:      catalog.Capability{Tool: "t", Description: "Draw.", Unavailable: true, SkillExtension: catalog.SkillExtension{InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)}},
			wantDesc: []string{"(currently unavailable)"},
			noDesc:   []string{"Requires user approval"},
			want:     map[string]any{"type": "object", "properties": map[string]any{}},
		},
		{
			name: "type object and properties ensured",
			cap:  catalog.Capability{Tool: "t", Description: "d", SkillExtension: catalog.SkillExtension{InputSchema: json.RawMessage(`{"x_version":2}`)}},
			want: map[string]any{"type": "object", "properties": map[string]any{}},
		},
		{
			name: "plain skill gets the text input",
			cap:  catalog.Capability{Tool: "t", Description: "d", Plain: true},
			want: map[string]any{"type": "object", "required": []any{"input"}, "properties": map[string]any{
				"input": map[string]any{"type": "string", "description": "What to ask the agent, in plain text."},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := catalog.New([]catalog.Capability{tt.cap}, nil)
			desc, got := toolParams(t, c, tt.cap.Tool)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Tools() parameters mismatch (-want +got):\n%s", diff)
			}
			for _, s := range tt.wantDesc {
				if !strings.Contains(desc, s) {
					t.Errorf("Tools() description = %q, want it to contain %q", desc, s)
				}
			}
			for _, s := range tt.noDesc {
				if strings.Contains(desc, s) {
					t.Errorf("Tools() description = %q, want no %q", desc, s)
				}
			}
		})
	}
}

// docs/design.md §3.2: names are ^[a-zA-Z0-9_-]{1,64}$ and unique in a catalog.
func TestNew_DedupesToolNames(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object","properties":{}}`)
	caps := []catalog.Capability{
		{Tool: "draw", SkillID: "draw", Agent: "b", SkillExtension: catalog.SkillExtension{InputSchema: schema}},
		{Tool: "draw", SkillID: "draw", Agent: "a", SkillExtension: catalog.SkillExtension{InputSchema: schema}},
		{Tool: "ask_user", SkillID: "ask_user", Agent: "c", SkillExtension: catalog.SkillExtension{InputSchema: schema}},
		{Tool: "", SkillID: "render pdf/v2", Agent: "d", SkillExtension: catalog.SkillExtension{InputSchema: schema}},
	}
	c := catalog.New(caps, nil)
	got := c.Names()
	want := []string{"ask_user_2", "draw", "draw_2", "render_pdf_v2", "ask_user"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Names() mismatch (-want +got):\n%s", diff)
	}
	e, ok := c.Lookup("draw")
	if !ok || e.Capability.Agent != "a" {
		t.Errorf("Lookup(draw) = %+v, %v, want agent a (sorted by agent)", e.Capability, ok)
	}
}

// docs/design.md §3.2: Lookup tells skill, workflow and ask_user apart.
func TestLookup(t *testing.T) {
	t.Parallel()
	c := catalog.New(demoCaps(t), demoWorkflows(t))
	tests := []struct {
		tool     string
		wantOK   bool
		wantKind catalog.EntryKind
		wantID   string
	}{
		{"publish_artifact", true, catalog.EntrySkill, "publish_artifact"},
		{"workflow_word_to_png", true, catalog.EntryWorkflow, "word_to_png"},
		{"ask_user", true, catalog.EntryAskUser, ""},
		{"make_coffee", false, "", ""},
	}
	for _, tt := range tests {
		e, ok := c.Lookup(tt.tool)
		if ok != tt.wantOK || e.Kind != tt.wantKind {
			t.Errorf("Lookup(%s) = %s, %v, want %s, %v", tt.tool, e.Kind, ok, tt.wantKind, tt.wantOK)
		}
		id := e.Capability.SkillID + e.Workflow.ID
		if id != tt.wantID {
			t.Errorf("Lookup(%s) id = %q, want %q", tt.tool, id, tt.wantID)
		}
	}
	if e, _ := c.Lookup("publish_artifact"); !e.RequiresApproval {
		t.Errorf("Lookup(publish_artifact).RequiresApproval = false, want true")
	}
}

// docs/api/openapi.yaml GET /v1/catalog.
func TestSkillsAndWorkflows(t *testing.T) {
	t.Parallel()
	c := catalog.New(demoCaps(t), demoWorkflows(t))
	skills := c.Skills()
	var names []string
	for _, s := range skills {
		names = append(names, s.Name)
		if s.Name == "publish_artifact" && !s.RequiresApproval {
			t.Errorf("Skills() publish_artifact requires_approval = false, want true")
		}
		if strings.Contains(string(s.InputSchema), "x_") {
			t.Errorf("Skills() %s input_schema = %s, want no vendor keywords", s.Name, s.InputSchema)
		}
	}
	if diff := cmp.Diff([]string{"convert_svg_to_png", "create_svg_artifact", "design_valve_flange", "publish_artifact"}, names); diff != "" {
		t.Errorf("Skills() names mismatch (-want +got):\n%s", diff)
	}
	wf := c.Workflows()
	if len(wf) != 3 || wf[0].ID != "flange_drawing" || len(wf[0].Inputs) != 3 || wf[1].ID != "publish_word" || !wf[1].RequiresApproval || wf[2].ID != "word_to_png" {
		t.Fatalf("Workflows() = %+v, want flange_drawing (3 inputs), publish_word, word_to_png", wf)
	}
	b, err := json.Marshal(wf[2])
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"word_to_png","name":"Word to PNG","description":"Render a word as an SVG image and convert it to a PNG.","inputs":[{"path":"word","type":"string","description":"The word to render."}],"steps":[{"name":"Draw the word","skill":"create_svg_artifact"},{"name":"Convert to PNG","skill":"convert_svg_to_png"}]}`
	if string(b) != want {
		t.Errorf("Workflows()[2] JSON = %s, want %s", b, want)
	}
}

func TestArgumentsHash(t *testing.T) {
	t.Parallel()
	a := catalog.ArgumentsHash(map[string]any{"holes": 6, "material": "steel", "x": map[string]any{"b": 1, "a": "<"}})
	b := catalog.ArgumentsHash(map[string]any{"x": map[string]any{"a": "<", "b": 1.0}, "material": "steel", "holes": float64(6)})
	if a != b {
		t.Errorf("ArgumentsHash() differs for the same arguments: %s vs %s", a, b)
	}
	if c := catalog.ArgumentsHash(map[string]any{"holes": 7, "material": "steel", "x": map[string]any{"b": 1, "a": "<"}}); c == a {
		t.Errorf("ArgumentsHash() equal for different arguments")
	}
	if len(a) != 64 {
		t.Errorf("ArgumentsHash() = %q, want 64 hex chars", a)
	}
	if catalog.ArgumentsHash(nil) != catalog.ArgumentsHash(map[string]any{}) {
		t.Errorf("ArgumentsHash(nil) != ArgumentsHash({})")
	}
}
