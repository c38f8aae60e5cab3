package turn

import (
	"context"
	"errors"
	"fmt"

	"github.com/clientagent/clientagent/pkg/audit"
	"github.com/clientagent/clientagent/pkg/record"
)

// ErrTurnEnded is Cancel's answer for a turn that has already ended.
var ErrTurnEnded = errors.New("the turn has already ended")

// CancelledMessage is the reply of a turn the user cancelled.
const CancelledMessage = "Cancelled at your request. Calls that had already run keep their results and files."

// Cancel ends turn r at the user's request (issue 15). It first marks the
// turn cancelled in the store, so a step still running cannot write over
// the cancel (record.ErrCancelled), then closes the open batch as FailTurn
// does: calls whose results are stored keep them and their artifacts, the
// others get not_executed results, so the transcript stays valid for every
// provider. The audit log records the cancel and each call it left unrun.
// The caller stops the execution afterwards. A turn that has already ended
// is ErrTurnEnded; cancelling twice finds the first cancel's end.
func (h *Handlers) Cancel(ctx context.Context, r Ref, user string) (*record.Conversation, *record.Turn, error) {
	conv, t, _, err := h.load(ctx, r, false)
	if err != nil {
		return nil, nil, err
	}
	if t.Status.Final() {
		return conv, t, fmt.Errorf("cancel turn %s (%s): %w", t.ID, t.Status, ErrTurnEnded)
	}
	if err := h.Store.MarkCancelled(ctx, r.ConversationID, r.TurnID); err != nil {
		return nil, nil, &TransientError{Err: err}
	}
	// Read again: a step may have written the turn before the mark.
	conv, t, outcomes, err := h.load(ctx, r, true)
	if err != nil {
		return nil, nil, err
	}
	if t.Status.Final() {
		return conv, t, fmt.Errorf("cancel turn %s (%s): %w", t.ID, t.Status, ErrTurnEnded)
	}
	if err := h.audit(ctx, []audit.Event{{At: h.now(), Conversation: conv.Meta.ID, Turn: t.ID, User: user, Kind: audit.KindCancelled}}); err != nil {
		return nil, nil, err
	}
	arts, err := h.closeBatch(ctx, conv, t, outcomes, record.StatusCancelled, CancelledMessage, "")
	if err != nil {
		return nil, nil, err
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
	return conv, t, nil
}
