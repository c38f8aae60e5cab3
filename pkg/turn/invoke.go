package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/catalog/batch"
	"github.com/clientagent/clientagent/pkg/guardian"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/telemetry"
	"github.com/clientagent/clientagent/pkg/tool"
	"github.com/clientagent/clientagent/pkg/workflow"
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
	// After is the token of AppendResults' read, which the outcome's
	// write read ahead (Ref.After; "" when the store keeps none); or, when
	// the write appended the batch (Appended), the next LLMStep's read.
	After string `json:"after,omitempty"`
	// Appended says the call was its batch's only one and its outcome's
	// write appended its result to the turn, in the same round trip: the
	// write AppendResults would have made ("A batch of one call is
	// appended by its call", docs/architecture.md).
	Appended bool `json:"appended,omitempty"`
}

// Invoke runs one ready call with the source of its kind (a specialist's
// skill, an MCP server's tool, or a workflow's steps), stores its outcome
// once under its call id, and records the executed call in the audit log: only this step knows that a specialist ran. A retried
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
	var (
		conv     *record.Conversation
		t        *record.Turn
		outcomes map[string]record.CallOutcome
		began    bool
		err      error
	)
	if len(in.Fail) > 0 {
		conv, t, outcomes, err = h.load(ctx, in.Ref, true)
	} else {
		// The call's start and a cancel are ordered here, in the store, in
		// the step's read: a cancel marked first means the call never runs;
		// a call started first runs to its end, and its outcome is what the
		// record says. The call's step.started rides on that read.
		// A call its LLM step's write started and told (saveBatch) is
		// not told again: the read takes that write's.
		start := record.Start{CallID: in.CallID}
		told := h.told.take(startKey(in.Ref, in.CallID))
		if h.events().Enabled() && !told {
			start.Events = []record.Event{h.live(record.EventStepStarted, in.TurnID, map[string]any{"tool": record.CallTool, "call_id": in.CallID})}
		}
		conv, t, outcomes, began, err = h.loadStart(ctx, in.Ref, start)
		if began && err == nil && !told {
			if pc := findCall(t, in.CallID); pc != nil {
				h.events().Publish(ctx, in.ConversationID, start.Told(pc.Tool)...) // as the log got them
			}
		}
	}
	if err != nil {
		return InvokeOutput{}, err
	}
	pc := findCall(t, in.CallID)
	if o, ok := outcomes[in.CallID]; ok {
		appended := false
		if pc == nil {
			// The outcome's write appended the batch (a batch of one
			// call): the call is in the turn's history.
			if c, ok := appendedCall(t, in.CallID); ok {
				pc, appended = &c, true
			}
		}
		if pc != nil {
			// The audit write may be what failed the first time.
			if err := h.audit(ctx, h.executed(conv, t, *pc, o)); err != nil {
				return InvokeOutput{}, err
			}
		}
		return InvokeOutput{CallID: in.CallID, Status: o.StepStatus(), Appended: appended}, nil
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
	var (
		o        record.CallOutcome
		deferred *artifact.Deferred
	)
	if len(in.Fail) > 0 {
		name, cause := stateError(in.Fail)
		h.log().ErrorContext(ctx, "call failed", "conversation", in.ConversationID, "turn", in.TurnID, "call", in.CallID, "error", name, "cause", cause)
		o = failedOutcome(fmt.Sprintf("The call could not be completed: %s (%s).", failureCause(name, cause), name))
	} else {
		if !began {
			h.stepLog(ctx, in.Ref, "invoke", pc.Tool, "refused", started, 0, fmt.Errorf("call %s: the turn was cancelled before it started", pc.CallID))
			return InvokeOutput{CallID: in.CallID, Status: record.ResultNotExecuted}, nil
		}
		var cont *WorkflowContinuesError
		o, deferred, cont, err = h.run(ctx, conv, t, pc, outcomes)
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
	if h.events().Enabled() && len(in.Fail) == 0 {
		o.Events = []record.Event{h.stepEnded(t.ID, pc.Tool, pc.CallID, o.StepStatus(), o.StartedAt, o.EndedAt, nil)}
	}
	// The specialist ran: the audit log records the call while its outcome
	// is written (a retry that finds the outcome records it again, under
	// the same name), so a call that ran is recorded even when the store
	// cannot keep its outcome. The outcome is written however long the
	// store takes to come back (within the step's time): the call is not
	// run again. An iteration that failed (Fail), whose specialist may or
	// may not have run, is recorded once its failed outcome is stored.
	audited := func() error { return nil }
	var app *appending
	if len(in.Fail) == 0 {
		audited = h.auditAside(ctx, h.executed(conv, t, *pc, o))
		app = h.appendingOf(ctx, t, pc, o)
	}
	put, after, appended, err := h.putOutcome(ctx, in, o, app)
	auditErr := audited()
	if err == nil && put.OverQuota != nil {
		// A file the call returned does not fit the conversation's quota,
		// which the outcome's write counts: the call fails whole, and its
		// files go, as when a copy does not fit.
		if derr := deferred.Discard(ctx); derr != nil {
			h.log().WarnContext(ctx, "files over the quota not deleted", "conversation", in.ConversationID, "call", pc.CallID, "error", derr.Error())
		}
		o = h.overQuota(t, pc, o, put.OverQuota)
		if auditErr == nil {
			auditErr = h.audit(ctx, h.executed(conv, t, *pc, o)) // under the same name: the failed call
		}
		put, after, appended, err = h.putOutcome(ctx, in, o, nil)
	}
	if errors.Is(err, record.ErrNotFound) {
		return InvokeOutput{}, &NotFoundError{What: "conversation " + in.ConversationID}
	} else if err != nil {
		return InvokeOutput{}, &TransientError{Err: fmt.Errorf("store outcome of %s: %w", pc.CallID, err)}
	}
	if auditErr != nil {
		return InvokeOutput{}, auditErr
	}
	if put.Stored {
		h.events().Publish(ctx, in.ConversationID, o.Events...) // as the log got them, with the first write
		if len(in.Fail) > 0 {
			if err := h.audit(ctx, h.executed(conv, t, *pc, o)); err != nil {
				return InvokeOutput{}, err
			}
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
	if appended {
		h.events().Publish(ctx, in.ConversationID, app.t.Events...) // the append's, after the outcome's
		h.stepLog(ctx, in.Ref, "append", "", "appended", started, 0, nil)
	}
	return InvokeOutput{CallID: in.CallID, Status: status, After: after, Appended: appended}, nil
}

// appendedCall is call id of t's appended batch as its history tells it:
// its tool and the inputs it ran with (the user's note on its approval,
// which its pending call held, is not kept there).
func appendedCall(t *record.Turn, id string) (record.PendingCall, bool) {
	for i := len(t.History) - 1; i >= 0; i-- {
		if e := t.History[i]; e.Kind == record.KindToolResult && e.CallID == id {
			return record.PendingCall{CallID: id, Tool: e.Tool, Arguments: e.ToolInputs}, true
		}
	}
	return record.PendingCall{}, false
}

// appending is the append of a batch of one call, written with the call's
// outcome (record.AppendingPut): the turn with the result appended, its
// write's events, and the artifacts it adds to the catalog.
type appending struct {
	t    *record.Turn
	arts []artifact.Artifact
}

// appendingOf is the append of t's batch when pc is the batch's only call
// and its outcome o needs nothing but appending: no form to reopen (an
// input-required answer), no workflow steps (stored apart, as they ran),
// no guardian check of results; and the store writes it with the
// outcome. Else it is nil, and AppendResults appends, as for every other
// batch. It is what AppendResults would write (appendResults), made on a
// copy of t: t stays the turn as read, should the store refuse the append.
func (h *Handlers) appendingOf(ctx context.Context, t *record.Turn, pc *record.PendingCall, o record.CallOutcome) *appending {
	if _, ok := h.Store.(record.AppendingPut); !ok {
		return nil
	}
	if len(t.Pending) != 1 || &t.Pending[0] != pc || pc.State != record.CallReady || t.Status.Final() ||
		o.InputRequired != nil || pc.Kind == record.KindWorkflow || h.guardian().Enabled(guardian.ToolResult) {
		return nil
	}
	cat, err := h.catalog(ctx)
	if err != nil {
		return nil
	}
	at := *t
	at.Messages, at.History, at.Steps, at.Produced = slices.Clip(t.Messages), slices.Clip(t.History), slices.Clip(t.Steps), slices.Clip(t.Produced)
	at.ToolResults, at.Repeats, at.Failures = maps.Clone(t.ToolResults), maps.Clone(t.Repeats), maps.Clone(t.Failures)
	at.Events = nil
	arts := h.appendResults(cat, &at, map[string]record.CallOutcome{pc.CallID: o})
	at.UpdatedAt = h.now()
	if h.events().Enabled() {
		at.Events = h.savedEvents(&at, arts)
	}
	return &appending{t: &at, arts: arts}
}

// putOutcome stores o however long the store takes to come back (within
// the step's time), reading AppendResults' read ahead when the store does
// (record.ReadAhead): the token is what that step's input names. With app
// (a batch of one call), the same round trip appends o's result to the
// turn when the store finds o stored (appended), and reads the next LLM
// step's read ahead instead.
func (h *Handlers) putOutcome(ctx context.Context, in InvokeInput, o record.CallOutcome, app *appending) (record.Put, string, bool, error) {
	var put record.Put
	var after string
	var appended bool
	ra, _ := h.Store.(record.ReadAhead)
	ap, _ := h.Store.(record.AppendingPut)
	tries, err := h.outlast(ctx, func() (err error) {
		if app != nil && ap != nil {
			put, appended, after, err = ap.PutOutcomeAppending(ctx, in.ConversationID, o, app.t, *h.llmQuery(in.Ref), app.arts...)
			return err
		}
		if ra != nil {
			put, after, err = ra.PutOutcomeAhead(ctx, in.ConversationID, in.TurnID, o, *batchQuery(in.Ref))
			return err
		}
		put, err = h.Store.PutOutcome(ctx, in.ConversationID, in.TurnID, o)
		return err
	})
	if tries > 1 && err == nil && put.OverQuota == nil {
		put.Stored = true // an earlier try may have stored it before it timed out
	}
	return put, after, appended, err
}

// overQuota is the failed outcome of a call whose returned file r did not
// fit the conversation's quota.
func (h *Handlers) overQuota(t *record.Turn, pc *record.PendingCall, o record.CallOutcome, r *record.QuotaRefusal) record.CallOutcome {
	name := r.Reservation.ID
	for _, a := range o.Artifacts {
		if a.ID == r.Reservation.ID {
			name = a.Name
		}
	}
	qe := &artifact.QuotaError{Limit: r.Reservation.Limit, Used: r.Used}
	f := failedOutcome(fmt.Sprintf("file %q the call returned does not fit: %v; nothing was stored", name, qe))
	f.CallID, f.Tool, f.StartedAt, f.EndedAt = o.CallID, o.Tool, o.StartedAt, o.EndedAt
	if h.events().Enabled() {
		f.Events = []record.Event{h.stepEnded(t.ID, pc.Tool, pc.CallID, f.StepStatus(), f.StartedAt, f.EndedAt, nil)}
	}
	return f
}

// run runs the call with the source of its tool's kind: a skill's
// (pkg/agents, pkg/mcp) or a workflow's (pkg/workflow, whose steps are
// calls of skills). The files a skill's call returns are stored, their
// count against the quota left to the outcome's write (o.Reserve; what
// that write refuses, the Deferred discards).
func (h *Handlers) run(ctx context.Context, conv *record.Conversation, t *record.Turn, pc *record.PendingCall, outcomes map[string]record.CallOutcome) (record.CallOutcome, *artifact.Deferred, *WorkflowContinuesError, error) {
	cat, err := h.catalog(ctx)
	if err != nil {
		return record.CallOutcome{}, nil, nil, err
	}
	if err := ResolveArtifacts(ctx, h.Store, conv, t); err != nil {
		return record.CallOutcome{}, nil, nil, err
	}
	arts := Env(conv, t).Artifacts
	// The specialist (or a workflow's steps) must finish before the step's
	// own deadline, so its outcome, even a timeout, is still stored.
	callCtx, cancel := withMargin(ctx)
	defer cancel()
	var deferred *artifact.Deferred
	entry, ok := cat.Lookup(pc.Tool)
	if !ok {
		return failedOutcome(fmt.Sprintf("tool %s is no longer available", pc.Tool)), nil, nil, nil
	}
	call := tool.Call{
		ConversationID: conv.Meta.ID,
		TurnID:         t.ID,
		CallID:         pc.CallID,
		Capability:     entry.Capability,
		Arguments:      pc.Arguments,
		Sources:        pc.Sources,
		Continue:       pc.A2A,
	}
	switch entry.Kind {
	case catalog.EntryWorkflow:
		call.Workflow = &tool.WorkflowCall{Template: entry.Workflow, Catalog: cat, Known: arts, Done: outcomes}
	case catalog.EntrySkill:
		call.Files = tool.ReferencedFiles(pc.Arguments, arts)
		callCtx, deferred = artifact.DeferReservations(callCtx)
	default:
		return failedOutcome(fmt.Sprintf("tool %s cannot be invoked", pc.Tool)), nil, nil, nil
	}
	tctx, span := h.startTool(callCtx, pc.Tool, pc.CallID, call.Capability.AgentURL, pc.Arguments)
	o := h.calls().Invoke(tctx, call)
	if o.ContinuesAt > 0 {
		span.SetAttributes(attrStatus.String("continues"))
		span.End()
		return record.CallOutcome{}, nil, &WorkflowContinuesError{CallID: pc.CallID, Next: o.ContinuesAt - 1}, nil
	}
	h.endTool(span, o)
	o.Reserve = reservationsOf(deferred, o.Artifacts)
	return o, deferred, nil, nil
}

// reservationsOf are d's reservations of the files in arts: a file the
// invoker stored and then deleted (a call that failed after it) has none.
func reservationsOf(d *artifact.Deferred, arts []artifact.Artifact) []artifact.Reservation {
	var out []artifact.Reservation
	for _, r := range d.Reservations() {
		for _, a := range arts {
			if a.ID == r.ID {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

// calls routes each call to the source of its kind: the skills' to
// Invoker, a workflow's to a workflow.Source whose steps go to Invoker,
// each in its own span.
func (h *Handlers) calls() tool.Router {
	steps := tracedInvoker{h}
	wf := &workflow.Source{Store: h.Store, Steps: steps, CallTimeout: h.CallTimeout, Now: h.now, Logger: h.log()}
	return tool.Router{tool.KindA2A: h.Invoker, tool.KindMCP: h.Invoker, tool.KindWorkflow: wf}
}

// tracedInvoker is Invoker with an "execute_tool" span around each call:
// a workflow's steps, each its own span under the workflow's.
type tracedInvoker struct{ h *Handlers }

func (ti tracedInvoker) Invoke(ctx context.Context, c tool.Call) record.CallOutcome {
	ctx, span := ti.h.startTool(ctx, c.Capability.Tool, c.CallID, c.Capability.AgentURL, c.Arguments)
	o := ti.h.Invoker.Invoke(ctx, c)
	ti.h.endTool(span, o)
	return o
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
