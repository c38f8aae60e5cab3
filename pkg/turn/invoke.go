package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/catalog/batch"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/telemetry"
	"github.com/clientagent/clientagent/pkg/tool"
)

// InvokeInput is one Map iteration's payload. Fail is set by the
// iteration's catch (CallFailed) with the error that ended its InvokeCall.
type InvokeInput struct {
	Ref
	CallID string          `json:"call_id"`
	Fail   json.RawMessage `json:"fail,omitempty"`
}

// InvokeOutput is the call's result status; the result itself is in Valkey.
type InvokeOutput struct {
	CallID string `json:"call_id"`
	Status string `json:"status"`
}

// Invoke runs one ready call (a specialist skill over A2A or a workflow),
// stores its outcome once under its call id, and records the executed call
// in the audit log: only this step knows that a specialist ran. A retried
// Invoke whose outcome is stored returns it without running the specialist
// again. A failing specialist is a failed result, never a failed turn, and
// an iteration that fails anyway (Fail set) stores a failed outcome, so a
// batch never fails while a sibling call runs. Invoke does not start a call
// of a turn that has ended, nor a call that is not ready.
func (h *Handlers) Invoke(ctx context.Context, in InvokeInput) (InvokeOutput, error) {
	ctx, span := h.startStep(ctx, in.Ref, telemetry.SpanInvokeCall, semconv.GenAIToolCallIDKey.String(in.CallID))
	out, err := h.invoke(ctx, in)
	endStep(span, out.Status, err)
	return out, err
}

