package batch_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/catalog/batch"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/schemaerr"
)

// ctxSkill is a test skill whose schema asks the platform for values
// (x_context, conversation_id) and takes attached artifacts.
var ctxSkill = catalog.Capability{
	Tool: "summarize_thread", SkillID: "summarize_thread", Description: "Summarize.",
	SkillExtension: catalog.SkillExtension{InputSchema: json.RawMessage(`{
		"type":"object",
		"properties":{
			"topic":{"type":"string"},
			"conversation_id":{"type":"string"},
			"owner":{"type":"string","x_context":"user_id"},
			"tenant":{"type":"string","x_context":"tenant_id"},
			"artifacts":{"type":"array"}
		},
		"required":["topic","conversation_id","owner","artifacts"]}`)},
}

// tenantSkill needs a runtime input the test Env cannot fill.
var tenantSkill = catalog.Capability{
	Tool: "bill_tenant", SkillID: "bill_tenant", Description: "Bill.",
	SkillExtension: catalog.SkillExtension{InputSchema: json.RawMessage(`{
		"type":"object","properties":{"tenant":{"type":"string","x_context":"tenant_id"}},"required":["tenant"]}`)},
}

// demoCaps are the demo skills' capabilities (pkg/catalog/testdata).
func demoCaps(t *testing.T) []catalog.Capability {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "capabilities.json"))
	if err != nil {
		t.Fatal(err)
	}
	var caps []catalog.Capability
	if err := json.Unmarshal(b, &caps); err != nil {
		t.Fatal(err)
	}
	return caps
}

func demoCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	caps := demoCaps(t)
	wfs, err := catalog.LoadWorkflows(os.DirFS(filepath.Join("..", "..", "..", "testdata", "workflows")), ".")
	if err != nil {
		t.Fatal(err)
	}
	return catalog.New(append(caps, ctxSkill, tenantSkill), wfs)
}

func demoEnv() catalog.Env {
	return catalog.NewEnv([]artifact.Artifact{
		{ID: "a1", Name: "popelnase.svg", MimeType: "image/svg+xml"},
	}, map[string]any{"conversation_id": "c1", "user_id": "dev", "turn_id": "t1"})
}

func call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: args}
}

