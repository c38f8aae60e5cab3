package turn

import (
	"context"
	"errors"
	"fmt"
	"github.com/clientagent/clientagent/pkg/audit"
	"slices"
	"time"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/catalog/batch"
	"github.com/clientagent/clientagent/pkg/guardian"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/telemetry"
	"github.com/clientagent/clientagent/pkg/wire"
)

// Reply is what the user sent to a paused batch, delivered by the API
// through the task token (or, for Expired, by the state machine's timeout).
type Reply struct {
	// Answers are form answers by call id.
	Answers map[string]map[string]any `json:"answers,omitempty"`
	// Approval decides every call of the open approval it names.
	Approval *Decision `json:"approval,omitempty"`
	// Files are uploads the user made with this reply (artifact ids); the
	// calls it answers name them in their results (docs/design.md §3.5).
	Files []string `json:"files,omitempty"`
	// Superseded: the user sent new free text instead.
	Superseded bool `json:"superseded,omitempty"`
	// Expired: nobody answered in time.
	Expired bool `json:"expired,omitempty"`
}

// Decision is an approval decision on the open approval named ID
// (batch.ApprovalID): it covers exactly the calls and arguments shown.
// Arguments, with approve, are the user's edits by call id (docs/design.md §9
// "modify"); they are validated like the model's arguments.
type Decision = wire.Decision

// ErrEditRefused is an edit that cannot apply at all: with a reject, or
// for a call that is not in the approval (the API answers 400 invalid_edit).
var ErrEditRefused = errors.New("edit refused")

// ApprovalID is the id of turn t's open approval, "" when none is open.
func ApprovalID(t *record.Turn) string { return batch.ApprovalID(t.Pending) }

// Decide applies decision d to the calls of the open approval in calls
// (edits first, then the decision) and reports whether it approved. It
// refuses, changing nothing, a decision on another approval than the open
// one (batch.ErrApprovalStale), edits with a reject or for a call not in
// the approval (ErrEditRefused), and edits that do not validate
// (batch.ErrInvalidEdit). The
// API checks a user's answer with it before the execution applies it.
func Decide(cat *catalog.Catalog, calls []record.PendingCall, d Decision, e catalog.Env) error {
	open := batch.ApprovalID(calls)
	if open == "" {
		return fmt.Errorf("approval %s: %w", d.ID, batch.ErrNotWaiting)
	}
	if d.ID != open {
		return fmt.Errorf("approval %s is not the open approval: %w", d.ID, batch.ErrApprovalStale)
	}
	approve := d.Decision == "approve"
	if len(d.Arguments) > 0 && !approve {
		return fmt.Errorf("%w: edited arguments come only with approve", ErrEditRefused)
	}
	next := slices.Clone(calls)
	_, idx := batch.NextPause(next)
	for id := range d.Arguments {
		if !slices.ContainsFunc(idx, func(i int) bool { return next[i].CallID == id }) {
			return fmt.Errorf("%w: call %s is not in the approval", ErrEditRefused, id)
		}
	}
	for _, i := range idx {
		pc := &next[i]
		if args, ok := d.Arguments[pc.CallID]; ok {
			if err := batch.ApplyEdit(cat, pc, args, e); err != nil {
				return err
			}
		}
		if err := batch.ApplyDecision(pc, approve, d.Note); err != nil {
			return err
		}
	}
	copy(calls, next)
	return nil
}

// ValidateInput is Validate's payload.
type ValidateInput struct {
	Ref
	Reply *Reply `json:"reply"`
}

// ValidateOutput tells the state machine what to do with the batch. Calls
// are the ids of the calls to run now.
type ValidateOutput struct {
	Next  string   `json:"next"`
	Calls []string `json:"calls,omitempty"`
}

// Validate checks every call of the newest assistant message, or applies
// the user's reply to the paused batch (docs/design.md §3.3). Batch rule: while any
// call needs a form answer or an approval nothing runs; forms come first,
// then approval. Answers are validated like the model's arguments.
func (h *Handlers) Validate(ctx context.Context, in ValidateInput) (ValidateOutput, error) {
	ctx, span := h.startStep(ctx, in.Ref, telemetry.SpanValidateBatch, attrReply.String(replyKind(in.Reply)))
	out, err := h.validate(ctx, in)
	endStep(span, out.Next, err)
	return out, err
}