func (h *Handlers) invoke(ctx context.Context, in InvokeInput) (InvokeOutput, error) {
	started := h.now()
	conv, t, outcomes, err := h.load(ctx, in.Ref, true)
	if err != nil {
		return InvokeOutput{}, err
	}
	pc := findCall(t, in.CallID)
	if o, ok := outcomes[in.CallID]; ok {
		if pc != nil {
			// The audit write may be what failed the first time.
			if err := h.audit(ctx, h.executed(conv, t, *pc, o)); err != nil {
				return InvokeOutput{}, err
			}
		}
		return InvokeOutput{CallID: in.CallID, Status: o.StepStatus()}, nil
	}
	if pc == nil {
		return InvokeOutput{}, &NotFoundError{What: "call " + in.CallID}
	}
	// A call that had started when its turn was cancelled (CallRunning)
	// still runs to its end: this is a resumed or retried invoke of it.
	if pc.State != record.CallRunning && (t.Status.Final() || pc.State != record.CallReady) {
		h.stepLog(ctx, in.Ref, "invoke", pc.Tool, "refused", started, 0, fmt.Errorf("call %s is %s in a %s turn", pc.CallID, pc.State, t.Status))
		return InvokeOutput{CallID: in.CallID, Status: record.ResultNotExecuted}, nil
	}
	var o record.CallOutcome
	if len(in.Fail) > 0 {
		name, cause := stateError(in.Fail)
		h.log().ErrorContext(ctx, "call failed", "conversation", in.ConversationID, "turn", in.TurnID, "call", in.CallID, "error", name, "cause", cause)
		o = failedOutcome(fmt.Sprintf("The call could not be completed: %s (%s).", failureCause(name, cause), name))
	} else {
		// The call's start and a cancel are ordered here, in the store: a
		// cancel marked first means the call never runs; a call started
		// first runs to its end, and its outcome is what the record says.
		// The call's step.started rides on that write.
		var evs []record.Event
		if h.Events != nil {
			evs = append(evs, h.live(record.EventStepStarted, t.ID, map[string]any{"tool": pc.Tool, "call_id": pc.CallID}))
		}
		ok, err := h.Store.StartCall(ctx, in.ConversationID, in.TurnID, pc.CallID, evs...)
		if err != nil {
			return InvokeOutput{}, &TransientError{Err: err}
		}
		if !ok {
			h.stepLog(ctx, in.Ref, "invoke", pc.Tool, "refused", started, 0, fmt.Errorf("call %s: the turn was cancelled before it started", pc.CallID))
			return InvokeOutput{CallID: in.CallID, Status: record.ResultNotExecuted}, nil
		}
		if h.Live != nil && len(evs) > 0 {
			h.Live.Publish(ctx, in.ConversationID, evs...) // as the log got them, with StartCall
		}
		var cont *WorkflowContinuesError
		o, cont, err = h.run(ctx, in.Ref, conv, t, pc, outcomes)
		if err != nil {
			return InvokeOutput{}, err
		}
		if cont != nil {
			h.stepLog(ctx, in.Ref, "invoke", pc.Tool, "continues", started, 0, nil)
			return InvokeOutput{}, cont
		}
	}
	o.CallID, o.Tool = pc.CallID, pc.Tool
	// What a specialist answered is stored within the limits the model
	// reads it in (docs/design.md §3.5), so a huge reply never bloats the record;
	// the raw payload has its own cap.
	o.Result.Summary = batch.Truncate(o.Result.Summary, batch.MaxSummary)
	o.Result.Result = batch.Truncate(o.Result.Result, batch.MaxResult)
	o.Result.Error = batch.Truncate(o.Result.Error, batch.MaxError)
	if o.StartedAt.IsZero() {
		o.StartedAt = started
	}
	if o.EndedAt.IsZero() {
		o.EndedAt = h.now()
	}
	if h.Events != nil && len(in.Fail) == 0 {
		o.Events = []record.Event{h.stepEnded(t.ID, pc.Tool, pc.CallID, o.StepStatus(), o.StartedAt, o.EndedAt, nil)}
	}
	// The specialist ran: its outcome is written however long the store
	// takes to come back (within the step's time), not run again.
	var put record.Put
	tries, err := h.outlast(ctx, func() (err error) {
		put, err = h.Store.PutOutcome(ctx, in.ConversationID, in.TurnID, o)
		return err
	})
	if tries > 1 && err == nil {
		put.Stored = true // an earlier try may have stored it before it timed out: record the call either way
	}
	if errors.Is(err, record.ErrNotFound) {
		return InvokeOutput{}, &NotFoundError{What: "conversation " + in.ConversationID}
	} else if err != nil {
		return InvokeOutput{}, &TransientError{Err: fmt.Errorf("store outcome of %s: %w", pc.CallID, err)}
	}
	if put.Stored {
		if h.Live != nil && len(o.Events) > 0 {
			h.Live.Publish(ctx, in.ConversationID, o.Events...) // as the log got them, with the first write
		}
		if err := h.audit(ctx, h.executed(conv, t, *pc, o)); err != nil {
			return InvokeOutput{}, err
		}
	}
	if put.Cancelled {
		// The turn was cancelled while the call ran: no AppendResults
		// follows, so the call's real outcome joins the ended turn now.
		if err := h.settleLate(ctx, in.Ref); err != nil {
			return InvokeOutput{}, err
		}
	}
	status := o.StepStatus()
	h.stepLog(ctx, in.Ref, "invoke", pc.Tool, status, started, 0, nil)
	return InvokeOutput{CallID: in.CallID, Status: status}, nil
}

