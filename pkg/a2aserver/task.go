package a2aserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/wire"
)

// taskState maps a turn's status onto an A2A task state.
func taskState(s wire.Status) a2a.TaskState {
	switch s {
	case wire.StatusRunning:
		return a2a.TaskStateWorking
	case wire.StatusAwaitingInput, wire.StatusAwaitingApproval:
		return a2a.TaskStateInputRequired
	case wire.StatusSucceeded:
		return a2a.TaskStateCompleted
	case wire.StatusFailed, wire.StatusExpired:
		return a2a.TaskStateFailed
	case wire.StatusSuperseded, wire.StatusCancelled:
		return a2a.TaskStateCanceled
	case wire.StatusBlocked:
		return a2a.TaskStateRejected
	}
	return a2a.TaskStateUnknown
}

// Kinds of the DataPart of an input-required status message.
const (
	kindForm     = "form"
	kindApproval = "approval"
)

// task renders turn v as the A2A task ref: its state, a status message
// (the reply, the error, or what the turn waits for) and, once it has
// produced any, its artifacts as files with links.
func (s *Server) task(ctx context.Context, ref taskRef, v wire.Turn) (*a2a.Task, error) {
	contextID, err := s.contextOf(ctx, ref.cid)
	if err != nil {
		return nil, s.internal(ctx, "task context", err)
	}
	t := &a2a.Task{
		ID:        ref.id(),
		ContextID: contextID,
		Status:    a2a.TaskStatus{State: taskState(v.Status)},
		Metadata:  map[string]any{"conversation_id": ref.cid, "turn_id": ref.tid, "status": string(v.Status)},
	}
	now := time.Now().UTC()
	t.Status.Timestamp = &now
	if parts := statusParts(v); len(parts) > 0 {
		t.Status.Message = a2a.NewMessageForTask(a2a.MessageRoleAgent, t, parts...)
	}
	for _, a := range v.Artifacts {
		link, apiURL, err := s.artifactLink(ctx, ref.cid, a.ID)
		if err != nil {
			return nil, s.asA2A(ctx, "artifact link", err)
		}
		t.Artifacts = append(t.Artifacts, &a2a.Artifact{
			ID:          a2a.ArtifactID(a.ID),
			Name:        a.Name,
			Description: a.Description,
			Parts: []a2a.Part{a2a.FilePart{
				File: a2a.FileURI{FileMeta: a2a.FileMeta{Name: a.Name, MimeType: a.MimeType}, URI: link},
				// url is the stable address: it works with the caller's
				// token after the link above has expired.
				Metadata: map[string]any{"artifact_id": a.ID, "url": apiURL},
			}},
		})
	}
	return t, nil
}

// statusParts is what a turn's status message says.
func statusParts(v wire.Turn) []a2a.Part {
	switch {
	case v.Status == wire.StatusAwaitingInput && v.Form != nil:
		return formParts(v)
	case v.Status == wire.StatusAwaitingApproval && v.Approval != nil:
		return approvalParts(v)
	case v.Reply != "":
		return []a2a.Part{a2a.TextPart{Text: v.Reply}}
	}
	return nil
}

// formFields flattens a form's calls into one list of fields: a field's
// name is its own, or "<call_id>.<name>" when two calls ask for the same
// name. key maps each flat name back to the call and field.
func formFields(f *wire.Form) (fields []catalog.FormField, key map[string][2]string) {
	count := map[string]int{}
	for _, c := range f.Calls {
		for _, fl := range c.Fields {
			count[fl.Name]++
		}
	}
	key = map[string][2]string{}
	for _, c := range f.Calls {
		for _, fl := range c.Fields {
			own := fl.Name
			if count[own] > 1 {
				fl.Name = c.CallID + "." + own
			}
			fields = append(fields, fl)
			key[fl.Name] = [2]string{c.CallID, own}
		}
	}
	return fields, key
}

