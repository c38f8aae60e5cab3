package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/clientagent/clientagent/pkg/agents"
	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/catalog/batch"
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
		var cont *WorkflowContinuesError
		o, cont = h.runWorkflow(callCtx, in.Ref, conv, t, pc, cat, entry.Workflow, arts, outcomes)
		if cont != nil {
			h.stepLog(ctx, in.Ref, "invoke", pc.Tool, "continues", started, 0, nil)
			return InvokeOutput{}, cont
		}
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
// each step's artifacts feed the next step's bindings. Each finished step
// but the last is stored under its own id (<call>.<i>, also its A2A call
// id) beside the call's outcome, so an invocation resumes after the steps
// stored, and one that has less than CallTimeout left before the next step
// stops with a WorkflowContinuesError instead of starting it.
func (h *Handlers) runWorkflow(ctx context.Context, r Ref, conv *record.Conversation, t *record.Turn, pc *record.PendingCall, cat *catalog.Catalog, wf catalog.Workflow, arts map[string]artifact.Artifact, stored map[string]record.CallOutcome) (record.CallOutcome, *WorkflowContinuesError) {
	var (
		all     record.CallOutcome
		outputs []catalog.StepOutput
		summary []string
		ran     bool
	)
	all.Result.Status = record.ResultSucceeded
	for i, st := range wf.Steps {
		stepID := workflowStepID(pc.CallID, i)
		o, done := stored[stepID]
		if !done || o.Result.Status != record.ResultSucceeded {
			if ran && !h.timeForStep(ctx) {
				return record.CallOutcome{}, &WorkflowContinuesError{CallID: pc.CallID, Next: i}
			}
			ran = true
			stepStart := h.now()
			args, err := wf.StepArguments(i, pc.Arguments, outputs)
			if err != nil {
				return failedOutcome(fmt.Sprintf("workflow %s %s could not start: %v", wf.ID, wf.StepLabel(i), err)), nil
			}
			entry, ok := cat.Lookup(st.Skill)
			if !ok || entry.Kind != catalog.EntrySkill {
				return failedOutcome(fmt.Sprintf("workflow %s %s: skill %s is not available", wf.ID, wf.StepLabel(i), st.Skill)), nil
			}
			call := agents.Call{
				ConversationID: conv.Meta.ID,
				TurnID:         t.ID,
				CallID:         stepID,
				Capability:     entry.Capability,
				Arguments:      args,
				Sources:        wf.StepSources(i, pc.Sources),
				Files:          referencedFiles(args, arts),
			}
			if pc.A2A != nil && pc.A2A.WorkflowStep == i+1 {
				// This step's specialist asked the user: the answer
				// continues its task.
				call.Continue = pc.A2A
				call.Arguments, call.Sources = withAnswers(wf, entry, args, call.Sources, pc)
			}
			o = h.Invoker.Invoke(ctx, call)
			if o.InputRequired != nil {
				// The workflow call waits with the specialist's form; the
				// finished steps are stored, and the answer resumes here.
				ir := *o.InputRequired
				ir.Task.WorkflowStep = i + 1
				ir.Message = fmt.Sprintf("%s of workflow %s asks: %s", wf.StepLabel(i), wf.ID, ir.Message)
				return record.CallOutcome{InputRequired: &ir}, nil
			}
			if o.Result.Status != record.ResultSucceeded {
				f := failedOutcome(fmt.Sprintf("workflow %s %s failed: %s", wf.ID, wf.StepLabel(i), o.Result.Error))
				f.Artifacts = all.Artifacts
				f.Result.Artifacts = all.Result.Artifacts
				return f, nil
			}
			if i < len(wf.Steps)-1 {
				if o.StartedAt.IsZero() {
					o.StartedAt, o.EndedAt = stepStart, h.now()
				}
				h.storeStep(ctx, r, stepID, st.Skill, o)
			}
		}
		var ids []string
		for _, a := range o.Artifacts {
			arts[a.ID] = a
			ids = append(ids, a.ID)
		}
		out := catalog.StepOutput{Artifacts: ids, Summary: o.Result.Summary}
		if o.Result.Result != "" {
			_ = json.Unmarshal([]byte(o.Result.Result), &out.Result)
		}
		outputs = append(outputs, out)
		all.Artifacts = append(all.Artifacts, o.Artifacts...)
		all.Result.Artifacts = append(all.Result.Artifacts, o.Result.Artifacts...)
		if o.Result.Summary != "" {
			summary = append(summary, fmt.Sprintf("%s: %s", wf.StepLabel(i), o.Result.Summary))
		}
	}
	all.Result.Summary = fmt.Sprintf("Workflow %s finished %d steps.\n%s", wf.Name, len(wf.Steps), strings.Join(summary, "\n"))
	return all, nil
}

// withAnswers returns a step's arguments with the user's answers to its
// specialist's input-required form (which the answer merged into the
// workflow call's arguments under the skill's own field names), and the
// sources marking them as the user's.
func withAnswers(wf catalog.Workflow, skill catalog.Entry, args map[string]any, stepSources map[string]string, pc *record.PendingCall) (map[string]any, map[string]string) {
	out := maps.Clone(args)
	if out == nil {
		out = map[string]any{}
	}
	sources := maps.Clone(stepSources)
	if sources == nil {
		sources = map[string]string{}
	}
	declared := map[string]bool{}
	for _, in := range wf.Inputs {
		declared[in.Path] = true
	}
	for k, v := range pc.Arguments {
		if _, isParam := skill.Param(k); isParam && !declared[k] && pc.Sources[k] == batch.SourceUser {
			out[k], sources[k] = v, batch.SourceUser
		}
	}
	return out, sources
}

// workflowStepID names step i of workflow call callID: its stored outcome's
// field and its A2A call id.
func workflowStepID(callID string, i int) string { return fmt.Sprintf("%s.%d", callID, i) }

// timeForStep reports whether ctx leaves CallTimeout for one more
// specialist call.
func (h *Handlers) timeForStep(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return !ok || h.CallTimeout <= 0 || time.Until(dl) >= h.CallTimeout
}

// storeStep keeps a finished workflow step. It is what a resumed or
// retried invocation starts after; failing to store it costs only a rerun
// of the step (the specialist sees the same call id), so it is logged, not
// fatal.
func (h *Handlers) storeStep(ctx context.Context, r Ref, stepID, skill string, o record.CallOutcome) {
	o.CallID, o.Tool = stepID, skill
	if _, err := h.Store.PutOutcome(ctx, r.ConversationID, r.TurnID, o); err != nil {
		h.log().WarnContext(ctx, "store workflow step", "conversation", r.ConversationID, "turn", r.TurnID, "step", stepID, "error", err)
	}
}
