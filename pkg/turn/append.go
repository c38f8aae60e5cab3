package turn

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/catalog/batch"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/telemetry"
)

// AppendInput is AppendResults' payload: the turn, the tokens of the reads
// ahead of the batch's writes (Ref.After), and whether the batch's only
// call appended its result itself (InvokeOutput.Appended, the Map's
// result).
type AppendInput struct {
	Ref
	Appended Appended `json:"appended,omitempty"`
}

// Appended is InvokeOutput.Appended as the Map's result gives it: true,
// or the value of each call (JSONata gives a single value for a batch of
// one), or nothing. A batch was appended by its call only when it had
// one call and that call's write appended it.
type Appended bool

// UnmarshalJSON reads a bool, a list of them or null.
func (a *Appended) UnmarshalJSON(b []byte) error {
	var one bool
	if err := json.Unmarshal(b, &one); err == nil {
		*a = Appended(one)
		return nil
	}
	var many []bool
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("appended: a bool or a list of them: %w", err)
	}
	*a = Appended(len(many) == 1 && many[0])
	return nil
}

// AppendOutput tells the state machine where the loop goes next.
type AppendOutput struct {
	Next string `json:"next"`
	// After is the token of the next LLMStep's read, which the step's
	// write read ahead (Ref.After; "" when the store keeps none).
	After string `json:"after,omitempty"`
}

// Append puts the batch's results into the transcript in call order, and
// the artifacts they produced into the catalog, in one write (docs/design.md §3.3,
// §3.5). A specialist that answered input-required sends its call back to
// a form instead; the rest of the batch keeps its stored results and waits
// with it (batch rule). Idempotent: an appended batch is not appended twice.
// A batch of one call whose call appended its result (in.Appended) is
// done: its next LLM step goes on with the read that write read ahead.
func (h *Handlers) Append(ctx context.Context, in AppendInput) (AppendOutput, error) {
	ctx, span := h.startStep(ctx, in.Ref, telemetry.SpanAppendResults)
	var (
		out AppendOutput
		err error
	)
	if in.Appended {
		out.Next = NextLLM
		if len(in.After) > 0 {
			out.After = in.After[len(in.After)-1]
		}
	} else {
		out, err = h.append(ctx, in.Ref)
	}
	endStep(span, out.Next, err)
	return out, err
}

func (h *Handlers) append(ctx context.Context, in Ref) (AppendOutput, error) {
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
	// The guardian reads each result before the model does (guard.go).
	outcomes, guarded, gerr := h.guardResults(ctx, conv, t, outcomes)
	if err := h.audit(ctx, guarded); err != nil {
		return AppendOutput{}, err
	}
	arts := h.appendResults(cat, t, outcomes)
	if gerr != nil {
		// Failing closed: the results are appended withheld, and the turn
		// ends before the model reads them.
		if _, err := h.endFailed(ctx, in, t, "guardian", h.guardFailure(ctx, in, gerr), arts...); err != nil {
			return AppendOutput{}, err
		}
		return AppendOutput{Next: NextLLM}, nil
	}
	after, err := h.saveAhead(ctx, in, t, h.llmQuery(in), arts...)
	if err != nil {
		return AppendOutput{}, err
	}
	h.stepLog(ctx, in, "append", "", "appended", started, 0, nil)
	return AppendOutput{Next: NextLLM, After: after}, nil
}

// appendResults moves the batch into the transcript: one tool message per
// call in call order, a history entry with the call's inputs (the evidence
// recent_skill_inputs reads), turn_tool_results (by call id) and steps, and
// counts each result for no-progress detection. It returns the artifacts
// the batch produced, for the catalog.
func (h *Handlers) appendResults(cat *catalog.Catalog, t *record.Turn, outcomes map[string]record.CallOutcome) []artifact.Artifact {
	var produced []artifact.Artifact
	if t.ToolResults == nil {
		t.ToolResults = map[string]json.RawMessage{}
	}
	modelArgs := map[string]string{} // call id → the model's argument text
	if last, ok := lastAssistant(t); ok {
		for _, c := range last.ToolCalls {
			modelArgs[c.ID] = c.Arguments
		}
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
		if pc.Kind == record.KindSkill {
			// Every skill call shows what it was called with; only a
			// succeeded one counts as a recent input (NewestInputs).
			entry.ToolInputs = pc.Arguments
		}
		t.History = append(t.History, entry)
		t.ToolResults[pc.CallID] = raw
		step.Status = r.Status
		t.Steps = append(t.Steps, step)
		if pc.Kind == record.KindWorkflow {
			// The workflow's own steps stay, nested under it (Step.Parent).
			for i := 0; ; i++ {
				so, done := outcomes[record.WorkflowStepID(pc.CallID, i)]
				if !done {
					break
				}
				t.Steps = append(t.Steps, record.Step{Tool: so.Tool, CallID: so.CallID, Status: so.StepStatus(), StartedAt: so.StartedAt, EndedAt: so.EndedAt, Parent: pc.CallID})
			}
		}
		_, ran := outcomes[pc.CallID]
		countResult(t, pc.Tool, callKey(pc.Tool, modelArgs[pc.CallID]), r, ran && pc.State == record.CallReady)
	}
	t.Pending = nil
	return produced
}

// countResult updates the turn's no-progress state with one call's result
// (docs/design.md §10): a repeat counts only when the same call returned the same
// result as its previous run; a failure of a call that ran counts towards
// the re-plan cap of its tool.
func countResult(t *record.Turn, tool, key string, r record.ToolResult, ran bool) {
	if t.Repeats == nil {
		t.Repeats = map[string]record.Repeat{}
	}
	// Artifact ids and echoed inputs differ on every run; what the call
	// said is what tells progress.
	h := catalog.ArgumentsHash(map[string]any{"status": r.Status, "summary": r.Summary, "result": r.Result, "error": r.Error})
	rep := t.Repeats[key]
	if rep.Count > 0 && rep.Result == h {
		rep.Count++
	} else {
		rep = record.Repeat{Result: h, Count: 1}
	}
	t.Repeats[key] = rep
	if ran && r.Status == record.ResultFailed {
		if t.Failures == nil {
			t.Failures = map[string]int{}
		}
		t.Failures[tool]++
	}
}

// lastAssistant is the turn's newest assistant message.
func lastAssistant(t *record.Turn) (llm.Message, bool) {
	for i := len(t.Messages) - 1; i >= 0; i-- {
		if t.Messages[i].Role == llm.RoleAssistant {
			return t.Messages[i], true
		}
	}
	return llm.Message{}, false
}
