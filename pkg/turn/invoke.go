package turn

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/clientagent/clientagent/pkg/agents"
	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/record"
)

// InvokeInput is one Map iteration's payload.
type InvokeInput struct {
	Ref
	CallID string `json:"call_id"`
}

// InvokeOutput is the call's result status; the result itself is in Valkey.
type InvokeOutput struct {
	CallID string `json:"call_id"`
	Status string `json:"status"`
}

// Invoke runs one ready call (a specialist skill over A2A or a workflow)
// and stores its outcome once under its call id. A retried Invoke whose
// outcome is stored returns it without running the specialist again. A
// failing specialist is a failed result, never a failed turn.
func (h *Handlers) Invoke(ctx context.Context, in InvokeInput) (InvokeOutput, error) {
	started := h.now()
	conv, t, outcomes, err := h.load(ctx, in.Ref, true)
	if err != nil {
		return InvokeOutput{}, err
	}
	if o, ok := outcomes[in.CallID]; ok {
		return InvokeOutput{CallID: in.CallID, Status: outcomeStatus(o)}, nil
	}
	pc := findCall(t, in.CallID)
	if pc == nil {
		return InvokeOutput{}, &NotFoundError{What: "call " + in.CallID}
	}
	cat, err := h.catalog(ctx)
	if err != nil {
		return InvokeOutput{}, err
	}
	arts := Env(conv, t).Artifacts
	// The specialist (or a workflow's steps) must finish before the step's
	// own deadline, so its outcome, even a timeout, is still stored.
	callCtx, cancel := withMargin(ctx)
	defer cancel()
	var o record.CallOutcome
	entry, ok := cat.Lookup(pc.Tool)
	switch {
	case !ok:
		o = failedOutcome(fmt.Sprintf("tool %s is no longer available", pc.Tool))
	case entry.Kind == catalog.EntryWorkflow:
		o = h.runWorkflow(callCtx, conv, t, pc, cat, entry.Workflow, arts)
	case entry.Kind == catalog.EntrySkill:
		o = h.Invoker.Invoke(callCtx, agents.Call{
			ConversationID: conv.Meta.ID,
			TurnID:         t.ID,
			CallID:         pc.CallID,
			Capability:     entry.Capability,
			Arguments:      pc.Arguments,
			Sources:        pc.Sources,
			Files:          referencedFiles(pc.Arguments, arts),
			Continue:       pc.A2A,
		})
	default:
		o = failedOutcome(fmt.Sprintf("tool %s cannot be invoked", pc.Tool))
	}
	o.CallID, o.Tool = pc.CallID, pc.Tool
	if o.StartedAt.IsZero() {
		o.StartedAt = started
	}
	if o.EndedAt.IsZero() {
		o.EndedAt = h.now()
	}
	if _, err := h.Store.PutOutcome(ctx, in.ConversationID, in.TurnID, o); errors.Is(err, record.ErrNotFound) {
		return InvokeOutput{}, &NotFoundError{What: "conversation " + in.ConversationID}
	} else if err != nil {
		return InvokeOutput{}, &TransientError{Err: fmt.Errorf("store outcome of %s: %w", pc.CallID, err)}
	}
	status := outcomeStatus(o)
	h.stepLog(ctx, in.Ref, "invoke", pc.Tool, status, started, 0, nil)
	return InvokeOutput{CallID: in.CallID, Status: status}, nil
}

func outcomeStatus(o record.CallOutcome) string {
	if o.InputRequired != nil {
		return "input_required"
	}
	return o.Result.Status
}

func failedOutcome(msg string) record.CallOutcome {
	return record.CallOutcome{Result: record.ToolResult{Status: record.ResultFailed, Error: msg}}
}

// referencedFiles are the known artifacts whose ids appear among the
// arguments; they travel to the specialist as FileParts.
func referencedFiles(args map[string]any, arts map[string]artifact.Artifact) []artifact.Artifact {
	var files []artifact.Artifact
	seen := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			if a, ok := arts[x]; ok && !seen[x] {
				seen[x] = true
				files = append(files, a)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	for _, v := range args {
		walk(v)
	}
	return files
}

// runWorkflow runs a workflow template's steps in order inside one call;
// each step's artifacts feed the next step's templates.
func (h *Handlers) runWorkflow(ctx context.Context, conv *record.Conversation, t *record.Turn, pc *record.PendingCall, cat *catalog.Catalog, wf catalog.Workflow, arts map[string]artifact.Artifact) record.CallOutcome {
	var (
		all      record.CallOutcome
		produced [][]string
		summary  []string
	)
	all.Result.Status = record.ResultSucceeded
	for i, st := range wf.Steps {
		args, err := wf.StepArguments(i, pc.Arguments, produced)
		if err != nil {
			return failedOutcome(fmt.Sprintf("workflow %s %s could not start: %v", wf.ID, wf.StepLabel(i), err))
		}
		entry, ok := cat.Lookup(st.Skill)
		if !ok || entry.Kind != catalog.EntrySkill {
			return failedOutcome(fmt.Sprintf("workflow %s %s: skill %s is not available", wf.ID, wf.StepLabel(i), st.Skill))
		}
		o := h.Invoker.Invoke(ctx, agents.Call{
			ConversationID: conv.Meta.ID,
			TurnID:         t.ID,
			CallID:         fmt.Sprintf("%s.%d", pc.CallID, i),
			Capability:     entry.Capability,
			Arguments:      args,
			Sources:        pc.Sources,
			Files:          referencedFiles(args, arts),
		})
		if o.InputRequired != nil || o.Result.Status != record.ResultSucceeded {
			msg := o.Result.Error
			if o.InputRequired != nil {
				msg = "the skill needs more input: " + o.InputRequired.Message
			}
			f := failedOutcome(fmt.Sprintf("workflow %s %s failed: %s", wf.ID, wf.StepLabel(i), msg))
			f.Artifacts = all.Artifacts
			f.Result.Artifacts = all.Result.Artifacts
			return f
		}
		var ids []string
		for _, a := range o.Artifacts {
			arts[a.ID] = a
			ids = append(ids, a.ID)
		}
		produced = append(produced, ids)
		all.Artifacts = append(all.Artifacts, o.Artifacts...)
		all.Result.Artifacts = append(all.Result.Artifacts, o.Result.Artifacts...)
		if o.Result.Summary != "" {
			summary = append(summary, fmt.Sprintf("%s: %s", wf.StepLabel(i), o.Result.Summary))
		}
	}
	all.Result.Summary = fmt.Sprintf("Workflow %s finished %d steps.\n%s", wf.Name, len(wf.Steps), strings.Join(summary, "\n"))
	return all
}
