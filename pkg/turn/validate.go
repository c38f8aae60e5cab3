package turn

import (
	"context"
	"fmt"
	"time"

	"github.com/clientagent/clientagent/pkg/audit"
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
		h.closeBatch(t, record.StatusSuperseded, "Not executed: the user sent a new message instead of answering.", "")
		return h.endBatch(ctx, in.Ref, t, h.decisions(conv, t, before))
	case r.Expired:
		msg := fmt.Sprintf("This request expired: the %s was not answered within %s, so nothing was run. Send the request again to retry.", pauseWord(t), h.Limits.AwaitTimeout.Round(time.Second))
		h.closeBatch(t, record.StatusExpired, "Not executed: the request for the user's input expired.", msg)
		return h.endBatch(ctx, in.Ref, t, h.decisions(conv, t, before))
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
			if pc.A2A != nil {
				// A specialist's input-required: its own fields, continued on the
				// same A2A task; the specialist validates them. Changed arguments
				// of a skill that needs approval need a new approval (DESIGN §7).
				mergeUser(pc, ans)
				pc.Form, pc.FormNote = nil, ""
				pc.State = record.CallReady
				if entry, ok := cat.Lookup(pc.Tool); ok && entry.RequiresApproval {
					pc.State, pc.Approved = record.CallNeedsApproval, false
					pc.ApprovalHash = catalog.ArgumentsHash(pc.Arguments)
				}
				continue
			}
			if err := batch.ApplyAnswers(cat, pc, ans, e); err != nil {
				h.log().Warn("form answer rejected", "call", pc.CallID, "error", err)
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

func mergeUser(pc *record.PendingCall, ans map[string]any) {
	if pc.Arguments == nil {
		pc.Arguments = map[string]any{}
	}
	if pc.Sources == nil {
		pc.Sources = map[string]string{}
	}
	for k, v := range ans {
		pc.Arguments[k] = v
		pc.Sources[k] = "user"
	}
}

// closeBatch ends a paused batch without running it: every call not done
// gets a not_executed result so the transcript stays valid.
func (h *Handlers) closeBatch(t *record.Turn, status record.Status, note, msg string) {
	for i := range t.Pending {
		switch t.Pending[i].State {
		case record.CallInvalid, record.CallRejected, record.CallAnswered, record.CallDone:
		default:
			t.Pending[i].State = record.CallNotExecuted
			t.Pending[i].Note = note
		}
	}
	t.Status = status
	t.Error = msg
	t.TaskToken = ""
}

// endBatch appends the closed batch's results and ends the turn.
func (h *Handlers) endBatch(ctx context.Context, r Ref, t *record.Turn, events []audit.Event) (ValidateOutput, error) {
	cat, err := h.catalog(ctx)
	if err != nil {
		return ValidateOutput{}, err
	}
	if err := h.audit(ctx, events); err != nil {
		return ValidateOutput{}, err
	}
	h.appendResults(cat, t, nil)
	if t.Error != "" {
		t.History = append(t.History, record.HistoryEntry{Role: "assistant", Kind: "error", Content: t.Error, At: h.now()})
	}
	if err := h.save(ctx, r, t); err != nil {
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