// docs/design.md §3.3: every validation rule, one call each.
func TestValidate_Rules(t *testing.T) {
	t.Parallel()
	c := demoCatalog(t)
	env := demoEnv()
	flangeForm := []catalog.FormField{{Name: "material", Type: "string", Description: "Flange material.", Required: true,
		Enum: []string{"steel", "stainless", "brass", "pvc"}}}
	tests := []struct {
		name      string
		call      llm.ToolCall
		want      record.PendingCall
		wantError []string // substrings of Error
		// argsFromCall: the call's arguments come back as given (ask_user).
		argsFromCall bool
	}{
		{
			name: "unknown tool names it and close tools",
			call: call("c1", "create_svg", `{"word":"x"}`),
			want: record.PendingCall{CallID: "c1", Tool: "create_svg", Kind: record.KindInvalid, State: record.CallInvalid},
			wantError: []string{`unknown tool "create_svg"`, "Did you mean create_svg_artifact?", "Available tools: bill_tenant, convert_svg_to_png,",
				"ask_user."},
		},
		{
			name:      "arguments error from the provider",
			call:      llm.ToolCall{ID: "c1", Name: "create_svg_artifact", Arguments: `{"word":`, ArgumentsError: "unexpected end of JSON input"},
			want:      record.PendingCall{CallID: "c1", Tool: "create_svg_artifact", Kind: record.KindSkill, State: record.CallInvalid},
			wantError: []string{"malformed JSON arguments: unexpected end of JSON input"},
		},
		{
			name:      "arguments not an object",
			call:      call("c1", "create_svg_artifact", `["Popelnase"]`),
			want:      record.PendingCall{CallID: "c1", Tool: "create_svg_artifact", Kind: record.KindSkill, State: record.CallInvalid},
			wantError: []string{"malformed JSON arguments: arguments are an array, not a JSON object"},
		},
		{
			name: "schema violation names field and reason",
			call: call("c1", "design_valve_flange", `{"holes":2,"outer_diameter_mm":"big"}`),
			want: record.PendingCall{CallID: "c1", Tool: "design_valve_flange", Kind: record.KindSkill, State: record.CallInvalid,
				Arguments: map[string]any{"holes": 2.0, "outer_diameter_mm": "big"},
				Sources:   map[string]string{"holes": "model", "outer_diameter_mm": "model"}},
			wantError: []string{"invalid arguments for design_valve_flange", "holes: must be >= 3", "outer_diameter_mm: expected number"},
		},
		{
			name: "schema violation of a required field",
			call: call("c1", "create_svg_artifact", `{"font_size":12}`),
			want: record.PendingCall{CallID: "c1", Tool: "create_svg_artifact", Kind: record.KindSkill, State: record.CallInvalid,
				Arguments: map[string]any{"font_size": 12.0}, Sources: map[string]string{"font_size": "model"}},
			wantError: []string{"arguments: missing properties: 'word'"},
		},
		{
			name: "unknown artifact id lists the known ones",
			call: call("c1", "convert_svg_to_png", `{"artifact_id":"a9"}`),
			want: record.PendingCall{CallID: "c1", Tool: "convert_svg_to_png", Kind: record.KindSkill, State: record.CallInvalid,
				Arguments: map[string]any{"artifact_id": "a9"}, Sources: map[string]string{"artifact_id": "model"}},
			wantError: []string{"unknown artifact id a9", "known artifacts: a1 (popelnase.svg, image/svg+xml), or call the skill that produces one first"},
		},
		{
			name: "missing artifact reference sends the model upstream, never a form",
			call: call("c1", "convert_svg_to_png", `{"width":64}`),
			want: record.PendingCall{CallID: "c1", Tool: "convert_svg_to_png", Kind: record.KindSkill, State: record.CallInvalid,
				Arguments: map[string]any{"width": 64.0}, Sources: map[string]string{"width": "model"}},
			wantError: []string{"missing required artifact reference artifact_id", "a1 (popelnase.svg", "first call the skill that produces one"},
		},
		{
			name: "missing runtime input",
			call: call("c1", "bill_tenant", `{}`),
			want: record.PendingCall{CallID: "c1", Tool: "bill_tenant", Kind: record.KindSkill, State: record.CallInvalid,
				Arguments: map[string]any{}, Sources: map[string]string{}},
			wantError: []string{"missing runtime input tenant", `"tenant_id"`},
		},
		{
			name: "context values filled, model's guess replaced, artifacts left to the orchestrator",
			call: call("c1", "summarize_thread", `{"topic":"valves","conversation_id":"made-up","artifacts":["x"]}`),
			want: record.PendingCall{CallID: "c1", Tool: "summarize_thread", Kind: record.KindSkill, State: record.CallReady,
				Arguments: map[string]any{"topic": "valves", "conversation_id": "c1", "owner": "dev"},
				Sources:   map[string]string{"topic": "model", "conversation_id": "context", "owner": "context"}},
		},
		{
			name: "missing user input opens a typed form",
			call: call("c1", "design_valve_flange", `{"holes":6,"outer_diameter_mm":120}`),
			want: record.PendingCall{CallID: "c1", Tool: "design_valve_flange", Kind: record.KindSkill, State: record.CallNeedsInput,
				Arguments: map[string]any{"holes": 6.0, "outer_diameter_mm": 120.0},
				Sources:   map[string]string{"holes": "model", "outer_diameter_mm": "model"}, Form: flangeForm},
		},
		{
			name: "user input the model has is kept",
			call: call("c1", "design_valve_flange", `{"holes":6,"outer_diameter_mm":120,"material":"brass"}`),
			want: record.PendingCall{CallID: "c1", Tool: "design_valve_flange", Kind: record.KindSkill, State: record.CallReady,
				Arguments: map[string]any{"holes": 6.0, "outer_diameter_mm": 120.0, "material": "brass"},
				Sources:   map[string]string{"holes": "model", "outer_diameter_mm": "model", "material": "model"}},
		},
		{
			name: "user input the model has is still validated",
			call: call("c1", "design_valve_flange", `{"holes":6,"outer_diameter_mm":120,"material":"gold"}`),
			want: record.PendingCall{CallID: "c1", Tool: "design_valve_flange", Kind: record.KindSkill, State: record.CallInvalid,
				Arguments: map[string]any{"holes": 6.0, "outer_diameter_mm": 120.0, "material": "gold"},
				Sources:   map[string]string{"holes": "model", "outer_diameter_mm": "model", "material": "model"}},
			wantError: []string{"material: value must be one of"},
		},
		{
			name: "approval carries the hash of the exact arguments",
			call: call("c1", "publish_artifact", `{"artifact_id":"a1","channel":"web"}`),
			want: record.PendingCall{CallID: "c1", Tool: "publish_artifact", Kind: record.KindSkill, State: record.CallNeedsApproval,
				Arguments:    map[string]any{"artifact_id": "a1", "channel": "web"},
				Sources:      map[string]string{"artifact_id": "model", "channel": "model"},
				ApprovalHash: catalog.ArgumentsHash(map[string]any{"artifact_id": "a1", "channel": "web"})},
		},
		{
			name: "ask_user opens its questions as the form",
			call: call("c1", "ask_user", `{"questions":[{"name":"deadline","type":"string","description":"By when?","required":true},{"name":"size","type":"integer","description":"How many?","enum":["1","2"]}]}`),
			want: record.PendingCall{CallID: "c1", Tool: "ask_user", Kind: record.KindAskUser, State: record.CallNeedsInput,
				Form: []catalog.FormField{
					{Name: "deadline", Type: "string", Description: "By when?", Required: true},
					{Name: "size", Type: "integer", Description: "How many?", Enum: []string{"1", "2"}},
				}},
			argsFromCall: true,
		},
		{
			name:         "ask_user with a bad question type",
			call:         call("c1", "ask_user", `{"questions":[{"name":"d","type":"date","description":"When?"}]}`),
			want:         record.PendingCall{CallID: "c1", Tool: "ask_user", Kind: record.KindAskUser, State: record.CallInvalid},
			wantError:    []string{"questions[0].type: value must be one of"},
			argsFromCall: true,
		},
		{
			name: "workflow: flat inputs type checked",
			call: call("c1", "workflow_flange_drawing", `{"drawing.holes":"six","drawing.outer_diameter_mm":120}`),
			want: record.PendingCall{CallID: "c1", Tool: "workflow_flange_drawing", Kind: record.KindWorkflow, State: record.CallInvalid,
				Arguments: map[string]any{"drawing.holes": "six", "drawing.outer_diameter_mm": 120.0},
				Sources:   map[string]string{"drawing.holes": "model", "drawing.outer_diameter_mm": "model"}},
			wantError: []string{"drawing.holes: expected integer, but got string"},
		},
		{
			name: "workflow: user input opens a form",
			call: call("c1", "workflow_flange_drawing", `{"drawing.holes":6,"drawing.outer_diameter_mm":120}`),
			want: record.PendingCall{CallID: "c1", Tool: "workflow_flange_drawing", Kind: record.KindWorkflow, State: record.CallNeedsInput,
				Arguments: map[string]any{"drawing.holes": 6.0, "drawing.outer_diameter_mm": 120.0},
				Sources:   map[string]string{"drawing.holes": "model", "drawing.outer_diameter_mm": "model"},
				Form: []catalog.FormField{{Name: "drawing.material", Type: "string", Description: "Material of the flange.", Required: true,
					Enum: []string{"steel", "stainless", "brass", "pvc"}}}},
		},
		{
			name: "workflow: inputs checked against each step's skill schema",
			call: call("c1", "workflow_flange_drawing", `{"drawing.holes":2,"drawing.outer_diameter_mm":120}`),
			want: record.PendingCall{CallID: "c1", Tool: "workflow_flange_drawing", Kind: record.KindWorkflow, State: record.CallInvalid,
				Arguments: map[string]any{"drawing.holes": 2.0, "drawing.outer_diameter_mm": 120.0},
				Sources:   map[string]string{"drawing.holes": "model", "drawing.outer_diameter_mm": "model"}},
			wantError: []string{"invalid inputs for workflow_flange_drawing: step 1 \"Design the flange\" (design_valve_flange) would get holes: must be >= 3 but found 2"},
		},
		{
			name: "workflow: ready",
			call: call("c1", "workflow_word_to_png", `{"word":"Popelnase"}`),
			want: record.PendingCall{CallID: "c1", Tool: "workflow_word_to_png", Kind: record.KindWorkflow, State: record.CallReady,
				Arguments: map[string]any{"word": "Popelnase"}, Sources: map[string]string{"word": "model"}},
		},
		{
			name: "empty arguments are an empty object",
			call: call("c1", "create_svg_artifact", ``),
			want: record.PendingCall{CallID: "c1", Tool: "create_svg_artifact", Kind: record.KindSkill, State: record.CallInvalid,
				Arguments: map[string]any{}, Sources: map[string]string{}},
			wantError: []string{"missing properties: 'word'"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.argsFromCall {
				if err := json.Unmarshal([]byte(tt.call.Arguments), &tt.want.Arguments); err != nil {
					t.Fatal(err)
				}
				tt.want.Sources = map[string]string{}
				for k := range tt.want.Arguments {
					tt.want.Sources[k] = "model"
				}
			}
			got := batch.Validate(c, []llm.ToolCall{tt.call}, env)
			if len(got) != 1 {
				t.Fatalf("Validate() returned %d calls, want 1", len(got))
			}
			if diff := cmp.Diff(tt.want, got[0], cmpopts.IgnoreFields(record.PendingCall{}, "Error"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Validate() mismatch (-want +got):\n%s", diff)
			}
			if len(tt.wantError) == 0 && got[0].Error != "" {
				t.Errorf("Validate() error = %q, want none", got[0].Error)
			}
			for _, s := range tt.wantError {
				if !strings.Contains(got[0].Error, s) {
					t.Errorf("Validate() error = %q, want it to contain %q", got[0].Error, s)
				}
			}
		})
	}
}

// docs/design.md §3.3: calls keep their order; each is judged on its own.
func TestValidate_KeepsOrder(t *testing.T) {
	t.Parallel()
	c := demoCatalog(t)
	got := batch.Validate(c, []llm.ToolCall{
		call("c1", "create_svg_artifact", `{"word":"A"}`),
		call("c2", "nope", `{}`),
		call("c3", "design_valve_flange", `{"holes":6,"outer_diameter_mm":1}`),
	}, demoEnv())
	var states []string
	for _, pc := range got {
		states = append(states, pc.CallID+":"+string(pc.State))
	}
	want := []string{"c1:ready", "c2:invalid", "c3:needs_input"}
	if diff := cmp.Diff(want, states); diff != "" {
		t.Errorf("Validate() states mismatch (-want +got):\n%s", diff)
	}
}

// docs/design.md §3.3: batch rule — nothing runs until no call needs the user; forms
// come first, then approval.
func TestNextPause(t *testing.T) {
	t.Parallel()
	st := func(states ...record.CallState) []record.PendingCall {
		out := make([]record.PendingCall, len(states))
		for i, s := range states {
			out[i] = record.PendingCall{State: s}
		}
		return out
	}
	tests := []struct {
		name      string
		calls     []record.PendingCall
		wantKind  string
		wantIdx   []int
		wantReady bool
	}{
		{"all ready", st(record.CallReady, record.CallInvalid, record.CallRejected), "", nil, true},
		{"form before approval", st(record.CallNeedsApproval, record.CallNeedsInput, record.CallReady, record.CallNeedsInput), "input", []int{1, 3}, false},
		{"approval once forms are answered", st(record.CallNeedsApproval, record.CallReady, record.CallNeedsApproval), "approval", []int{0, 2}, false},
		{"answered ask_user does not block", st(record.CallAnswered, record.CallReady), "", nil, true},
		{"empty batch", nil, "", nil, true},
	}
	for _, tt := range tests {
		kind, idx := batch.NextPause(tt.calls)
		if kind != tt.wantKind {
			t.Errorf("%s: NextPause() kind = %q, want %q", tt.name, kind, tt.wantKind)
		}
		if diff := cmp.Diff(tt.wantIdx, idx); diff != "" {
			t.Errorf("%s: NextPause() idx mismatch (-want +got):\n%s", tt.name, diff)
		}
		if got := kind == ""; got != tt.wantReady {
			t.Errorf("%s: NextPause() ready = %v, want %v", tt.name, got, tt.wantReady)
		}
	}
}

// docs/design.md §3.3: form answers go through the same validation before the call runs.
func TestApplyAnswers(t *testing.T) {
	t.Parallel()
	c := demoCatalog(t)
	env := demoEnv()
	approvalFlange := catalog.Capability{Tool: "order_flange", Description: "Order.", SkillExtension: catalog.SkillExtension{
		RequiresApproval: true, UserInput: []string{"quantity", "express"},
		InputSchema: json.RawMessage(`{"type":"object","properties":{"quantity":{"type":"integer","minimum":1},"express":{"type":"boolean"}},"required":["quantity","express"]}`)}}
	cOrder := catalog.New([]catalog.Capability{approvalFlange}, nil)

	tests := []struct {
		name      string
		cat       *catalog.Catalog
		call      llm.ToolCall
		answers   map[string]any
		wantErr   error
		wantState record.CallState
		wantArgs  map[string]any
		wantSrc   map[string]string
	}{
		{
			name: "answer merged with source user, call ready",
			cat:  c, call: call("c1", "design_valve_flange", `{"holes":6,"outer_diameter_mm":120}`),
			answers:   map[string]any{"material": "brass"},
			wantState: record.CallReady,
			wantArgs:  map[string]any{"holes": 6.0, "outer_diameter_mm": 120.0, "material": "brass"},
			wantSrc:   map[string]string{"holes": "model", "outer_diameter_mm": "model", "material": "user"},
		},
		{
			name: "answer outside the enum is refused, call keeps waiting",
			cat:  c, call: call("c1", "design_valve_flange", `{"holes":6,"outer_diameter_mm":120}`),
			answers: map[string]any{"material": "gold"}, wantErr: batch.ErrInvalidAnswer, wantState: record.CallNeedsInput,
			wantArgs: map[string]any{"holes": 6.0, "outer_diameter_mm": 120.0},
			wantSrc:  map[string]string{"holes": "model", "outer_diameter_mm": "model"},
		},
		{
			name: "required answer left empty is refused",
			cat:  c, call: call("c1", "design_valve_flange", `{"holes":6,"outer_diameter_mm":120}`),
			answers: map[string]any{"material": " "}, wantErr: batch.ErrInvalidAnswer, wantState: record.CallNeedsInput,
			wantArgs: map[string]any{"holes": 6.0, "outer_diameter_mm": 120.0},
			wantSrc:  map[string]string{"holes": "model", "outer_diameter_mm": "model"},
		},
		{
			name: "unknown field is refused",
			cat:  c, call: call("c1", "design_valve_flange", `{"holes":6,"outer_diameter_mm":120}`),
			answers: map[string]any{"material": "pvc", "holes": 8}, wantErr: batch.ErrInvalidAnswer, wantState: record.CallNeedsInput,
			wantArgs: map[string]any{"holes": 6.0, "outer_diameter_mm": 120.0},
			wantSrc:  map[string]string{"holes": "model", "outer_diameter_mm": "model"},
		},
		{
			name: "strings coerced to the field type, then approval",
			cat:  cOrder, call: call("c1", "order_flange", `{}`),
			answers:   map[string]any{"quantity": "12", "express": "true"},
			wantState: record.CallNeedsApproval,
			wantArgs:  map[string]any{"quantity": 12.0, "express": true},
			wantSrc:   map[string]string{"quantity": "user", "express": "user"},
		},
		{
			name: "coerced answer still checked against the schema",
			cat:  cOrder, call: call("c1", "order_flange", `{}`),
			answers: map[string]any{"quantity": "0", "express": false}, wantErr: batch.ErrInvalidAnswer, wantState: record.CallNeedsInput,
			wantArgs: map[string]any{}, wantSrc: map[string]string{},
		},
		{
			name: "not a whole number",
			cat:  cOrder, call: call("c1", "order_flange", `{}`),
			answers: map[string]any{"quantity": "1.5", "express": false}, wantErr: batch.ErrInvalidAnswer, wantState: record.CallNeedsInput,
			wantArgs: map[string]any{}, wantSrc: map[string]string{},
		},
		{
			name: "ask_user answered",
			cat:  c, call: call("c1", "ask_user", `{"questions":[{"name":"count","type":"integer","description":"How many?","required":true}]}`),
			answers:   map[string]any{"count": "3"},
			wantState: record.CallAnswered,
			wantArgs: map[string]any{"questions": []any{map[string]any{"name": "count", "type": "integer", "description": "How many?", "required": true}},
				"answers": map[string]any{"count": 3.0}},
			wantSrc: map[string]string{"questions": "model", "answers": "user"},
		},
		{
			name: "workflow form answered",
			cat:  c, call: call("c1", "workflow_flange_drawing", `{"drawing.holes":6,"drawing.outer_diameter_mm":120}`),
			answers:   map[string]any{"drawing.material": "steel"},
			wantState: record.CallReady,
			wantArgs:  map[string]any{"drawing.holes": 6.0, "drawing.outer_diameter_mm": 120.0, "drawing.material": "steel"},
			wantSrc:   map[string]string{"drawing.holes": "model", "drawing.outer_diameter_mm": "model", "drawing.material": "user"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pc := batch.Validate(tt.cat, []llm.ToolCall{tt.call}, env)[0]
			if pc.State != record.CallNeedsInput {
				t.Fatalf("Validate() state = %s (%s), want needs_input", pc.State, pc.Error)
			}
			form := pc.Form
			err := batch.ApplyAnswers(tt.cat, &pc, tt.answers, env)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ApplyAnswers() error = %v, want %v", err, tt.wantErr)
			}
			if pc.State != tt.wantState {
				t.Errorf("ApplyAnswers() state = %s, want %s", pc.State, tt.wantState)
			}
			if diff := cmp.Diff(tt.wantArgs, pc.Arguments, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ApplyAnswers() arguments mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSrc, pc.Sources, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("ApplyAnswers() sources mismatch (-want +got):\n%s", diff)
			}
			if err != nil {
				if diff := cmp.Diff(form, pc.Form); diff != "" {
					t.Errorf("ApplyAnswers() failed but changed the form (-want +got):\n%s", diff)
				}
			} else if pc.Form != nil {
				t.Errorf("ApplyAnswers() form = %v, want none once answered", pc.Form)
			}
			if tt.wantState == record.CallNeedsApproval && pc.ApprovalHash != catalog.ArgumentsHash(pc.Arguments) {
				t.Errorf("ApplyAnswers() approval hash = %s, want hash of the merged arguments", pc.ApprovalHash)
			}
		})
	}
}