// inputSchema is the JSON Schema of an answer with fields.
func inputSchema(fields []catalog.FormField) map[string]any {
	props := map[string]any{}
	required := []string{}
	for _, f := range fields {
		p := map[string]any{"type": f.Type}
		if f.Description != "" {
			p["description"] = f.Description
		}
		if len(f.Enum) > 0 {
			p["enum"] = f.Enum
		}
		props[f.Name] = p
		if f.Required {
			required = append(required, f.Name)
		}
	}
	return map[string]any{"type": "object", "properties": props, "required": required}
}

func formParts(v wire.Turn) []a2a.Part {
	fields, _ := formFields(v.Form)
	var asks, tools []string
	for _, f := range fields {
		a := f.Name
		if f.Description != "" {
			a += " (" + strings.TrimRight(f.Description, ". ") + ")"
		}
		if len(f.Enum) > 0 {
			a += " — one of " + strings.Join(f.Enum, ", ")
		}
		asks = append(asks, a)
	}
	for _, c := range v.Form.Calls {
		t := c.Tool
		if c.Note != "" {
			t += ": " + c.Note
		}
		tools = append(tools, t)
	}
	text := fmt.Sprintf("More input is needed for %s. Please provide: %s. Answer on this task with a data part holding these fields (or, for a single field, just the value as text).",
		strings.Join(tools, "; "), strings.Join(asks, "; "))
	data := map[string]any{
		"kind":         kindForm,
		"fields":       fields,
		"input_schema": inputSchema(fields),
		"form":         v.Form,
	}
	if v.ExpiresAt != "" {
		data["expires_at"] = v.ExpiresAt
	}
	return []a2a.Part{a2a.TextPart{Text: text}, a2a.DataPart{Data: data}}
}

// decisionField is the one field of an approval, for a caller (such as
// another clientagent) that answers input-required with fields.
var decisionField = catalog.FormField{Name: "decision", Type: "string", Required: true, Enum: []string{"approve", "reject"},
	Description: "approve to run exactly the calls and arguments shown, reject to refuse them"}

func approvalParts(v wire.Turn) []a2a.Part {
	var calls []string
	for _, c := range v.Approval.Calls {
		line := c.Tool + " " + plainJSON(c.Arguments)
		for i, st := range c.Steps {
			line += fmt.Sprintf("\n  step %d %s: %s %s", i+1, st.Name, st.Skill, plainJSON(st.Arguments))
		}
		calls = append(calls, line)
	}
	text := fmt.Sprintf("Approval needed before running:\n%s\nReply yes or no (or a data part {\"decision\": \"approve\"|\"reject\"}); approval id %s.",
		strings.Join(calls, "\n"), v.Approval.ID)
	fields := []catalog.FormField{decisionField}
	data := map[string]any{
		"kind":         kindApproval,
		"approval":     v.Approval,
		"fields":       fields,
		"input_schema": inputSchema(fields),
	}
	if v.ExpiresAt != "" {
		data["expires_at"] = v.ExpiresAt
	}
	return []a2a.Part{a2a.TextPart{Text: text}, a2a.DataPart{Data: data}}
}

// plainJSON is v as compact JSON without HTML escapes (the caller reads
// "<artifact 1 of step 1>" as written).
func plainJSON(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return strings.TrimSpace(b.String())
}

// progressMessage is the working status message of a live event, or nil
// for an event the caller need not see.
func progressMessage(info a2a.TaskInfoProvider, ev liveEvent) *a2a.Message {
	tool := ev.Tool
	var text string
	switch ev.Type {
	case wire.EventLLMDelta:
		text = ev.Text
	case wire.EventStepStarted:
		if tool != "" && tool != "llm" {
			text = "Running " + tool + "…"
		}
	case wire.EventStepEnded:
		status := ev.Status
		if tool != "" && tool != "llm" {
			text = tool + ": " + status
		}
	}
	if text == "" {
		return nil
	}
	m := a2a.NewMessageForTask(a2a.MessageRoleAgent, info, a2a.TextPart{Text: text})
	m.Metadata = map[string]any{"event": ev.Type}
	if tool != "" {
		m.Metadata["tool"] = tool
	}
	return m
}

