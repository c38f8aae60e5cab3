package turn

import (
	"context"
	"encoding/json"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/catalog/batch"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/record"
)

// AppendOutput tells the state machine where the loop goes next.
type AppendOutput struct {
	Next string `json:"next"`
}

// Append puts the batch's results into the transcript in call order, and
// the artifacts they produced into the catalog, in one write (spec §3.3,
// §3.5). A specialist that answered input-required sends its call back to
// a form instead; the rest of the batch keeps its stored results and waits
// with it (batch rule). Idempotent: an appended batch is not appended twice.
func (h *Handlers) Append(ctx context.Context, in Ref) (AppendOutput, error) {
	started := h.now()
	conv, t, outcomes, err := h.load(ctx, in, true)
	if err != nil {
		return AppendOutput{}, err
	}
	if t.Status.Final() {
		return AppendOutput{Next: NextLLM}, nil
	}
	if len(t.Pending) == 0 {
		return AppendOutput{Next: NextLLM}, nil
	}
	if kind, _ := batch.NextPause(t.Pending); kind != "" {
		// A retry after the batch went back to a form: finish removing the
		// input-required outcomes, and pause again.
		for _, pc := range t.Pending {
			if o, ok := outcomes[pc.CallID]; ok && pc.State == record.CallNeedsInput && o.InputRequired != nil {
				if err := h.Store.DeleteOutcome(ctx, in.ConversationID, in.TurnID, pc.CallID); err != nil {
					return AppendOutput{}, &TransientError{Err: err}
				}
			}
		}
		return AppendOutput{Next: NextAwait}, nil
	}
	var reopen []string
	for i := range t.Pending {
		pc := &t.Pending[i]
		o, ok := outcomes[pc.CallID]
		if pc.State != record.CallReady || !ok || o.InputRequired == nil {
			continue
		}
		pc.State = record.CallNeedsInput
		pc.Form = o.InputRequired.Fields
		pc.FormNote = o.InputRequired.Message
		task := o.InputRequired.Task
		pc.A2A = &task
		reopen = append(reopen, pc.CallID)
	}
	if len(reopen) > 0 {
		if err := h.save(ctx, in, t); err != nil {
			return AppendOutput{}, err
		}
		// The answer re-runs the call on the same A2A task, so its
		// input-required outcome must not stand as the call's result.
		for _, id := range reopen {
			if err := h.Store.DeleteOutcome(ctx, in.ConversationID, in.TurnID, id); err != nil {
				return AppendOutput{}, &TransientError{Err: err}
			}
		}
		h.stepLog(ctx, in, "append", "", "input_required", started, 0, nil)
		return AppendOutput{Next: NextAwait}, nil
	}
	cat, err := h.catalog(ctx)
	if err != nil {
		return AppendOutput{}, err
	}
	if err := h.audit(ctx, h.ran(conv, t, outcomes)); err != nil {
		return AppendOutput{}, err
	}
	arts := h.appendResults(cat, t, outcomes)
	if err := h.save(ctx, in, t, arts...); err != nil {
		return AppendOutput{}, err
	}
	h.stepLog(ctx, in, "append", "", "appended", started, 0, nil)
	return AppendOutput{Next: NextLLM}, nil
}

// appendResults moves the batch into the transcript: one tool message per
// call in call order, a history entry with the call's inputs (the evidence
// recent_skill_inputs reads), turn_tool_results and steps. It returns the
// artifacts the batch produced, for the catalog.
func (h *Handlers) appendResults(cat *catalog.Catalog, t *record.Turn, outcomes map[string]record.CallOutcome) []artifact.Artifact {
	var produced []artifact.Artifact
	if t.ToolResults == nil {
		t.ToolResults = map[string]json.RawMessage{}
	}
	now := h.now()
	for _, pc := range t.Pending {
		var (
			r    record.ToolResult
			raw  json.RawMessage
			step = record.Step{Tool: pc.Tool, CallID: pc.CallID, StartedAt: now, EndedAt: now}
		)
		if o, ok := outcomes[pc.CallID]; ok && pc.State == record.CallReady {
			r, raw = o.Result, o.Raw
			step.StartedAt, step.EndedAt = o.StartedAt, o.EndedAt
			for _, a := range o.Artifacts {
				a.CallID, a.TurnID = pc.CallID, t.ID
				produced = append(produced, a)
				t.Produced = append(t.Produced, a.ID)
			}
		} else {
			r = batch.ResultFor(pc)
		}
		r = batch.Compact(pc, r)
		content := batch.Content(r)
		if raw == nil {
			raw = json.RawMessage(content)
		}
		t.Messages = append(t.Messages, llm.ToolResultMessage(pc.CallID, content))
		entry := record.HistoryEntry{Role: "tool", Kind: "tool_result", Tool: pc.Tool, CallID: pc.CallID, Status: r.Status, Content: r.Summary, Artifacts: r.Artifacts, At: now}
		if entry.Content == "" {
			entry.Content = r.Error
		}
		if r.Status == record.ResultSucceeded && pc.Kind == record.KindSkill {
			entry.ToolInputs = pc.Arguments
		}
		t.History = append(t.History, entry)
		t.ToolResults[pc.Tool] = raw
		step.Status = r.Status
		t.Steps = append(t.Steps, step)
	}
	t.Pending = nil
	return produced
}
