package turn

import (
	"encoding/json"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/catalog/batch"
	"github.com/clientagent/clientagent/pkg/record"
)

// View is a turn as the API reports it (docs/api/openapi.yaml "Turn").
type View struct {
	TurnID string        `json:"turn_id"`
	Status record.Status `json:"status"`
	Text   string        `json:"text"`
	// BlockedHash is the hash of the message the guardian blocked, which is
	// not kept (Text is record.BlockedText then).
	BlockedHash string `json:"blocked_hash,omitempty"`
	StartedAt   string `json:"started_at"`
	Reply       string `json:"reply,omitempty"`
	// PartialReply is the answer the model had streamed when the user
	// stopped the turn (only for a cancelled turn).
	PartialReply string         `json:"partial_reply,omitempty"`
	Form         *FormView      `json:"form,omitempty"`
	Approval     *ApprovalView  `json:"approval,omitempty"`
	Artifacts    []artifact.Ref `json:"artifacts"`
	Steps        []record.Step  `json:"steps"`
	LLMCalls     int            `json:"llm_calls"`
	Tokens       int            `json:"tokens"`
	// CachedTokens are the input tokens (part of Tokens) the provider
	// served from its prompt cache; CostUSD prices every call at its
	// model's rates, cached input at the cached rate.
	CachedTokens int     `json:"cached_tokens"`
	CostUSD      float64 `json:"cost_usd"`
	ExpiresAt    string  `json:"expires_at,omitempty"`
	// EndedAt is when the turn ended (its last write), once it has.
	EndedAt string `json:"ended_at,omitempty"`
	// Answers are the user's replies to the turn's forms and approvals.
	Answers []record.Answer `json:"answers,omitempty"`
	// Supersedes is the turn this one replaced (edit and resend,
	// regenerate); SupersededBy the turn that replaced this one.
	Supersedes   string `json:"supersedes,omitempty"`
	SupersededBy string `json:"superseded_by,omitempty"`
}

// FormView is the open form of a turn awaiting input.
type FormView struct {
	Calls []FormCall `json:"calls"`
}

// FormCall is one call's form.
type FormCall struct {
	CallID string              `json:"call_id"`
	Tool   string              `json:"tool"`
	Note   string              `json:"note,omitempty"`
	Fields []catalog.FormField `json:"fields"`
}

// ApprovalView lists the calls waiting for approval with the exact
// arguments that will run. ID names exactly these calls and arguments
// (batch.ApprovalID); an answer must carry it.
type ApprovalView struct {
	ID    string         `json:"id"`
	Calls []ApprovalCall `json:"calls"`
}

// ApprovalCall is one call waiting for approval.
type ApprovalCall struct {
	CallID    string         `json:"call_id"`
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
	// Steps is a workflow call's plan: each step with the arguments it gets.
	Steps []catalog.PlanStep `json:"steps,omitempty"`
}

// NewView renders turn t. outcomes are its stored call outcomes, so a
// running batch shows each call as running or done while the Map runs.
func NewView(conv *record.Conversation, t *record.Turn, outcomes map[string]record.CallOutcome) View {
	v := View{
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
		SupersededBy: conv.Superseded()[t.ID],
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
		v.Form = &FormView{}
		for _, i := range idx {
			pc := t.Pending[i]
			v.Form.Calls = append(v.Form.Calls, FormCall{CallID: pc.CallID, Tool: pc.Tool, Note: pc.FormNote, Fields: pc.Form})
		}
	}
	if v.Status == record.StatusAwaitingApproval && kind == "approval" {
		v.Approval = &ApprovalView{ID: batch.ApprovalID(t.Pending)}
		for _, i := range idx {
			pc := t.Pending[i]
			v.Approval.Calls = append(v.Approval.Calls, ApprovalCall{CallID: pc.CallID, Tool: pc.Tool, Arguments: pc.Arguments, Steps: pc.Plan})
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
			s.Status, s.StartedAt, s.EndedAt = outcomeStatus(o), o.StartedAt, o.EndedAt
		} else if pc.Kind == record.KindWorkflow {
			// A running workflow shows the steps it has finished.
			for i := 0; ; i++ {
				so, done := outcomes[workflowStepID(pc.CallID, i)]
				if !done {
					break
				}
				v.Steps = append(v.Steps, record.Step{Tool: so.Tool, CallID: so.CallID, Status: outcomeStatus(so), StartedAt: so.StartedAt, EndedAt: so.EndedAt, Parent: pc.CallID})
			}
		}
		v.Steps = append(v.Steps, s)
	}
	for _, a := range turnArtifacts(conv, t) {
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

const timeLayout = record.TimeLayout

// turnArtifacts lists the catalogued artifacts turn t produced, in order.
func turnArtifacts(conv *record.Conversation, t *record.Turn) []artifact.Artifact {
	byID := make(map[string]artifact.Artifact, len(conv.Artifacts))
	for _, a := range conv.Artifacts {
		byID[a.ID] = a
	}
	var out []artifact.Artifact
	for _, id := range t.Produced {
		if a, ok := byID[id]; ok {
			out = append(out, a)
		}
	}
	return out
}