// incoming is what a message carries: its text, its data parts merged,
// and the files sent with bytes.
type incoming struct {
	text  string
	data  map[string]any
	files []a2a.FileBytes
	skill string
}

func readMessage(msg *a2a.Message) (incoming, error) {
	in := incoming{data: map[string]any{}}
	var texts []string
	for _, p := range msg.Parts {
		switch p := p.(type) {
		case a2a.TextPart:
			texts = append(texts, p.Text)
		case *a2a.TextPart:
			texts = append(texts, p.Text)
		case a2a.DataPart:
			for k, v := range p.Data {
				in.data[k] = v
			}
		case *a2a.DataPart:
			for k, v := range p.Data {
				in.data[k] = v
			}
		case a2a.FilePart:
			f, ok := p.File.(a2a.FileBytes)
			if !ok {
				return in, fmt.Errorf("%w: files are taken as bytes only (a file part by URI is not fetched)", a2a.ErrInvalidParams)
			}
			in.files = append(in.files, f)
		}
	}
	in.text = strings.TrimSpace(strings.Join(texts, "\n"))
	in.skill, _ = msg.Metadata["skillId"].(string)
	return in, nil
}

// send starts a turn for a message without a task id, or answers the turn
// its task id names. It returns the turn and the event id to follow it
// from.
func (s *Server) send(ctx context.Context, msg *a2a.Message) (taskRef, string, error) {
	if msg == nil {
		return taskRef{}, "", fmt.Errorf("%w: message is required", a2a.ErrInvalidParams)
	}
	in, err := readMessage(msg)
	if err != nil {
		return taskRef{}, "", err
	}
	if msg.TaskID != "" {
		return s.answer(ctx, msg, in)
	}
	body := map[string]any{}
	wf, err := s.selection(ctx, in)
	if err != nil {
		return taskRef{}, "", err
	}
	if wf != nil {
		body["workflow"] = wf
		if len(wf.Inputs) == 0 && in.text != "" {
			body["text"] = in.text // a hint: the model fills the inputs from it
		}
	} else {
		text := in.text
		if t, ok := in.data["text"].(string); ok && strings.TrimSpace(t) != "" {
			text = strings.TrimSpace(strings.TrimSpace(t) + "\n" + text)
		}
		if text == "" {
			return taskRef{}, "", fmt.Errorf("%w: send the request as text (or a data part {\"text\"}), or select a workflow skill", a2a.ErrInvalidParams)
		}
		body["text"] = text
	}
	for fresh := false; ; fresh = true {
		cid, err := s.conversation(ctx, msg.ContextID, fresh)
		if err != nil {
			return taskRef{}, "", s.asA2A(ctx, "conversation", err)
		}
		var ids []string
		for _, f := range in.files {
			id, err := s.upload(ctx, cid, f)
			if err != nil {
				return taskRef{}, "", s.asA2A(ctx, "upload", err)
			}
			ids = append(ids, id)
		}
		if len(ids) > 0 {
			body["files"] = ids
		}
		var out struct {
			TurnID string `json:"turn_id"`
		}
		err = s.do(ctx, http.MethodPost, "/v1/conversations/"+url.PathEscape(cid)+"/messages", jsonBody(body), "application/json", &out)
		var ae *apiError
		if errors.As(err, &ae) && ae.status == http.StatusNotFound && !fresh && msg.ContextID != "" {
			continue // the mapped conversation is gone: a new one for this context
		}
		if err != nil {
			return taskRef{}, "", s.asA2A(ctx, "post message", err)
		}
		s.log().InfoContext(ctx, "a2a turn started", "conversation_id", cid, "turn_id", out.TurnID, "workflow", wf != nil, "files", len(ids))
		return taskRef{cid: cid, tid: out.TurnID}, "", nil
	}
}