// A specialist's input-required form is checked against its own fields
// and continues the task.
func TestApplyAnswers_InputRequired(t *testing.T) {
	t.Parallel()
	c := demoCatalog(t)
	pc := record.PendingCall{CallID: "c1", Tool: "create_svg_artifact", Kind: record.KindSkill, State: record.CallNeedsInput,
		Arguments: map[string]any{"word": "A"}, Sources: map[string]string{"word": "model"},
		Form:     []catalog.FormField{{Name: "style", Type: "string", Required: true, Enum: []string{"serif", "sans"}}},
		FormNote: "Which style?", A2A: &record.A2ATask{TaskID: "t", ContextID: "x"}}
	if err := batch.ApplyAnswers(c, &pc, map[string]any{"style": "mono"}, demoEnv()); !errors.Is(err, batch.ErrInvalidAnswer) {
		t.Fatalf("ApplyAnswers(mono) error = %v, want ErrInvalidAnswer", err)
	}
	if err := batch.ApplyAnswers(c, &pc, map[string]any{"style": "sans"}, demoEnv()); err != nil {
		t.Fatalf("ApplyAnswers(sans) error = %v", err)
	}
	want := map[string]any{"word": "A", "style": "sans"}
	if diff := cmp.Diff(want, pc.Arguments); diff != "" || pc.State != record.CallReady || pc.Sources["style"] != "user" {
		t.Errorf("ApplyAnswers() = %s %v %v, want ready with style from user; diff:\n%s", pc.State, pc.Arguments, pc.Sources, diff)
	}
	if err := batch.ApplyAnswers(c, &pc, map[string]any{"style": "sans"}, demoEnv()); !errors.Is(err, batch.ErrNotWaiting) {
		t.Errorf("ApplyAnswers(again) error = %v, want ErrNotWaiting", err)
	}
}