// run invokes the call's specialist, or runs its workflow's steps.
func (h *Handlers) run(ctx context.Context, r Ref, conv *record.Conversation, t *record.Turn, pc *record.PendingCall, outcomes map[string]record.CallOutcome) (record.CallOutcome, *WorkflowContinuesError, error) {
	cat, err := h.catalog(ctx)
	if err != nil {
		return record.CallOutcome{}, nil, err
	}
	if err := ResolveArtifacts(ctx, h.Store, conv, t); err != nil {
		return record.CallOutcome{}, nil, err
	}
	arts := Env(conv, t).Artifacts
	// The specialist (or a workflow's steps) must finish before the step's
	// own deadline, so its outcome, even a timeout, is still stored.
	callCtx, cancel := withMargin(ctx)
	defer cancel()
	entry, ok := cat.Lookup(pc.Tool)
	switch {
	case !ok:
		return failedOutcome(fmt.Sprintf("tool %s is no longer available", pc.Tool)), nil, nil
	case entry.Kind == catalog.EntryWorkflow:
		wctx, span := h.startTool(callCtx, pc.Tool, pc.CallID, "", pc.Arguments)
		o, cont := h.runWorkflow(wctx, r, conv, t, pc, cat, entry.Workflow, arts, outcomes)
		if cont != nil {
			span.SetAttributes(attrStatus.String("continues"))
			span.End()
		} else {
			h.endTool(span, o)
		}
		return o, cont, nil
	case entry.Kind == catalog.EntrySkill:
		tctx, span := h.startTool(callCtx, pc.Tool, pc.CallID, toolAgentURL(entry), pc.Arguments)
		o := h.Invoker.Invoke(tctx, tool.Call{
			ConversationID: conv.Meta.ID,
			TurnID:         t.ID,
			CallID:         pc.CallID,
			Capability:     entry.Capability,
			Arguments:      pc.Arguments,
			Sources:        pc.Sources,
			Files:          referencedFiles(pc.Arguments, arts),
			Continue:       pc.A2A,
		})
		h.endTool(span, o)
		return o, nil, nil
	}
	return failedOutcome(fmt.Sprintf("tool %s cannot be invoked", pc.Tool)), nil, nil
}

// failureCause is what a failed call's result says of the error that
// ended its invocation: never the internal details (they are logged).
func failureCause(name, cause string) string {
	switch {
	case name == "WorkflowContinuesError":
		return "the workflow ran longer than the platform allows (" + cause + ")"
	case name == "TransientError":
		return "a platform service stayed unavailable through the retries"
	case name == "States.Timeout" || strings.HasPrefix(name, "Lambda."):
		return "the invocation failed or timed out"
	}
	return "an internal error"
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
		stepID := record.WorkflowStepID(pc.CallID, i)
		o, done := stored[stepID]
		if !done || o.Result.Status != record.ResultSucceeded {
			if ran && !h.timeForStep(ctx) {
				return record.CallOutcome{}, &WorkflowContinuesError{CallID: pc.CallID, Next: i}
			}
			if i > 0 {
				// A cancel stops a workflow between its steps: the
				// steps that ran keep their results and files.
				if ok, err := h.Store.StartCall(ctx, r.ConversationID, r.TurnID, stepID); err == nil && !ok {
					f := failedOutcome(fmt.Sprintf("workflow %s stopped before %s: the turn was cancelled; the steps before it ran", wf.ID, wf.StepLabel(i)))
					f.Artifacts, f.Result.Artifacts = all.Artifacts, all.Result.Artifacts
					return f, nil
				}
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
			call := tool.Call{
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
			sctx, span := h.startTool(ctx, st.Skill, stepID, toolAgentURL(entry), call.Arguments)
			o = h.Invoker.Invoke(sctx, call)
			h.endTool(span, o)
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
			// Every finished step is stored, the last too: a retry resumes
			// after it, and the turn shows it nested under its workflow.
			if o.StartedAt.IsZero() {
				o.StartedAt, o.EndedAt = stepStart, h.now()
			}
			h.storeStep(ctx, r, stepID, st.Skill, o)
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
// workflow call's arguments under the skill's own field names; for an MCP
// tool, also the fields its elicitation asked for), and the sources
// marking them as the user's.
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
	// An MCP server's elicitation asks for fields that are not the tool's
	// parameters; its invoker takes them from the arguments (pkg/mcp).
	elicits := skill.Capability.MCPServer != ""
	for k, v := range pc.Arguments {
		_, isParam := skill.Param(k)
		if (isParam || elicits) && !declared[k] && pc.Sources[k] == batch.SourceUser {
			out[k], sources[k] = v, batch.SourceUser
		}
	}
	return out, sources
}

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