// selection is the workflow a message selects: with a data part
// {"workflow": {"id", "inputs"}}, or as the skill the caller named
// (metadata skillId, as clientagent's own invoker sends it) with the data
// part as the inputs.
func (s *Server) selection(ctx context.Context, in incoming) (*wire.WorkflowSelection, error) {
	if w, ok := in.data["workflow"].(map[string]any); ok {
		id, _ := w["id"].(string)
		if strings.TrimSpace(id) == "" {
			return nil, fmt.Errorf("%w: workflow.id is required", a2a.ErrInvalidParams)
		}
		inputs, _ := w["inputs"].(map[string]any)
		return &wire.WorkflowSelection{ID: id, Inputs: inputs}, nil
	}
	if in.skill == "" || in.skill == chatSkillID {
		return nil, nil
	}
	cat, err := s.Catalogs.Catalog(ctx)
	if err != nil {
		return nil, s.internal(ctx, "catalog", err)
	}
	for _, w := range cat.Workflows() {
		if workflowSkillID(w.ID) == in.skill {
			inputs := map[string]any{}
			for k, v := range in.data {
				inputs[k] = v
			}
			return &wire.WorkflowSelection{ID: w.ID, Inputs: inputs}, nil
		}
	}
	return nil, fmt.Errorf("%w: no skill %q; this agent's skills are chat and one per workflow (see its card)", a2a.ErrInvalidParams, in.skill)
}

// upload stores a file the caller sent with the message.
func (s *Server) upload(ctx context.Context, cid string, f a2a.FileBytes) (string, error) {
	b, err := base64.StdEncoding.DecodeString(f.Bytes)
	if err != nil {
		return "", fmt.Errorf("%w: file %q: bytes are not base64: %v", a2a.ErrInvalidParams, f.Name, err)
	}
	name := f.Name
	if name == "" {
		name = "upload"
	}
	var out struct {
		ID string `json:"artifact_id"`
	}
	path := "/v1/conversations/" + url.PathEscape(cid) + "/artifacts?" + url.Values{"name": {name}}.Encode()
	mime := f.MimeType
	if mime == "" {
		mime = "application/octet-stream"
	}
	if err := s.do(ctx, http.MethodPost, path, strings.NewReader(string(b)), mime, &out); err != nil {
		return "", err
	}
	return out.ID, nil
}

// answer answers the form or approval the task's turn waits for.
func (s *Server) answer(ctx context.Context, msg *a2a.Message, in incoming) (taskRef, string, error) {
	ref, err := parseTaskID(msg.TaskID)
	if err != nil {
		return taskRef{}, "", err
	}
	if msg.ContextID != "" {
		known, err := s.contextOf(ctx, ref.cid)
		if err != nil {
			return taskRef{}, "", s.internal(ctx, "task context", err)
		}
		if known != msg.ContextID {
			return taskRef{}, "", fmt.Errorf("%w: task %s belongs to context %s, not %s", a2a.ErrInvalidParams, ref.id(), known, msg.ContextID)
		}
	}
	v, err := s.getTurn(ctx, ref)
	if err != nil {
		return taskRef{}, "", err
	}
	body, err := inputBody(v, in)
	if err != nil {
		return taskRef{}, "", err
	}
	since := eventIDAt(time.Now())
	if err := s.do(ctx, http.MethodPost, ref.path()+"/input", jsonBody(body), "application/json", nil); err != nil {
		return taskRef{}, "", s.asA2A(ctx, "answer turn", err)
	}
	s.log().InfoContext(ctx, "a2a turn answered", "conversation_id", ref.cid, "turn_id", ref.tid, "status", string(v.Status))
	return ref, since, nil
}