// docs/design.md §8: an approval covers exactly the arguments shown.
func TestApplyDecision(t *testing.T) {
	t.Parallel()
	c := demoCatalog(t)
	fresh := func() record.PendingCall {
		return batch.Validate(c, []llm.ToolCall{call("c1", "publish_artifact", `{"artifact_id":"a1","channel":"web"}`)}, demoEnv())[0]
	}
	t.Run("approve", func(t *testing.T) {
		t.Parallel()
		pc := fresh()
		if err := batch.ApplyDecision(&pc, true, "ok"); err != nil {
			t.Fatalf("ApplyDecision() error = %v", err)
		}
		if pc.State != record.CallReady || !pc.Approved || pc.Note != "ok" {
			t.Errorf("ApplyDecision() = %s approved=%v note=%q, want ready, approved, ok", pc.State, pc.Approved, pc.Note)
		}
	})
	t.Run("changed arguments are not approved", func(t *testing.T) {
		t.Parallel()
		pc := fresh()
		pc.Arguments["channel"] = "print"
		if err := batch.ApplyDecision(&pc, true, ""); !errors.Is(err, batch.ErrApprovalStale) {
			t.Fatalf("ApplyDecision() error = %v, want ErrApprovalStale", err)
		}
		if pc.State != record.CallNeedsApproval || pc.Approved {
			t.Errorf("ApplyDecision() state = %s approved=%v, want still needs_approval", pc.State, pc.Approved)
		}
	})
	t.Run("reject", func(t *testing.T) {
		t.Parallel()
		pc := fresh()
		if err := batch.ApplyDecision(&pc, false, "not yet"); err != nil {
			t.Fatalf("ApplyDecision() error = %v", err)
		}
		if pc.State != record.CallRejected || pc.Note != "not yet" {
			t.Errorf("ApplyDecision() = %s %q, want rejected with note", pc.State, pc.Note)
		}
		if err := batch.ApplyDecision(&pc, true, ""); !errors.Is(err, batch.ErrNotWaiting) {
			t.Errorf("ApplyDecision(after reject) error = %v, want ErrNotWaiting", err)
		}
	})
}

