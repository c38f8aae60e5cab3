package turn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

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
	if len(unsettled(t, outcomes)) > 0 {
		return nil // another call still runs; the last one settles
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

// DefaultCallLostAfter is how long after a cancelled turn ended a call that
// had started before the cancel may still be running: the invoke step's
// longest run (the invoke function's timeout on AWS, 6 minutes; one
// specialist call of 5 minutes and its files locally), with a margin.
const DefaultCallLostAfter = 8 * time.Minute

// lostResult is the result of a call whose step stopped (a crash, a
// function killed at its timeout) before it recorded an outcome after its
// turn was cancelled. It must not say the call did not run: it may have.
var lostResult = record.ToolResult{Status: record.ResultFailed,
	Error: "The outcome of this call is unknown: it had started when its turn was cancelled, and the step running it stopped before it could record a result. The specialist may have completed it; check before running it again."}

// SettleLost ends the wait for calls that had started when turn r was
// cancelled and that can no longer report: once CallLostAfter has passed
// since the cancel, no step that started before it still runs, so a call
// with no stored outcome gets lostResult (the first outcome stored wins,
// so a real one that arrived first stays), the audit a KindLost event, and
// the turn is settled as a late result would settle it (settleLate). It
// reports whether it settled anything. Readers call it when they find
// such a call (the API's views, the next LLM step's window), so every view
// agrees and the model is never told the call is still running forever.
func (h *Handlers) SettleLost(ctx context.Context, r Ref) (bool, error) {
	conv, t, outcomes, err := h.load(ctx, r, true)
	if err != nil {
		return false, err
	}
	if !h.callsLost(t, outcomes) {
		return false, nil
	}
	var events []audit.Event
	for _, pc := range t.Pending {
		if _, ok := outcomes[pc.CallID]; pc.State != record.CallRunning || ok {
			continue
		}
		o := record.CallOutcome{CallID: pc.CallID, Tool: pc.Tool, Result: lostResult, StartedAt: t.UpdatedAt, EndedAt: h.now()}
		if _, err := h.Store.PutOutcome(ctx, r.ConversationID, r.TurnID, o); err != nil {
			return false, &TransientError{Err: err}
		}
		events = append(events, h.event(conv, t, pc, audit.KindLost, record.ResultFailed))
	}
	if err := h.audit(ctx, events); err != nil {
		return false, err
	}
	if err := h.settleLate(ctx, r); err != nil {
		return false, err
	}
	return true, nil
}

// CallsLost reports whether turn t, with its stored outcomes, has a call
// that SettleLost would settle: the turn ended (cancelled) more than
// CallLostAfter ago with a call still running and no outcome stored.
func (h *Handlers) CallsLost(t *record.Turn, outcomes map[string]record.CallOutcome) bool {
	return h.callsLost(t, outcomes)
}

func (h *Handlers) callsLost(t *record.Turn, outcomes map[string]record.CallOutcome) bool {
	if !t.Status.Final() || t.UpdatedAt.IsZero() {
		return false
	}
	after := h.CallLostAfter
	if after <= 0 {
		after = DefaultCallLostAfter
	}
	if h.now().Sub(t.UpdatedAt) < after {
		return false
	}
	return len(unsettled(t, outcomes)) > 0
}

// unsettled lists the calls of turn t that had started when it was
// cancelled (record.CallRunning) and have no outcome in outcomes.
func unsettled(t *record.Turn, outcomes map[string]record.CallOutcome) []string {
	var ids []string
	for _, pc := range t.Pending {
		if _, ok := outcomes[pc.CallID]; pc.State == record.CallRunning && !ok {
			ids = append(ids, pc.CallID)
		}
	}
	return ids
}

// settleLostInWindow settles the lost calls (SettleLost) of the earlier
// turns in conv, the LLM step's window, and reads the window again if it
// settled any, so the model is not told forever that such a call still
// runs. Outcomes of earlier turns are not part of the window's read:
// SettleLost reads its turn's own and settles only a call with none.
func (h *Handlers) settleLostInWindow(ctx context.Context, r Ref, conv *record.Conversation, t *record.Turn) (*record.Conversation, *record.Turn, error) {
	settled := false
	for _, earlier := range conv.Turns {
		if earlier.ID == t.ID || !h.callsLost(earlier, nil) {
			continue
		}
		ok, err := h.SettleLost(ctx, Ref{ConversationID: r.ConversationID, TurnID: earlier.ID})
		if err != nil {
			return nil, nil, err
		}
		settled = settled || ok
	}
	if !settled {
		return conv, t, nil
	}
	return h.loadForLLM(ctx, r)
}
