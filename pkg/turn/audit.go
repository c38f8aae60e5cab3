package turn

import (
	"context"
	"fmt"

	"github.com/clientagent/clientagent/pkg/audit"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/record"
)

// callStates remembers each pending call's state before a step changes it.
func callStates(t *record.Turn) map[string]record.CallState {
	m := make(map[string]record.CallState, len(t.Pending))
	for _, pc := range t.Pending {
		m[pc.CallID] = pc.State
	}
	return m
}

// decisions are the audit events of what the user's reply (or its
// absence) did to the batch: approvals and rejections of the exact
// arguments shown, and calls that will never run because the batch expired
// or was superseded.
func (h *Handlers) decisions(conv *record.Conversation, t *record.Turn, before map[string]record.CallState) []audit.Event {
	var events []audit.Event
	for _, pc := range t.Pending {
		was := before[pc.CallID]
		kind := ""
		switch {
		case was == record.CallNeedsApproval && pc.State == record.CallReady && pc.Approved:
			kind = audit.KindApproved
			if pc.EditedFrom != "" {
				edit := h.event(conv, t, pc, audit.KindEdited, "")
				edit.PreviousHash = pc.EditedFrom
				events = append(events, edit)
			}
		case was == record.CallNeedsApproval && pc.State == record.CallRejected:
			kind = audit.KindRejected
		case was != record.CallNotExecuted && pc.State == record.CallNotExecuted:
			switch t.Status {
			case record.StatusExpired:
				kind = audit.KindExpired
			case record.StatusSuperseded:
				kind = audit.KindSuperseded
			case record.StatusCancelled:
				kind = audit.KindCancelled
			default:
				kind = audit.KindNotExecuted
			}
		default:
			continue
		}
		events = append(events, h.event(conv, t, pc, kind, ""))
	}
	return events
}

// executed is the audit event of a call that ran, with its result status
// (none while its specialist waits for input: the call runs again).
func (h *Handlers) executed(conv *record.Conversation, t *record.Turn, pc record.PendingCall, o record.CallOutcome) []audit.Event {
	if o.InputRequired != nil {
		return nil
	}
	return []audit.Event{h.event(conv, t, pc, audit.KindCall, o.Result.Status)}
}

func (h *Handlers) event(conv *record.Conversation, t *record.Turn, pc record.PendingCall, kind, status string) audit.Event {
	return audit.Event{
		At:            h.now(),
		Conversation:  conv.Meta.ID,
		Turn:          t.ID,
		User:          conv.Meta.Owner,
		Kind:          kind,
		CallID:        pc.CallID,
		Tool:          pc.Tool,
		ArgumentsHash: catalog.ArgumentsHash(pc.Arguments),
		Status:        status,
		Note:          pc.Note,
	}
}

// audit records events before the step saves the turn, so nothing the
// user decided or the platform ran is ever missing from the audit log; a
// retried step rewrites the same events.
func (h *Handlers) audit(ctx context.Context, events []audit.Event) error {
	if len(events) == 0 {
		return nil
	}
	if err := h.auditLog().Record(ctx, events...); err != nil {
		return &TransientError{Err: fmt.Errorf("audit: %w", err)}
	}
	return nil
}

// auditAside is audit in the background, beside a write the events do not
// wait for; the returned wait gives audit's error.
func (h *Handlers) auditAside(ctx context.Context, events []audit.Event) (wait func() error) {
	done := make(chan error, 1)
	go func() { done <- h.audit(ctx, events) }()
	return func() error { return <-done }
}

// auditLog is h.Audit, or a log that keeps nothing.
func (h *Handlers) auditLog() audit.Log {
	if h.Audit == nil {
		return noAudit{}
	}
	return h.Audit
}

type noAudit struct{}

func (noAudit) Record(context.Context, ...audit.Event) error { return nil }