// docs/design.md §3.5: the example of docs/design.md §3.5 — the artifact produced by the first
// call is merged at once, so the second call's reference validates.
func TestValidate_ChainAfterMerge(t *testing.T) {
	t.Parallel()
	c := demoCatalog(t)
	env := catalog.NewEnv(nil, map[string]any{"conversation_id": "c1"})
	next := call("c2", "convert_svg_to_png", `{"artifact_id":"a2"}`)
	if pc := batch.Validate(c, []llm.ToolCall{next}, env)[0]; pc.State != record.CallInvalid {
		t.Fatalf("Validate() before merge state = %s, want invalid", pc.State)
	}
	catalog.MergeArtifacts(env.Artifacts, artifact.Artifact{ID: "a2", Name: "p.svg", MimeType: "image/svg+xml"})
	if pc := batch.Validate(c, []llm.ToolCall{next}, env)[0]; pc.State != record.CallReady {
		t.Errorf("Validate() after merge state = %s (%s), want ready", pc.State, pc.Error)
	}
}

// A workflow whose step skill is unknown does not compile, so it is not a
// tool: a call to it is an unknown-tool error the model can act on.
func TestValidate_WorkflowMissingSkill(t *testing.T) {
	t.Parallel()
	wf := catalog.Workflow{ID: "gone", Inputs: []catalog.WorkflowInput{{Path: "w", Type: "string"}},
		Steps: []catalog.WorkflowStep{{Skill: "no_such_skill", Arguments: map[string]any{"w": "{{inputs.w}}"}}}}
	c := catalog.New(nil, []catalog.Workflow{wf})
	pc := batch.Validate(c, []llm.ToolCall{call("c1", "workflow_gone", `{"w":"x"}`)}, demoEnv())[0]
	if pc.State != record.CallInvalid || !strings.Contains(pc.Error, `unknown tool "workflow_gone"`) {
		t.Errorf("Validate() = %s %q, want invalid: unknown tool", pc.State, pc.Error)
	}
	if errs := c.WorkflowErrors(); len(errs) != 1 || !strings.Contains(errs[0].Error(), `unknown skill "no_such_skill"`) {
		t.Errorf("WorkflowErrors() = %v, want the unknown skill", errs)
	}
}

