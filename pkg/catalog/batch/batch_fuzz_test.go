package batch_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/catalog/batch"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/record"
)

// fuzzSchema makes a flat object schema from fuzz bytes: up to five fields,
// each a string (maybe with an enum), an integer or number (maybe with a
// minimum) or a boolean, some required; and a value per field drawn from
// every JSON type, some left out.
func fuzzSchema(data []byte) (schema map[string]any, args map[string]any) {
	next := func(n int) int {
		if len(data) == 0 {
			return 0
		}
		v := int(data[0]) % n
		data = data[1:]
		return v
	}
	props := map[string]any{}
	var required []string
	args = map[string]any{}
	values := []any{"", "a", " b ", "steel", 0.0, 1.0, 2.5, -3.0, true, false, nil, []any{1.0}, map[string]any{"x": 1.0}, "7", "true"}
	for i := range 1 + next(5) {
		name := fmt.Sprintf("f%d", i)
		p := map[string]any{}
		switch next(4) {
		case 0:
			p["type"] = "string"
			if next(2) == 0 {
				p["enum"] = []any{"steel", "a", "7"}
			}
		case 1:
			p["type"] = "integer"
			if next(2) == 0 {
				p["minimum"] = float64(next(3))
			}
		case 2:
			p["type"] = "number"
			if next(2) == 0 {
				p["minimum"] = -1.0
			}
		default:
			p["type"] = "boolean"
		}
		props[name] = p
		if next(2) == 0 {
			required = append(required, name)
		}
		if v := next(len(values) + 2); v < len(values) {
			args[name] = values[v]
		}
	}
	schema = map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		schema["required"] = required
	}
	return schema, args
}

func schemaAccepts(t *testing.T, schema map[string]any, args map[string]any) bool {
	t.Helper()
	b, _ := json.Marshal(schema)
	c := jsonschema.NewCompiler()
	if err := c.AddResource("s.json", bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("s.json")
	if err != nil {
		t.Fatal(err)
	}
	ab, _ := json.Marshal(args)
	var v any
	_ = json.Unmarshal(ab, &v)
	return s.Validate(v) == nil
}

// FuzzEditAndAnswers checks the user's edits and form answers against
// arbitrary schemas (issue 20, docs/design.md §9 "modify", docs/design.md §3.3): an edited
// approval is accepted exactly when the schema accepts the edited
// arguments (checked with jsonschema directly), and form answers that are
// accepted always leave arguments the schema accepts.
func FuzzEditAndAnswers(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{4, 0, 0, 0, 3, 1, 1, 0, 5, 2, 0, 0, 6, 3, 0, 8})
	f.Add([]byte("some fields, some required, some values of the wrong type"))
	f.Fuzz(func(t *testing.T, data []byte) {
		schema, edit := fuzzSchema(data)
		raw, _ := json.Marshal(schema)
		ctx := map[string]any{"conversation_id": "c1"}

		// An edit of a call waiting for approval.
		approval := catalog.New([]catalog.Capability{{Tool: "t", Description: "d",
			SkillExtension: catalog.SkillExtension{RequiresApproval: true, InputSchema: raw}}}, nil)
		env := catalog.NewEnv(nil, ctx)
		pc := record.PendingCall{CallID: "c1", Tool: "t", Kind: record.KindSkill, State: record.CallNeedsApproval, ApprovalHash: "shown", Arguments: map[string]any{}}
		err := batch.ApplyEdit(approval, &pc, edit, env)
		accepts := schemaAccepts(t, schema, edit)
		switch {
		case err != nil && !errors.Is(err, batch.ErrInvalidEdit):
			t.Fatalf("ApplyEdit(%v) = %v, want nil or ErrInvalidEdit", edit, err)
		case accepts && err != nil:
			t.Fatalf("ApplyEdit(%v) refused arguments the schema %s accepts: %v", edit, raw, err)
		case !accepts && err == nil:
			t.Fatalf("ApplyEdit(%v) accepted arguments the schema %s refuses", edit, raw)
		case err == nil && !schemaAccepts(t, schema, pc.Arguments):
			t.Fatalf("ApplyEdit left arguments %v the schema refuses", pc.Arguments)
		}

		// Form answers: every field is the user's to give.
		var fields []string
		for name := range schema["properties"].(map[string]any) {
			fields = append(fields, name)
		}
		form := catalog.New([]catalog.Capability{{Tool: "t", Description: "d",
			SkillExtension: catalog.SkillExtension{InputSchema: raw, UserInput: fields}}}, nil)
		calls := batch.Validate(form, []llm.ToolCall{{ID: "c2", Name: "t", Arguments: "{}"}}, env)
		if calls[0].State != record.CallNeedsInput {
			return // nothing required: no form
		}
		answer := calls[0]
		if err := batch.ApplyAnswers(form, &answer, edit, env); err == nil {
			if !schemaAccepts(t, schema, answer.Arguments) {
				t.Fatalf("ApplyAnswers(%v) accepted, leaving arguments %v the schema %s refuses", edit, answer.Arguments, raw)
			}
		} else if !errors.Is(err, batch.ErrInvalidAnswer) {
			t.Fatalf("ApplyAnswers(%v) = %v, want nil or ErrInvalidAnswer", edit, err)
		}
	})
}