func (h *Handlers) validate(ctx context.Context, in ValidateInput) (ValidateOutput, error) {
	started := h.now()
	conv, t, outcomes, err := h.load(ctx, in.Ref, true)
	if err != nil {
		return ValidateOutput{}, err
	}
	if t.Status.Final() {
		// A call that had started when its turn was cancelled and whose
		// outcome is not stored lost its step (a crash, a lost loop
		// execution): it runs again, to its end (Invoke), as a resumed
		// batch would run it.
		if lost := unsettled(t, outcomes); len(lost) > 0 {
			return ValidateOutput{Next: NextInvoke, Calls: lost}, nil
		}
		return ValidateOutput{Next: NextEnd}, nil
	}
	cat, err := h.catalog(ctx)
	if err != nil {
		return ValidateOutput{}, err
	}
	var edits any
	if in.Reply != nil && in.Reply.Approval != nil {
		edits = in.Reply.Approval.Arguments
	}
	if err := ResolveArtifacts(ctx, h.Store, conv, t, edits); err != nil {
		return ValidateOutput{}, err
	}
	e := Env(conv, t)
	before := callStates(t)
	// A batch the LLM step validated in its own write (validateEarly), or
	// that this step's earlier try saved, is stored as it is: when nothing
	// below changes it, there is nothing to write.
	stored := in.Reply == nil && len(t.Pending) > 0 && t.Status == record.StatusRunning && t.TaskToken == "" && t.WaitingSince.IsZero()
	if in.Reply != nil {
		// The user's wait ends here, whatever the reply.
		h.awaitEnded(ctx, in.Ref, t, replyKind(in.Reply))
	}
	switch r := in.Reply; {
	case r == nil:
		if len(t.Pending) == 0 {
			last, ok := lastMessage(t)
			if !ok || len(last.ToolCalls) == 0 {
				return ValidateOutput{Next: NextAppend}, nil
			}
			t.Pending = batch.Validate(cat, last.ToolCalls, e)
		}
	case r.Superseded:
		h.endWait(t)
		note := "Not executed: the user sent a new message instead of answering."
		if fn := filesNote(conv, r.Files); fn != "" {
			note += " " + fn
		}
		arts, err := h.closeBatch(ctx, conv, t, outcomes, record.StatusSuperseded, note, "", nil)
		if err != nil {
			return ValidateOutput{}, err
		}
		return h.endBatch(ctx, in.Ref, t, arts)
	case r.Expired:
		h.endWait(t)
		msg := fmt.Sprintf("This request expired: the %s was not answered within %s, so it was not run. Send the request again to retry.", pauseWord(t), h.Limits.AwaitTimeout.Round(time.Second))
		arts, err := h.closeBatch(ctx, conv, t, outcomes, record.StatusExpired, "Not executed: the request for the user's input expired.", msg, nil)
		if err != nil {
			return ValidateOutput{}, err
		}
		return h.endBatch(ctx, in.Ref, t, arts)
	default:
		h.applyReply(cat, conv, t, r, e)
	}
	h.endWait(t)
	t.TaskToken = ""
	if t.Status.Waiting() {
		t.Status = record.StatusRunning
	}
	out := ValidateOutput{Next: NextAppend}
	var guarded []audit.Event
	if kind, _ := batch.NextPause(t.Pending); kind != "" {
		out.Next = NextAwait
	} else {
		// Every call is cleared by the user: the guardian checks the
		// arguments that will run, before any of them does.
		if guarded, err = h.guardCalls(ctx, conv, t, outcomes); err != nil {
			arts, cerr := h.closeBatch(ctx, conv, t, outcomes, record.StatusFailed, "Not executed: the policy guardian could not check the calls.", h.guardFailure(ctx, in.Ref, err), nil)
			if cerr != nil {
				return ValidateOutput{}, cerr
			}
			return h.endBatch(ctx, in.Ref, t, arts)
		}
		if reason, blocked := selectionBlocked(t); blocked {
			// An explicitly selected workflow was the whole request: the
			// block decides the turn, which ends blocked, and its inputs
			// are never handed to the model.
			if err := h.audit(ctx, append(h.decisions(conv, t, before), guarded...)); err != nil {
				return ValidateOutput{}, err
			}
			t.Pending = nil
			if _, err := h.endBlockedRequest(ctx, in.Ref, t, reason); err != nil {
				return ValidateOutput{}, err
			}
			h.stepLog(ctx, in.Ref, "validate", "", string(t.Status), started, 0, nil)
			return ValidateOutput{Next: NextEnd}, nil
		}
		for _, pc := range t.Pending {
			if _, done := outcomes[pc.CallID]; pc.State == record.CallReady && !done {
				out.Calls = append(out.Calls, pc.CallID)
			}
		}
		if len(out.Calls) > 0 {
			out.Next = NextInvoke
		}
	}
	if err := h.audit(ctx, append(h.decisions(conv, t, before), guarded...)); err != nil {
		return ValidateOutput{}, err
	}
	if !stored || out.Next == NextAwait || h.guardian().Enabled(guardian.ToolCall) {
		if err := h.save(ctx, in.Ref, t); err != nil {
			return ValidateOutput{}, err
		}
	}
	h.stepLog(ctx, in.Ref, "validate", "", out.Next, started, 0, nil)
	return out, nil
}