// docs/design.md §3.3: an unknown artifact id is an immediate error result for a
// workflow too, when one of its inputs feeds a step's artifact reference;
// a known id, or an earlier step's output, is fine.
func TestValidate_WorkflowUnknownArtifact(t *testing.T) {
	t.Parallel()
	caps := demoCaps(t)
	wf := catalog.Workflow{ID: "to_png", Name: "to png", Inputs: []catalog.WorkflowInput{{Path: "source", Type: "string"}},
		Steps: []catalog.WorkflowStep{{Skill: "convert_svg_to_png", Arguments: map[string]any{"artifact_id": "{{inputs.source}}"}}}}
	c := catalog.New(caps, []catalog.Workflow{wf})
	tests := []struct {
		args      string
		wantState record.CallState
	}{
		{`{"source":"a1"}`, record.CallReady},
		{`{"source":"art_made_up"}`, record.CallInvalid},
	}
	for _, tc := range tests {
		pc := batch.Validate(c, []llm.ToolCall{call("w1", "workflow_to_png", tc.args)}, demoEnv())[0]
		if pc.State != tc.wantState {
			t.Errorf("Validate(%s) = %s %q, want %s", tc.args, pc.State, pc.Error, tc.wantState)
		}
		if tc.wantState == record.CallInvalid && !strings.Contains(pc.Error, "unknown artifact id art_made_up") {
			t.Errorf("Validate(%s) error = %q, want it to name the unknown id", tc.args, pc.Error)
		}
	}
}

