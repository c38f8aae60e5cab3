package turn

import (
	"context"
	"fmt"
	"time"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/catalog/batch"
	"github.com/clientagent/clientagent/pkg/record"
)

// Reply is what the user sent to a paused batch, delivered by the API
// through the task token (or, for Expired, by the state machine's timeout).
type Reply struct {
	// Answers are form answers by call id.
	Answers map[string]map[string]any `json:"answers,omitempty"`
	// Approval decides every call waiting for approval.
	Approval *Decision `json:"approval,omitempty"`
	// Superseded: the user sent new free text instead.
	Superseded bool `json:"superseded,omitempty"`
	// Expired: nobody answered in time.
	Expired bool `json:"expired,omitempty"`
}

// Decision is an approval decision.
type Decision struct {
	Decision string `json:"decision"` // approve | reject
	Note     string `json:"note,omitempty"`
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
// the user's reply to the paused batch (spec §3.3). Batch rule: while any
// call needs a form answer or an approval nothing runs; forms come first,
// then approval. Answers are validated like the model's arguments.
func (h *Handlers) Validate(ctx context.Context, in ValidateInput) (ValidateOutput, error) {
	started := h.now()
	conv, t, outcomes, err := h.load(ctx, in.Ref, true)
	if err != nil {
		return ValidateOutput{}, err
	}
	if t.Status.Final() {
		return ValidateOutput{Next: NextEnd}, nil
	}
	cat, err := h.catalog(ctx)
	if err != nil {
		return ValidateOutput{}, err
	}
	e := Env(conv, t)
	before := callStates(t)
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
		arts, err := h.closeBatch(ctx, conv, t, outcomes, record.StatusSuperseded, "Not executed: the user sent a new message instead of answering.", "")
		if err != nil {
			return ValidateOutput{}, err
		}
		return h.endBatch(ctx, in.Ref, t, arts)
	case r.Expired:
		msg := fmt.Sprintf("This request expired: the %s was not answered within %s, so it was not run. Send the request again to retry.", pauseWord(t), h.Limits.AwaitTimeout.Round(time.Second))
		arts, err := h.closeBatch(ctx, conv, t, outcomes, record.StatusExpired, "Not executed: the request for the user's input expired.", msg)
		if err != nil {
			return ValidateOutput{}, err
		}
		return h.endBatch(ctx, in.Ref, t, arts)
	default:
		h.applyReply(cat, t, r, e)
	}
	t.TaskToken = ""
	if t.Status.Waiting() {
		t.Status = record.StatusRunning
	}
	out := ValidateOutput{Next: NextAppend}
	if kind, _ := batch.NextPause(t.Pending); kind != "" {
		out.Next = NextAwait
	} else {
		for _, pc := range t.Pending {
			if _, done := outcomes[pc.CallID]; pc.State == record.CallReady && !done {
				out.Calls = append(out.Calls, pc.CallID)
			}
		}
		if len(out.Calls) > 0 {
			out.Next = NextInvoke
		}
	}
	if err := h.audit(ctx, h.decisions(conv, t, before)); err != nil {
		return ValidateOutput{}, err
	}
	if err := h.save(ctx, in.Ref, t); err != nil {
		return ValidateOutput{}, err
	}
	h.stepLog(ctx, in.Ref, "validate", "", out.Next, started, 0, nil)
	return out, nil
}

// applyReply merges form answers and approval decisions into the batch. An
// answer that fails validation leaves its call waiting with its form (the
// API rejects such answers before they get here; this guards races).
func (h *Handlers) applyReply(cat *catalog.Catalog, t *record.Turn, r *Reply, e catalog.Env) {
	for i := range t.Pending {
		pc := &t.Pending[i]
		switch pc.State {
		case record.CallNeedsInput:
			ans, ok := r.Answers[pc.CallID]
			if !ok {
				continue
			}
			if err := batch.ApplyAnswers(cat, pc, ans, e); err != nil {
				h.log().Warn("form answer rejected", "call", pc.CallID, "error", err)
				continue
			}
			// A specialist's input-required answer continues the same A2A
			// task with changed arguments; a skill that needs approval needs a
			// new approval of them (DESIGN §7).
			if entry, ok := cat.Lookup(pc.Tool); ok && pc.A2A != nil && pc.State == record.CallReady && entry.RequiresApproval {
				pc.State, pc.Approved = record.CallNeedsApproval, false
				pc.ApprovalHash = catalog.ArgumentsHash(pc.Arguments)
				if entry.Kind == catalog.EntryWorkflow {
					pc.Plan = entry.Workflow.Plan(pc.Arguments)
				}
			}
		case record.CallNeedsApproval:
			if r.Approval == nil {
				continue
			}
			if err := batch.ApplyDecision(pc, r.Approval.Decision == "approve", r.Approval.Note); err != nil {
				h.log().Warn("approval rejected", "call", pc.CallID, "error", err)
			}
		}
	}
}

// closeBatch ends a paused or broken batch: a call whose result is stored
// keeps it (it ran: its result and artifacts reach the transcript and the
// catalog), every other open call gets a not_executed result, so the
// transcript stays valid; the audit log gets both, before the turn is saved.
func (h *Handlers) closeBatch(ctx context.Context, conv *record.Conversation, t *record.Turn, outcomes map[string]record.CallOutcome, status record.Status, note, msg string) ([]artifact.Artifact, error) {
	before := callStates(t)
	for i := range t.Pending {
		pc := &t.Pending[i]
		if o, ran := outcomes[pc.CallID]; ran && pc.State == record.CallReady && o.InputRequired == nil {
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
	events := append(h.decisions(conv, t, before), h.ran(conv, t, outcomes)...)
	if err := h.audit(ctx, events); err != nil {
		return nil, err
	}
	cat, err := h.catalog(ctx)
	if err != nil {
		return nil, err
	}
	arts := h.appendResults(cat, t, outcomes)
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

func pauseWord(t *record.Turn) string {
	if kind, _ := batch.NextPause(t.Pending); kind == "approval" {
		return "approval"
	}
	return "form"
}