// selectionBlocked reports whether the guardian blocked the call of turn
// t's selected workflow (the synthetic call of startWorkflow), and why.
func selectionBlocked(t *record.Turn) (string, bool) {
	if t.Workflow == nil {
		return "", false
	}
	for _, pc := range t.Pending {
		if pc.CallID == SelectionCallID(t.ID) && pc.State == record.CallBlocked {
			return pc.Note, true
		}
	}
	return "", false
}

// applyReply merges form answers and the approval decision into the
// batch, and names the reply's files on the calls it answered. An answer
// or a decision that fails validation leaves its calls waiting (the API
// refuses such replies before they get here; this guards races).
func (h *Handlers) applyReply(cat *catalog.Catalog, conv *record.Conversation, t *record.Turn, r *Reply, e catalog.Env) {
	before := callStates(t)
	form := record.Answer{At: h.now(), Kind: record.AnswerForm, Files: r.Files}
	for i := range t.Pending {
		pc := &t.Pending[i]
		if pc.State != record.CallNeedsInput {
			continue
		}
		ans, ok := r.Answers[pc.CallID]
		if !ok {
			continue
		}
		if err := batch.ApplyAnswers(cat, pc, ans, e); err != nil {
			h.log().Warn("form answer rejected", "call", pc.CallID, "error", err)
			continue
		}
		if form.Values == nil {
			form.Values = map[string]map[string]any{}
		}
		form.Values[pc.CallID] = ans
		// A specialist's input-required answer continues the same A2A
		// task with changed arguments; a skill that needs approval needs a
		// new approval of them (docs/design.md §8).
		if entry, ok := cat.Lookup(pc.Tool); ok && pc.A2A != nil && pc.State == record.CallReady && entry.RequiresApproval {
			pc.State, pc.Approved = record.CallNeedsApproval, false
			pc.ApprovalHash = catalog.ArgumentsHash(pc.Arguments)
			if entry.Kind == catalog.EntryWorkflow {
				pc.Plan = entry.Workflow.Plan(pc.Arguments)
			}
		}
	}
	if form.Values != nil {
		t.Answers = append(t.Answers, form)
	}
	if r.Approval != nil {
		if err := Decide(cat, t.Pending, *r.Approval, e); err != nil {
			h.log().Warn("approval refused", "turn", t.ID, "approval", r.Approval.ID, "error", err)
		} else {
			a := record.Answer{At: h.now(), Kind: record.AnswerApproval, Decision: r.Approval.Decision, Note: r.Approval.Note, Files: r.Files}
			for id := range r.Approval.Arguments {
				a.Edited = append(a.Edited, id)
			}
			slices.Sort(a.Edited)
			t.Answers = append(t.Answers, a)
			if r.Approval.Decision == "approve" {
				// docs/design.md §3.4a restore fidelity: an approval leaves a plan_approved
				// entry without content.
				t.History = append(t.History, record.HistoryEntry{Role: "user", Kind: record.KindPlanApproved, At: h.now()})
			}
		}
	}
	if note := filesNote(conv, r.Files); note != "" {
		for i := range t.Pending {
			if pc := &t.Pending[i]; pc.State != before[pc.CallID] {
				pc.FilesNote = note
			}
		}
	}
}