// docs/design.md §3.4: a workflow call the user made by selecting it explicitly has
// no model to send an error to: every input it lacks is asked in its form
// (the model's own call to the same workflow gets an error instead), a
// wrong value is still an error, and answering makes it ready.
func TestValidate_UserSelectedWorkflow(t *testing.T) {
	t.Parallel()
	c := demoCatalog(t)
	env := demoEnv()
	env.UserCalls = map[string]bool{"sel": true}

	model := batch.Validate(c, []llm.ToolCall{call("m1", "workflow_flange_drawing", `{}`)}, env)[0]
	if model.State != record.CallInvalid || model.FromUser {
		t.Errorf("model's call = %s (from user %v), want invalid", model.State, model.FromUser)
	}

	pc := batch.Validate(c, []llm.ToolCall{call("sel", "workflow_flange_drawing", `{"drawing.holes": 6}`)}, env)[0]
	if pc.State != record.CallNeedsInput || !pc.FromUser {
		t.Fatalf("selection = %s %q (from user %v), want needs_input", pc.State, pc.Error, pc.FromUser)
	}
	var names []string
	for _, f := range pc.Form {
		names = append(names, fmt.Sprintf("%s:%s:%v", f.Name, f.Type, f.Required))
	}
	if diff := cmp.Diff([]string{"drawing.outer_diameter_mm:number:true", "drawing.material:string:true"}, names); diff != "" {
		t.Errorf("form fields mismatch (-want +got):\n%s", diff)
	}
	if pc.Sources["drawing.holes"] != batch.SourceUser {
		t.Errorf("source of drawing.holes = %q, want user", pc.Sources["drawing.holes"])
	}
	if err := batch.ApplyAnswers(c, &pc, map[string]any{"drawing.outer_diameter_mm": 150, "drawing.material": "brass"}, env); err != nil {
		t.Fatalf("ApplyAnswers() = %v", err)
	}
	if pc.State != record.CallReady {
		t.Errorf("after answers = %s %q, want ready", pc.State, pc.Error)
	}

	bad := batch.Validate(c, []llm.ToolCall{call("sel", "workflow_flange_drawing", `{"drawing.holes": 2}`)}, env)[0]
	if bad.State != record.CallInvalid || !strings.Contains(bad.Error, "must be >= 3") {
		t.Errorf("selection with holes 2 = %s %q, want invalid", bad.State, bad.Error)
	}
}

