package turn

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/clientagent/clientagent/pkg/catalog/batch"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/turnview"
)

// AwaitInput is the payload of the state machine's waitForTaskToken task.
type AwaitInput struct {
	Ref
	TaskToken      string `json:"task_token"`
	TimeoutSeconds int    `json:"timeout_seconds"`
}

// AwaitOutput is empty: the execution waits for the token's answer.
type AwaitOutput struct {
	Status string `json:"status"`
}

// Await opens the pause: it stores the task token together with the
// waiting status and the open form or approval, in one write, so the API
// never sees a waiting turn without its token. The token never leaves the
// server side.
func (h *Handlers) Await(ctx context.Context, in AwaitInput) (AwaitOutput, error) {
	started := h.now()
	conv, t, _, err := h.load(ctx, in.Ref, false)
	if err != nil {
		return AwaitOutput{}, err
	}
	if t.Status.Final() {
		return AwaitOutput{Status: string(t.Status)}, nil
	}
	kind, idx := batch.NextPause(t.Pending)
	var (
		status  record.Status
		entry   string
		content string
	)
	switch kind {
	case "approval":
		status, entry = record.StatusAwaitingApproval, "plan"
		var names []string
		for _, i := range idx {
			names = append(names, fmt.Sprintf("%s %s", t.Pending[i].Tool, mustJSON(t.Pending[i].Arguments)))
		}
		content = "Approve before it runs: " + strings.Join(names, "; ")
	default:
		status, entry = record.StatusAwaitingInput, "followup_questions"
		var qs []string
		for _, i := range idx {
			pc := t.Pending[i]
			if pc.FormNote != "" {
				qs = append(qs, pc.FormNote)
			}
			for _, f := range pc.Form {
				qs = append(qs, f.Name+": "+f.Description)
			}
		}
		content = "Please provide: " + strings.Join(qs, "; ")
	}
	alreadyOpen := t.TaskToken != "" && t.Status == status
	if t.WaitingSince.IsZero() {
		t.WaitingSince = h.now()
	}
	t.Status = status
	t.TaskToken = in.TaskToken
	if in.TimeoutSeconds > 0 {
		t.ExpiresAt = h.now().Add(time.Duration(in.TimeoutSeconds) * time.Second)
	}
	if !alreadyOpen {
		e := record.HistoryEntry{Role: "assistant", Kind: entry, Content: content, At: h.now()}
		t.History = append(t.History, e)
		t.History = record.StampTurnArtifacts(t.History, conv.TurnArtifacts(t), false)
	}
	if !alreadyOpen && h.events().Enabled() {
		// The open form or approval, written with the turn.
		v := turnview.New(conv, t, nil)
		ev := h.live(record.EventForm, t.ID, map[string]any{"form": v.Form, "expires_at": v.ExpiresAt})
		if v.Approval != nil {
			ev = h.live(record.EventApproval, t.ID, map[string]any{"approval": v.Approval, "expires_at": v.ExpiresAt})
		}
		t.Events = append(t.Events, ev)
	}
	if err := h.save(ctx, in.Ref, t); err != nil {
		return AwaitOutput{}, err
	}
	h.stepLog(ctx, in.Ref, "await", "", string(status), started, 0, nil)
	return AwaitOutput{Status: string(status)}, nil
}