// filesNote names the uploads ids of conv for a tool result (docs/design.md §3.5).
func filesNote(conv *record.Conversation, ids []string) string {
	var files []artifact.Artifact
	for _, id := range ids {
		for _, a := range conv.Artifacts {
			if a.ID == id {
				files = append(files, a)
			}
		}
	}
	if len(files) == 0 {
		return ""
	}
	return catalog.FilesNote("Files the user uploaded with this reply", files)
}

// closeBatch ends a paused or broken batch: a call whose result is stored
// keeps it (it ran: its result and artifacts reach the transcript and the
// catalog), every other open call gets a not_executed result, so the
// transcript stays valid; the audit log gets both, before the turn is saved.
func (h *Handlers) closeBatch(ctx context.Context, conv *record.Conversation, t *record.Turn, outcomes map[string]record.CallOutcome, status record.Status, note, msg string, running map[string]bool) ([]artifact.Artifact, error) {
	before := callStates(t)
	var late []record.PendingCall // started, not ended: settled later
	for i := range t.Pending {
		pc := &t.Pending[i]
		if o, ran := outcomes[pc.CallID]; ran && pc.State == record.CallReady && o.InputRequired == nil {
			continue
		}
		if running[pc.CallID] && pc.State == record.CallReady {
			pc.State, pc.Note = record.CallRunning, runningNote
			continue
		}
		switch pc.State {
		case record.CallInvalid, record.CallRejected, record.CallAnswered:
		default:
			pc.State = record.CallNotExecuted
			pc.Note = note
		}
	}
	t.Status = status
	t.Error = msg
	t.TaskToken = ""
	if err := h.audit(ctx, h.decisions(conv, t, before)); err != nil {
		return nil, err
	}
	cat, err := h.catalog(ctx)
	if err != nil {
		return nil, err
	}
	// The turn ends either way: a result the guardian cannot check is
	// withheld, not shown.
	outcomes, guarded, _ := h.guardResults(ctx, conv, t, outcomes)
	if err := h.audit(ctx, guarded); err != nil {
		return nil, err
	}
	closing := t.Pending[:0:0]
	for _, pc := range t.Pending {
		if pc.State == record.CallRunning {
			late = append(late, pc)
		} else {
			closing = append(closing, pc)
		}
	}
	t.Pending = closing
	arts := h.appendResults(cat, t, outcomes)
	t.Pending = late
	if msg != "" {
		t.History = append(t.History, record.HistoryEntry{Role: "assistant", Kind: "error", Content: msg, At: h.now()})
	}
	return arts, nil
}

// endBatch saves a turn its batch closed, and ends the execution.
func (h *Handlers) endBatch(ctx context.Context, r Ref, t *record.Turn, arts []artifact.Artifact) (ValidateOutput, error) {
	if err := h.save(ctx, r, t, arts...); err != nil {
		return ValidateOutput{}, err
	}
	h.stepLog(ctx, r, "validate", "", string(t.Status), h.now(), 0, nil)
	return ValidateOutput{Next: NextEnd}, nil
}

// endWait adds the wait that ends now to the time the turn waited for the
// user, which its wall-clock budget does not count.
func (h *Handlers) endWait(t *record.Turn) {
	if !t.WaitingSince.IsZero() {
		t.Waited += h.now().Sub(t.WaitingSince)
		t.WaitingSince = time.Time{}
	}
}

func pauseWord(t *record.Turn) string {
	if kind, _ := batch.NextPause(t.Pending); kind == "approval" {
		return "approval"
	}
	return "form"
}

// hasRunningCalls reports whether turn t, ended by a cancel, has calls
// that had started then (record.CallRunning) and are not settled yet.
func hasRunningCalls(t *record.Turn) bool {
	return slices.ContainsFunc(t.Pending, func(pc record.PendingCall) bool { return pc.State == record.CallRunning })
}