// docs/design.md §9 "modify" (issue 12): an approval may carry edited arguments;
// they are validated like a model's call, and edited fields become the
// user's.
func TestApplyEdit(t *testing.T) {
	t.Parallel()
	order := catalog.Capability{Tool: "order_flange", Description: "Order.", SkillExtension: catalog.SkillExtension{
		RequiresApproval: true,
		InputSchema:      json.RawMessage(`{"type":"object","properties":{"quantity":{"type":"integer","minimum":1},"express":{"type":"boolean"},"tenant":{"type":"string","x_context":"user_id"}},"required":["quantity"]}`)}}
	c := catalog.New([]catalog.Capability{order}, nil)
	env := demoEnv()
	tests := []struct {
		name     string
		edit     map[string]any
		wantErr  error
		wantArgs map[string]any
		wantSrc  map[string]string
		edited   bool
	}{
		{name: "changed field is the user's, unchanged keeps its source",
			edit:     map[string]any{"quantity": 5.0, "express": true},
			wantArgs: map[string]any{"quantity": 5.0, "express": true, "tenant": "dev"},
			wantSrc:  map[string]string{"quantity": "user", "express": "model", "tenant": "context"}, edited: true},
		{name: "a context value cannot be overridden",
			edit:     map[string]any{"quantity": 2.0, "express": true, "tenant": "someone-else"},
			wantArgs: map[string]any{"quantity": 2.0, "express": true, "tenant": "dev"},
			wantSrc:  map[string]string{"quantity": "model", "express": "model", "tenant": "context"}},
		{name: "schema violation refused", edit: map[string]any{"quantity": 0.0}, wantErr: batch.ErrInvalidEdit},
		{name: "wrong type refused", edit: map[string]any{"quantity": "many"}, wantErr: batch.ErrInvalidEdit},
		{name: "required field removed refused", edit: map[string]any{"express": true}, wantErr: batch.ErrInvalidEdit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pc := batch.Validate(c, []llm.ToolCall{call("c1", "order_flange", `{"quantity":2,"express":true}`)}, env)[0]
			if pc.State != record.CallNeedsApproval {
				t.Fatalf("Validate() state = %s, want needs_approval", pc.State)
			}
			shown, shownID := pc.ApprovalHash, batch.ApprovalID([]record.PendingCall{pc})
			before := pc
			err := batch.ApplyEdit(c, &pc, tt.edit, env)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ApplyEdit() error = %v, want %v", err, tt.wantErr)
			}
			if err != nil {
				if diff := cmp.Diff(before, pc); diff != "" {
					t.Errorf("ApplyEdit() changed a refused call (-before +after):\n%s", diff)
				}
				return
			}
			if diff := cmp.Diff(tt.wantArgs, pc.Arguments); diff != "" {
				t.Errorf("ApplyEdit() arguments (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSrc, pc.Sources); diff != "" {
				t.Errorf("ApplyEdit() sources (-want +got):\n%s", diff)
			}
			if pc.State != record.CallNeedsApproval || pc.ApprovalHash != catalog.ArgumentsHash(pc.Arguments) {
				t.Errorf("ApplyEdit() state %s hash %s, want needs_approval of the edited arguments", pc.State, pc.ApprovalHash)
			}
			if got := pc.EditedFrom == shown; got != tt.edited {
				t.Errorf("ApplyEdit() EditedFrom = %q, want the shown hash: %v", pc.EditedFrom, tt.edited)
			}
			if tt.edited && batch.ApprovalID([]record.PendingCall{pc}) == shownID {
				t.Errorf("ApprovalID() did not change with the edited arguments")
			}
			if err := batch.ApplyDecision(&pc, true, ""); err != nil || pc.State != record.CallReady {
				t.Errorf("ApplyDecision(approve) after edit = %v, state %s, want ready", err, pc.State)
			}
		})
	}
}

// issue 12: the approval id names exactly the calls and arguments shown.
func TestApprovalID(t *testing.T) {
	t.Parallel()
	a := record.PendingCall{CallID: "c1", Tool: "x", State: record.CallNeedsApproval, ApprovalHash: "h1"}
	b := record.PendingCall{CallID: "c2", Tool: "y", State: record.CallNeedsApproval, ApprovalHash: "h2"}
	id := batch.ApprovalID([]record.PendingCall{a, b})
	if id == "" || id != batch.ApprovalID([]record.PendingCall{a, b}) {
		t.Fatalf("ApprovalID() = %q, want a stable id", id)
	}
	a2 := a
	a2.ApprovalHash = "h1'"
	form := b
	form.State = record.CallNeedsInput
	for name, calls := range map[string][]record.PendingCall{
		"other arguments": {a2, b},
		"one call fewer":  {a},
	} {
		if got := batch.ApprovalID(calls); got == id {
			t.Errorf("ApprovalID(%s) = %q, the same as before", name, got)
		}
	}
	if got := batch.ApprovalID([]record.PendingCall{a, form}); got != "" {
		t.Errorf("ApprovalID() with a form open = %q, want none (forms come first)", got)
	}
}

// A violation is told by the field it is about: the arguments themselves,
// a member, an item, or a member whose name is empty.
func TestDescribeValidationNamesTheField(t *testing.T) {
	for ptr, want := range map[string]string{
		"":            "arguments",
		"/word":       "word",
		"/tags/1":     "tags[1]",
		"/a/0/b":      "a[0].b",
		"/x~1y/m~0n":  "x/y.m~n",
		"/":           `""`,
		"/opts//mode": `opts."".mode`,
	} {
		err := &schemaerr.Error{Violations: []schemaerr.Violation{{Pointer: ptr, Message: "wrong"}}, Err: errors.New("wrong")}
		if got := batch.DescribeValidation(err); got != want+": wrong" {
			t.Errorf("DescribeValidation at %q = %q, want %q", ptr, got, want+": wrong")
		}
	}
}