// inputBody is the POST …/input body answering what turn v waits for
// with the message in: form answers by field name (flat, or the API's own
// {"answers": {call_id: {…}}}), a single field's value as text; an
// approval by {"approval": {id, decision, note?}}, {"decision"} or a
// plain yes/no.
func inputBody(v wire.Turn, in incoming) (map[string]any, error) {
	switch {
	case v.Status == wire.StatusAwaitingInput && v.Form != nil:
		if a, ok := in.data["answers"].(map[string]any); ok {
			return map[string]any{"answers": a}, nil
		}
		fields, key := formFields(v.Form)
		answers := map[string]map[string]any{}
		put := func(flat string, val any) {
			k := key[flat]
			if answers[k[0]] == nil {
				answers[k[0]] = map[string]any{}
			}
			answers[k[0]][k[1]] = val
		}
		lines := textFields(in.text)
		for _, f := range fields {
			if val, ok := in.data[f.Name]; ok {
				put(f.Name, val)
			} else if s, ok := lines[f.Name]; ok {
				put(f.Name, typed(f, s))
			}
		}
		if len(answers) == 0 && len(fields) == 1 && in.text != "" {
			put(fields[0].Name, typed(fields[0], in.text))
		}
		if len(answers) == 0 {
			var names []string
			for _, f := range fields {
				names = append(names, f.Name)
			}
			return nil, fmt.Errorf("%w: this task waits for a form; send the fields %s in a data part", a2a.ErrInvalidParams, strings.Join(names, ", "))
		}
		return map[string]any{"answers": answers}, nil
	case v.Status == wire.StatusAwaitingApproval && v.Approval != nil:
		decision, note := "", ""
		if a, ok := in.data["approval"].(map[string]any); ok {
			if _, ok := a["id"]; !ok {
				a["id"] = v.Approval.ID
			}
			return map[string]any{"approval": a}, nil
		}
		if d, ok := in.data["decision"].(string); ok {
			decision = strings.ToLower(strings.TrimSpace(d))
		} else if d, ok := yesNo(in.text); ok {
			decision = d
		}
		note, _ = in.data["note"].(string)
		if note == "" && in.text != "" {
			note = in.text
		}
		if decision != "approve" && decision != "reject" {
			return nil, fmt.Errorf("%w: this task waits for an approval (id %s); answer yes or no, or send {\"decision\": \"approve\"|\"reject\"}", a2a.ErrInvalidParams, v.Approval.ID)
		}
		a := map[string]any{"id": v.Approval.ID, "decision": decision}
		if note != "" {
			a["note"] = note
		}
		return map[string]any{"approval": a}, nil
	case v.Status.Final():
		return nil, fmt.Errorf("%w: the task is in a terminal state (%s); send a new message in the same context to continue the conversation", a2a.ErrInvalidParams, v.Status)
	default:
		return nil, fmt.Errorf("%w: the task is working and waits for nothing; follow it with tasks/get or cancel it", a2a.ErrInvalidParams)
	}
}

// textFields reads "name: value" lines (how clientagent's invoker answers
// a plain agent with several fields).
func textFields(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if k = strings.TrimSpace(k); ok && k != "" && !strings.ContainsAny(k, " \t") {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

// typed converts a text answer to the field's type; the API validates it.
func typed(f catalog.FormField, s string) any {
	s = strings.TrimSpace(s)
	switch f.Type {
	case "integer":
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n
		}
	case "number":
		if n, err := strconv.ParseFloat(s, 64); err == nil {
			return n
		}
	case "boolean":
		if d, ok := yesNo(s); ok {
			return d == "approve"
		}
		if b, err := strconv.ParseBool(s); err == nil {
			return b
		}
	}
	return s
}

// yesNo reads a short reply as a decision, like the API's own typed reply.
func yesNo(text string) (string, bool) {
	t := strings.ToLower(strings.Trim(strings.TrimSpace(text), ".!? "))
	switch t {
	case "yes", "y", "ok", "okay", "approve", "approved", "sure", "go ahead", "do it", "yes please", "yep", "yeah", "true":
		return "approve", true
	case "no", "n", "nope", "reject", "rejected", "cancel", "stop", "don't", "do not", "no thanks", "false":
		return "reject", true
	}
	return "", false
}
