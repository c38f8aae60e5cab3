package turn

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/clientagent/clientagent/pkg/audit"
	"github.com/clientagent/clientagent/pkg/record"
)

// ErrTurnEnded is Cancel's answer for a turn that has already ended.
var ErrTurnEnded = errors.New("the turn has already ended")

// CancelledMessage is the reply of a turn the user cancelled.
const CancelledMessage = "Cancelled at your request. Calls that had already run keep their results and files."

// runningNote is the note of a call that had started when its turn was
// cancelled: a cancel never stops a call that has started, so the record
// waits for its real outcome rather than calling it not executed.
const runningNote = "This call had started when the turn was cancelled; it runs to its end and its result is recorded then."

// Cancel ends turn r at the user's request (docs/architecture.md, "Who
// wins a cancel"). It first marks the turn cancelled in the store, which
// orders the cancel against every call's start (record.Store.StartCall):
// a call not started by then never starts, and a call started before runs
// to its end, its outcome joining the cancelled turn when it ends
// (settleLate). A step still running cannot write over the cancel
// (record.ErrCancelled). Then the batch closes as FailTurn closes it:
// calls whose results are stored keep them and their artifacts, calls that
// never started get not_executed results, so the transcript stays valid
// for every provider. The audit log records the cancel and each call it
// left unrun. The caller stops the execution afterwards. A turn that has
// already ended is ErrTurnEnded; cancelling twice finds the first cancel's
// end.
func (h *Handlers) Cancel(ctx context.Context, r Ref, user string) (*record.Conversation, *record.Turn, error) {
	conv, t, _, err := h.load(ctx, r, false)
	if err != nil {
		return nil, nil, err
	}
	if t.Status.Final() {
		return conv, t, fmt.Errorf("cancel turn %s (%s): %w", t.ID, t.Status, ErrTurnEnded)
	}
	return h.finishCancel(ctx, r, user, true)
}

// finishCancel completes a cancel once its mark is stored: by Cancel
// itself, or by whichever step or reader next finds a turn marked
// cancelled that has not ended (a crash between the mark and the
// cancelled turn's write), so an accepted cancel ends the turn cancelled
// after any crash. Marking again is harmless and returns the calls that
// had started. reported is whether the caller is the user's own cancel
// (an ended turn is then ErrTurnEnded).
func (h *Handlers) finishCancel(ctx context.Context, r Ref, user string, reported bool) (*record.Conversation, *record.Turn, error) {
	started, err := h.Store.MarkCancelled(ctx, r.ConversationID, r.TurnID)
	if err != nil {
		return nil, nil, &TransientError{Err: err}
	}
	// Read again: a step may have written the turn before the mark.
	conv, t, outcomes, err := h.read(ctx, r, record.Query{TurnID: r.TurnID, Outcomes: true}, false)
	if err != nil {
		return nil, nil, err
	}
	if t.Status.Final() {
		// Cancelled already: a step that found this cancel's mark may have
		// finished it first, which is this cancel's own end.
		if reported && t.Status != record.StatusCancelled {
			return conv, t, fmt.Errorf("cancel turn %s (%s): %w", t.ID, t.Status, ErrTurnEnded)
		}
		return conv, t, nil
	}
	if user == "" {
		user = conv.Meta.Owner
	}
	if err := h.audit(ctx, []audit.Event{{At: h.now(), Conversation: conv.Meta.ID, Turn: t.ID, User: user, Kind: audit.KindCancelled}}); err != nil {
		return nil, nil, err
	}
	running := map[string]bool{}
	for _, id := range started {
		if _, done := outcomes[id]; !done {
			running[id] = true
		}
	}
	stopped, inflight := h.inflightLLM(ctx, r, t)
	arts, err := h.closeBatch(ctx, conv, t, outcomes, record.StatusCancelled, CancelledMessage, "", running)
	if err != nil {
		return nil, nil, err
	}
	if inflight {
		// The answer the user stopped is kept, as far as it was shown.
		h.keepStopped(t, stopped)
	}
	// Calls of a response stored before its batch was validated have no
	// results; the transcript shows them not executed (record.LLMView's
	// placeholder for an ended turn).
	t.Error = CancelledMessage
	t.History = append(t.History, record.HistoryEntry{Role: "assistant", Kind: "cancelled", Content: CancelledMessage, At: h.now()})
	if err := h.save(ctx, r, t, arts...); err != nil {
		return nil, nil, err
	}
	h.stepLog(ctx, r, "cancel", "", string(record.StatusCancelled), h.now(), 0, nil)
	if len(running) > 0 {
		// A call that ended between the read above and the write is
		// settled here: its own settleLate found the turn not ended yet.
		if err := h.settleLate(ctx, r); err != nil {
			return nil, nil, err
		}
		if conv, t, _, err = h.load(ctx, r, false); err != nil {
			return nil, nil, err
		}
	}
	return conv, t, nil
}

// settleLate records the outcomes of calls that had started when their
// turn was cancelled (record.CallRunning), once every one of them has
// ended: their results join the ended turn's transcript and history in
// call order, their artifacts the catalog, exactly as AppendResults would
// have put them. Whoever stores the last such outcome settles; two that
// both see every outcome write the same turn. The turn stays cancelled,
// and its end time stays the cancel's.
func (h *Handlers) settleLate(ctx context.Context, r Ref) error {
	conv, t, outcomes, err := h.load(ctx, r, true)
	if err != nil {
		return err
	}
	if !t.Status.Final() || !slices.ContainsFunc(t.Pending, func(pc record.PendingCall) bool { return pc.State == record.CallRunning }) {
		return nil // not ended yet (finishCancel settles after its write), or settled
	}
	for _, pc := range t.Pending {
		if _, ok := outcomes[pc.CallID]; pc.State == record.CallRunning && !ok {
			return nil // another call still runs; the last one settles
		}
	}
	for i := range t.Pending {
		if t.Pending[i].State == record.CallRunning {
			t.Pending[i].State = record.CallReady
		}
	}
	cat, err := h.catalog(ctx)
	if err != nil {
		return err
	}
	outcomes, guarded, _ := h.guardResults(ctx, conv, t, outcomes)
	if err := h.audit(ctx, guarded); err != nil {
		return err
	}
	arts := h.appendResults(cat, t, outcomes)
	// Not save: the turn ended at the cancel, and its end time and trace
	// stay the cancel's.
	var gone *NotFoundError
	if err := h.write(ctx, r, t, arts...); err != nil && !errors.As(err, &gone) {
		return err
	}
	h.stepLog(ctx, r, "settle", "", string(t.Status), h.now(), 0, nil)
	return nil
}
