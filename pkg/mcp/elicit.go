package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/tool"
)

// A paused elicitation is held by nobody: the call attempt that met it
// declines it and ends, and its outcome is input-required with the
// server's form. The task of that outcome (record.A2ATask, which the record
// keeps for the answer, as for an A2A specialist) is elicitationTask(n):
// the n-th elicitation of the call paused. The user's answer is merged
// into the call's arguments (source "user") and re-runs the call; in the
// new attempt the server's elicitations 1…n are accepted with the stored
// answers, field by field, and elicitation n+1, if the server sends one,
// pauses the call again. A superseded or expired turn never re-runs the
// call, so the server saw a decline and nothing else.
const elicitationTaskPrefix = "mcp-elicitation-"

func elicitationTask(n int) string { return elicitationTaskPrefix + strconv.Itoa(n) }

// answeredElicitations is how many elicitations of the call the user has
// answered: the n of the task its last pause stored.
func answeredElicitations(cont *record.A2ATask) int {
	if cont == nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimPrefix(cont.TaskID, elicitationTaskPrefix))
	if err != nil || !strings.HasPrefix(cont.TaskID, elicitationTaskPrefix) {
		return 0
	}
	return n
}

// answerPrefix starts the form field of an elicited value whose name is
// also a parameter of the tool, so the answer, merged into the call's
// arguments, never overwrites the argument.
const answerPrefix = "answer_"

// elicitor answers the elicitations of one call attempt.
type elicitor struct {
	call      tool.Call
	toolProps map[string]bool
	answered  int
	cancel    context.CancelFunc

	mu     sync.Mutex
	seen   int
	paused *record.InputRequired
}

func newElicitor(c tool.Call, cancel context.CancelFunc) *elicitor {
	return &elicitor{call: c, toolProps: schemaProperties(c.Capability.InputSchema), answered: answeredElicitations(c.Continue), cancel: cancel}
}

// handle is the session's ElicitationHandler.
func (e *elicitor) handle(_ context.Context, req *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seen++
	p := req.Params
	if p == nil || p.Mode == "url" || (p.Mode == "" && p.URL != "") {
		// We offer form elicitation only; a URL flow has no form to show.
		return &sdk.ElicitResult{Action: "decline"}, nil
	}
	form := elicitationForm(p.RequestedSchema, e.toolProps)
	if e.seen <= e.answered {
		return &sdk.ElicitResult{Action: "accept", Content: form.answers(e.call.Arguments, e.call.Sources)}, nil
	}
	if e.paused == nil {
		msg := strings.TrimSpace(p.Message)
		if msg == "" {
			msg = "The tool asks for more input."
		}
		e.paused = &record.InputRequired{Message: msg, Fields: form.fields, Task: record.A2ATask{TaskID: elicitationTask(e.seen)}}
	}
	// End this attempt: the answer re-runs the call.
	e.cancel()
	return &sdk.ElicitResult{Action: "decline"}, nil
}

func (e *elicitor) pause() *record.InputRequired {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.paused
}

// form is an elicitation's requested schema as our form fields, with how
// each field maps back onto the schema's property.
type form struct {
	fields []catalog.FormField
	props  map[string]formProp // field name → property
}

type formProp struct {
	name  string // the schema's property
	array bool   // a multi-select: the answer is a comma-separated list
}

// elicitationForm turns a requested schema (flat: strings, numbers,
// integers, booleans, enums, multi-select arrays of enums) into form
// fields, in the schema's order.
func elicitationForm(schema any, toolProps map[string]bool) form {
	raw, _ := json.Marshal(schema)
	var s struct {
		Properties map[string]map[string]any `json:"properties"`
		Required   []string                  `json:"required"`
	}
	_ = json.Unmarshal(raw, &s)
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	f := form{props: map[string]formProp{}}
	for _, name := range catalog.PropertyOrder(raw, s.Properties) {
		ps := s.Properties[name]
		field := catalog.FormField{Name: name, Required: required[name], Type: "string"}
		if toolProps[name] {
			field.Name = answerPrefix + name
		}
		var desc []string
		if t, _ := ps["title"].(string); t != "" {
			desc = append(desc, t)
		}
		if d, _ := ps["description"].(string); d != "" {
			desc = append(desc, d)
		}
		prop := formProp{name: name}
		switch t, _ := ps["type"].(string); t {
		case "integer", "number", "boolean":
			field.Type = t
		case "array":
			prop.array = true
			items, _ := ps["items"].(map[string]any)
			if vals := enumValues(items); len(vals) > 0 {
				desc = append(desc, "One or more of: "+strings.Join(vals, ", ")+" (comma-separated)")
			} else {
				desc = append(desc, "A comma-separated list")
			}
		}
		if !prop.array {
			field.Enum = enumValues(ps)
		}
		if fm, _ := ps["format"].(string); fm != "" {
			desc = append(desc, "format: "+fm)
		}
		if d, ok := ps["default"]; ok {
			b, _ := json.Marshal(d)
			desc = append(desc, "default: "+string(b))
		}
		field.Description = strings.Join(desc, ". ")
		if field.Description == "" {
			field.Description = name
		}
		f.fields = append(f.fields, field)
		f.props[field.Name] = prop
	}
	return f
}

// answers is the elicitation's content from the user's answers stored in
// the call's arguments, by property.
func (f form) answers(args map[string]any, sources map[string]string) map[string]any {
	out := map[string]any{}
	for _, field := range f.fields {
		v, ok := args[field.Name]
		if !ok || sources[field.Name] != "user" {
			continue
		}
		p := f.props[field.Name]
		if p.array {
			if s, ok := v.(string); ok {
				var items []any
				for _, x := range strings.Split(s, ",") {
					if x = strings.TrimSpace(x); x != "" {
						items = append(items, x)
					}
				}
				v = items
			}
		}
		out[p.name] = v
	}
	return out
}

// enumValues reads enum, or oneOf/anyOf of {const} (titled enums), as strings.
func enumValues(ps map[string]any) []string {
	if ps == nil {
		return nil
	}
	var out []string
	if l, ok := ps["enum"].([]any); ok {
		for _, x := range l {
			out = append(out, fmt.Sprint(x))
		}
		return out
	}
	for _, k := range []string{"oneOf", "anyOf"} {
		l, _ := ps[k].([]any)
		for _, x := range l {
			if m, ok := x.(map[string]any); ok {
				if c, ok := m["const"]; ok {
					out = append(out, fmt.Sprint(c))
				}
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

// schemaProperties are the top-level property names of a JSON schema.
func schemaProperties(raw json.RawMessage) map[string]bool {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(raw, &s)
	out := make(map[string]bool, len(s.Properties))
	for k := range s.Properties {
		out[k] = true
	}
	return out
}
