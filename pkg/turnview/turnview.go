// Package turnview renders a stored turn as the API reports it (wire.Turn,
// docs/api/openapi.yaml "Turn"): its form or approval, its steps with their
// arguments and results, its artifacts. The API serves it and the await
// step sends its form or approval as an event. It only reads the record;
// it must not write it or call anything.
package turnview

import (
	"cmp"
	"encoding/json"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/catalog/batch"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/wire"
)

// New renders turn t as the API reports it. outcomes are its stored
// call outcomes, so a running batch shows each call as running or done
// while the Map runs.
func New(conv *record.Conversation, t *record.Turn, outcomes map[string]record.CallOutcome) wire.Turn {
	v := wire.Turn{
		TurnID:       t.ID,
		Status:       t.Status,
		Text:         t.Text,
		BlockedHash:  t.BlockedHash,
		StartedAt:    t.StartedAt.Format(timeLayout),
		LLMCalls:     t.LLMCalls,
		Tokens:       t.Tokens,
		CachedTokens: t.CachedTokens,
		CostUSD:      float64(t.CostMicros) / 1e6,
		Steps:        append([]record.Step{}, t.Steps...),
		Artifacts:    []artifact.Ref{},
		Answers:      t.Answers,
		Supersedes:   t.Supersedes,
		SupersededBy: cmp.Or(t.SupersededBy, conv.Superseded()[t.ID]),
	}
	switch t.Status {
	case record.StatusSucceeded:
		v.Reply = t.FinalReport
	case record.StatusFailed, record.StatusExpired, record.StatusSuperseded, record.StatusCancelled, record.StatusBlocked:
		v.Reply = t.Error
	}
	if t.Status == record.StatusCancelled {
		v.PartialReply = t.Partial
	}
	if t.Status.Final() {
		v.EndedAt = t.UpdatedAt.UTC().Format(timeLayout)
	}
	if t.Answered() {
		// The API answered the pause; the execution has not applied it yet.
		v.Status = record.StatusRunning
	}
	if !t.ExpiresAt.IsZero() && v.Status.Waiting() {
		v.ExpiresAt = t.ExpiresAt.UTC().Format(timeLayout)
	}
	kind, idx := batch.NextPause(t.Pending)
	if v.Status == record.StatusAwaitingInput && kind == "input" {
		v.Form = &wire.Form{}
		for _, i := range idx {
			pc := t.Pending[i]
			v.Form.Calls = append(v.Form.Calls, wire.FormCall{CallID: pc.CallID, Tool: pc.Tool, Note: pc.FormNote, Fields: pc.Form})
		}
	}
	if v.Status == record.StatusAwaitingApproval && kind == "approval" {
		v.Approval = &wire.Approval{ID: batch.ApprovalID(t.Pending)}
		for _, i := range idx {
			pc := t.Pending[i]
			v.Approval.Calls = append(v.Approval.Calls, wire.ApprovalCall{CallID: pc.CallID, Tool: pc.Tool, Arguments: pc.Arguments, Steps: pc.Plan})
		}
	}
	for _, pc := range t.Pending {
		// A running batch's calls, and those still running after a cancel.
		if !(t.Status == record.StatusRunning && pc.State == record.CallReady) && pc.State != record.CallRunning {
			continue
		}
		s := record.Step{Tool: pc.Tool, CallID: pc.CallID, Status: "running", StartedAt: t.UpdatedAt}
		o, ok := outcomes[pc.CallID]
		if ok {
			s.Status, s.StartedAt, s.EndedAt = o.StepStatus(), o.StartedAt, o.EndedAt
		} else if pc.Kind == record.KindWorkflow {
			// A running workflow shows the steps it has finished.
			for i := 0; ; i++ {
				so, done := outcomes[record.WorkflowStepID(pc.CallID, i)]
				if !done {
					break
				}
				v.Steps = append(v.Steps, record.Step{Tool: so.Tool, CallID: so.CallID, Status: so.StepStatus(), StartedAt: so.StartedAt, EndedAt: so.EndedAt, Parent: pc.CallID})
			}
		}
		v.Steps = append(v.Steps, s)
	}
	for _, a := range conv.TurnArtifacts(t) {
		v.Artifacts = append(v.Artifacts, a.Ref())
	}
	stepDetails(t, v.Steps)
	stoppedSpend(&v)
	return v
}

// stepDetails adds to each tool step the arguments of its call and the
// result the model read back, so a client can show a turn as a waterfall
// with each step's input and output (issue 16).
func stepDetails(t *record.Turn, steps []record.Step) {
	args := map[string]string{}
	for _, m := range t.Messages {
		for _, c := range m.ToolCalls {
			args[c.ID] = c.Arguments
		}
	}
	// What ran: the validated arguments (with the user's form values and
	// edits) of the open batch, or of an appended call's history entry.
	for _, h := range t.History {
		if h.CallID != "" && h.ToolInputs != nil {
			args[h.CallID] = mustJSON(h.ToolInputs)
		}
	}
	for _, pc := range t.Pending {
		if pc.Arguments != nil {
			args[pc.CallID] = mustJSON(pc.Arguments)
		}
	}
	for i := range steps {
		s := &steps[i]
		if s.CallID == "" {
			continue
		}
		var a map[string]any
		if raw, ok := args[s.CallID]; ok && json.Unmarshal([]byte(raw), &a) == nil {
			s.Arguments = a
		}
		if r, ok := t.ToolResults[s.CallID]; ok && json.Valid(r) {
			s.Result = r
		}
	}
}

const timeLayout = wire.TimeLayout

// mustJSON is v as JSON, {} if it has none.
func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// stoppedSpend gives the stopped LLM step of a cancelled turn the spend
// no other LLM step accounts for: the interrupted call runs to its end
// after the cancel and its spend is added to the turn's counters then
// (Store.AddSpend), apart from the turn's field, which the cancel has
// already written. So the step's tokens and cost appear once the provider
// has answered, and the turn counts the call from the cancel on.
func stoppedSpend(v *wire.Turn) {
	stopped, rows := -1, 0
	var tokens, cached int
	var cost float64
	for i, s := range v.Steps {
		if s.Tool != "llm" {
			continue
		}
		rows++
		if s.Status == record.StepStopped {
			stopped = i
			continue
		}
		tokens += s.Tokens
		cached += s.CachedTokens
		cost += float64(s.CostMicros)
	}
	if stopped < 0 {
		return
	}
	v.LLMCalls = max(v.LLMCalls, rows)
	s := &v.Steps[stopped]
	s.Tokens = max(0, v.Tokens-tokens)
	s.CachedTokens = max(0, v.CachedTokens-cached)
	s.CostMicros = max(0, int64(v.CostUSD*1e6+0.5)-int64(cost))
}
