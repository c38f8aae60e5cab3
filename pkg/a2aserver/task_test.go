package a2aserver

import (
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/google/go-cmp/cmp"

	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/wire"
)

func TestTaskState(t *testing.T) {
	t.Parallel()
	for status, want := range map[record.Status]a2a.TaskState{
		record.StatusRunning:          a2a.TaskStateWorking,
		record.StatusAwaitingInput:    a2a.TaskStateInputRequired,
		record.StatusAwaitingApproval: a2a.TaskStateInputRequired,
		record.StatusSucceeded:        a2a.TaskStateCompleted,
		record.StatusFailed:           a2a.TaskStateFailed,
		record.StatusExpired:          a2a.TaskStateFailed,
		record.StatusSuperseded:       a2a.TaskStateCanceled,
		record.StatusCancelled:        a2a.TaskStateCanceled,
		record.StatusBlocked:          a2a.TaskStateRejected,
		"something new":               a2a.TaskStateUnknown,
	} {
		if got := taskState(status); got != want {
			t.Errorf("taskState(%q) = %q, want %q", status, got, want)
		}
	}
}

func TestParseTaskID(t *testing.T) {
	t.Parallel()
	if ref, err := parseTaskID("c_1a.t_2b"); err != nil || ref != (taskRef{cid: "c_1a", tid: "t_2b"}) || ref.id() != "c_1a.t_2b" {
		t.Errorf(`parseTaskID("c_1a.t_2b") = %+v, %v`, ref, err)
	}
	for _, id := range []a2a.TaskID{"", "c_1", "c_1.", ".t_1", "c/1.t_1", "c_1.t_1/../x", "c 1.t_1"} {
		if _, err := parseTaskID(id); !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Errorf("parseTaskID(%q) error = %v, want task not found", id, err)
		}
	}
}

func TestInputBody(t *testing.T) {
	t.Parallel()
	material := catalog.FormField{Name: "material", Type: "string", Required: true, Enum: []string{"steel", "brass"}}
	holes := catalog.FormField{Name: "holes", Type: "integer", Required: true}
	oneField := wire.Turn{Status: record.StatusAwaitingInput, Form: &wire.Form{Calls: []wire.FormCall{{CallID: "c1", Tool: "flange", Fields: []catalog.FormField{material}}}}}
	twoCalls := wire.Turn{Status: record.StatusAwaitingInput, Form: &wire.Form{Calls: []wire.FormCall{
		{CallID: "c1", Tool: "a", Fields: []catalog.FormField{material, holes}},
		{CallID: "c2", Tool: "b", Fields: []catalog.FormField{material}},
	}}}
	approval := wire.Turn{Status: record.StatusAwaitingApproval, Approval: &wire.Approval{ID: "ap_1"}}
	tests := []struct {
		name string
		v    wire.Turn
		in   incoming
		want map[string]any
		err  error
	}{
		{"field by name", oneField, incoming{data: map[string]any{"text": "the request", "material": "brass"}},
			map[string]any{"answers": map[string]map[string]any{"c1": {"material": "brass"}}}, nil},
		{"single field as text", oneField, incoming{text: "steel", data: map[string]any{}},
			map[string]any{"answers": map[string]map[string]any{"c1": {"material": "steel"}}}, nil},
		{"the API's answers", oneField, incoming{data: map[string]any{"answers": map[string]any{"c1": map[string]any{"material": "steel"}}}},
			map[string]any{"answers": map[string]any{"c1": map[string]any{"material": "steel"}}}, nil},
		{"same name in two calls, qualified", twoCalls, incoming{data: map[string]any{"c1.material": "steel", "c2.material": "brass", "holes": 6.0}},
			map[string]any{"answers": map[string]map[string]any{"c1": {"material": "steel", "holes": 6.0}, "c2": {"material": "brass"}}}, nil},
		{"name: value lines, typed", twoCalls, incoming{text: "holes: 8\nc2.material: steel", data: map[string]any{}},
			map[string]any{"answers": map[string]map[string]any{"c1": {"holes": int64(8)}, "c2": {"material": "steel"}}}, nil},
		{"form without answers", twoCalls, incoming{text: "hello", data: map[string]any{}}, nil, a2a.ErrInvalidParams},
		{"yes", approval, incoming{text: "Yes!", data: map[string]any{}},
			map[string]any{"approval": map[string]any{"id": "ap_1", "decision": "approve", "note": "Yes!"}}, nil},
		{"decision field", approval, incoming{data: map[string]any{"decision": "reject", "note": "not now"}},
			map[string]any{"approval": map[string]any{"id": "ap_1", "decision": "reject", "note": "not now"}}, nil},
		{"the API's approval", approval, incoming{data: map[string]any{"approval": map[string]any{"id": "ap_0", "decision": "approve"}}},
			map[string]any{"approval": map[string]any{"id": "ap_0", "decision": "approve"}}, nil},
		{"approval without a decision", approval, incoming{text: "maybe later", data: map[string]any{}}, nil, a2a.ErrInvalidParams},
		{"ended", wire.Turn{Status: record.StatusSucceeded}, incoming{text: "more", data: map[string]any{}}, nil, a2a.ErrInvalidParams},
		{"running", wire.Turn{Status: record.StatusRunning}, incoming{text: "more", data: map[string]any{}}, nil, a2a.ErrInvalidParams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := inputBody(tt.v, tt.in)
			if !errors.Is(err, tt.err) {
				t.Fatalf("inputBody() error = %v, want %v", err, tt.err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("inputBody() (-want +got):\n%s", diff)
			}
		})
	}
}

// The input-required message carries the fields a calling clientagent
// reads (pkg/agents: a data part {"fields": […]}) and the approval with
// its id, calls and exact arguments.
func TestStatusParts(t *testing.T) {
	t.Parallel()
	material := catalog.FormField{Name: "material", Type: "string", Required: true, Enum: []string{"steel"}}
	form := statusParts(wire.Turn{Status: record.StatusAwaitingInput, Form: &wire.Form{Calls: []wire.FormCall{{CallID: "c1", Tool: "flange", Fields: []catalog.FormField{material}}}}})
	if len(form) != 2 {
		t.Fatalf("form parts = %v, want text and data", form)
	}
	data := form[1].(a2a.DataPart).Data
	if diff := cmp.Diff([]catalog.FormField{material}, data["fields"]); diff != "" || data["kind"] != kindForm {
		t.Errorf("form data kind %v, fields (-want +got):\n%s", data["kind"], diff)
	}
	ap := &wire.Approval{ID: "ap_1", Calls: []wire.ApprovalCall{{CallID: "c1", Tool: "publish_artifact", Arguments: map[string]any{"channel": "web"}}}}
	parts := statusParts(wire.Turn{Status: record.StatusAwaitingApproval, Approval: ap})
	data = parts[1].(a2a.DataPart).Data
	if data["kind"] != kindApproval || data["approval"] != ap || parts[0].(a2a.TextPart).Text == "" {
		t.Errorf("approval parts = %v, want the approval view and a text naming it", parts)
	}
	if got := statusParts(wire.Turn{Status: record.StatusFailed, Reply: "boom"}); len(got) != 1 || got[0].(a2a.TextPart).Text != "boom" {
		t.Errorf("failed parts = %v, want the error text", got)
	}
}
