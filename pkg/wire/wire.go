// Package wire is the vocabulary of clientagent's HTTP API
// (docs/api/openapi.yaml): the bodies the API sends and receives, shared by
// the server (pkg/api), the record that stores some of them (pkg/record,
// pkg/catalog, pkg/artifact alias its types) and every client of the API
// (pkg/chatcli, pkg/eval, pkg/smoke, pkg/a2aserver, the bench driver).
//
// It holds types only, with their JSON form. It must not import any
// package of this project, so that a client can speak the API without
// linking the server, and the packages below it can share its types.
package wire

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// TimeLayout is how the API writes times: RFC 3339 with milliseconds.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// Status is a turn's status (Turn.status).
type Status string

// Turn statuses.
const (
	StatusRunning          Status = "running"
	StatusAwaitingInput    Status = "awaiting_input"
	StatusAwaitingApproval Status = "awaiting_approval"
	StatusSucceeded        Status = "succeeded"
	StatusFailed           Status = "failed"
	StatusExpired          Status = "expired"
	StatusSuperseded       Status = "superseded"
	// StatusCancelled: the user stopped the turn.
	StatusCancelled Status = "cancelled"
	// StatusBlocked: the guardian refused the user's request.
	StatusBlocked Status = "blocked"
)

// Waiting reports whether the turn is paused for the user.
func (s Status) Waiting() bool { return s == StatusAwaitingInput || s == StatusAwaitingApproval }

// Final reports whether the turn has ended.
func (s Status) Final() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusExpired, StatusSuperseded, StatusCancelled, StatusBlocked:
		return true
	}
	return false
}

// Turn is one user turn as the API reports it ("Turn").
type Turn struct {
	TurnID string `json:"turn_id"`
	Status Status `json:"status"`
	Text   string `json:"text"`
	// BlockedHash is the hash of the message the guardian blocked, which is
	// not kept (Text is a placeholder then).
	BlockedHash string `json:"blocked_hash,omitempty"`
	StartedAt   string `json:"started_at"`
	Reply       string `json:"reply,omitempty"`
	// PartialReply is the answer the model had streamed when the user
	// stopped the turn (only for a cancelled turn).
	PartialReply string        `json:"partial_reply,omitempty"`
	Form         *Form         `json:"form,omitempty"`
	Approval     *Approval     `json:"approval,omitempty"`
	Artifacts    []ArtifactRef `json:"artifacts"`
	Steps        []Step        `json:"steps"`
	LLMCalls     int           `json:"llm_calls"`
	Tokens       int           `json:"tokens"`
	// CachedTokens are the input tokens (part of Tokens) the provider
	// served from its prompt cache; CostUSD prices every call at its
	// model's rates, cached input at the cached rate.
	CachedTokens int     `json:"cached_tokens"`
	CostUSD      float64 `json:"cost_usd"`
	ExpiresAt    string  `json:"expires_at,omitempty"`
	// EndedAt is when the turn ended (its last write), once it has.
	EndedAt string `json:"ended_at,omitempty"`
	// Answers are the user's replies to the turn's forms and approvals.
	Answers []Answer `json:"answers,omitempty"`
	// Supersedes is the turn this one replaced (edit and resend,
	// regenerate); SupersededBy the turn that replaced this one.
	Supersedes   string `json:"supersedes,omitempty"`
	SupersededBy string `json:"superseded_by,omitempty"`
}

// Answer is one reply of the user to a pause of a turn (a form or an
// approval), as applied.
type Answer struct {
	At   time.Time `json:"at"`
	Kind string    `json:"kind"` // form | approval
	// Values are a form's answers by call id (the calls they applied to).
	Values map[string]map[string]any `json:"values,omitempty"`
	// Decision (approve | reject) and Note answer an approval; Edited
	// names the calls whose arguments the user edited before approving.
	Decision string   `json:"decision,omitempty"`
	Note     string   `json:"note,omitempty"`
	Edited   []string `json:"edited,omitempty"`
	// Files are the uploads the user sent with the reply (artifact ids).
	Files []string `json:"files,omitempty"`
}

// Form is the open form of a turn awaiting input.
type Form struct {
	Calls []FormCall `json:"calls"`
}

// FormCall is one paused call and the fields it needs.
type FormCall struct {
	CallID string      `json:"call_id"`
	Tool   string      `json:"tool"`
	Note   string      `json:"note,omitempty"`
	Fields []FormField `json:"fields"`
}

// FormField is one typed field of a form shown to the user.
type FormField struct {
	Name        string   `json:"name"`
	Type        string   `json:"type"` // string, integer, number, boolean
	Description string   `json:"description"`
	Required    bool     `json:"required"`
	Enum        []string `json:"enum,omitempty"`
}

// Approval lists the calls waiting for approval with the exact arguments
// that will run. ID names exactly these calls and arguments (opaque); an
// answer must carry it, so it never approves a batch that changed since.
type Approval struct {
	ID    string         `json:"id"`
	Calls []ApprovalCall `json:"calls"`
}

// ApprovalCall is one call waiting for approval.
type ApprovalCall struct {
	CallID    string         `json:"call_id"`
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
	// Steps is a workflow call's plan: each step with the arguments it gets.
	Steps []PlanStep `json:"steps,omitempty"`
}

// PlanStep is one step of a workflow's plan with the arguments it gets.
type PlanStep struct {
	Name      string         `json:"name"`
	Skill     string         `json:"skill"`
	Arguments map[string]any `json:"arguments"`
}

// ArtifactRef names an artifact of the conversation.
type ArtifactRef struct {
	ID          string `json:"artifact_id"`
	Name        string `json:"name"`
	MimeType    string `json:"mime_type"`
	Description string `json:"description,omitempty"`
}

// Step is one visible step of a turn (Turn.steps): an LLM call (Tool
// "llm") or a tool call.
type Step struct {
	Tool      string    `json:"tool"`
	CallID    string    `json:"call_id,omitempty"`
	Status    string    `json:"status"` // running, succeeded, failed, rejected, not_executed, answered, stopped
	StartedAt time.Time `json:"started_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	// Tokens and CachedTokens are an LLM step's usage; CostMicros its cost.
	Tokens       int   `json:"tokens,omitempty"`
	CachedTokens int   `json:"cached_tokens,omitempty"`
	CostMicros   int64 `json:"cost_micros,omitempty"`
	// Parent is the call id of the workflow call this step is a step of.
	Parent string `json:"parent,omitempty"`
	// Inspect is what an LLM step sent and got back (system, messages,
	// context, tools, response), kept only when the operator turned
	// content capture on; the record's LLMInspect is its shape.
	Inspect json.RawMessage `json:"inspect,omitempty"`
	// Arguments and Result are a tool step's call and what the model read
	// back; the Turn view fills them in (not stored with the step).
	Arguments map[string]any  `json:"arguments,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
}

// StepStopped is the status of the LLM call a cancel interrupted.
const StepStopped = "stopped"

// MarshalJSON writes a step as the API shows every time: RFC 3339 with
// milliseconds, and the step's duration_ms once it has ended.
func (s Step) MarshalJSON() ([]byte, error) { return s.AppendJSON(make([]byte, 0, 256)) }

// AppendJSON appends the step's JSON (MarshalJSON) to b, byte for byte as
// encoding/json writes the object: every write of a turn encodes each of
// its steps, so the object is written directly, not through a struct of
// strings for encoding/json to reflect on.
func (s Step) AppendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"tool":`...)
	b = AppendJSONString(b, s.Tool)
	if s.CallID != "" {
		b = append(b, `,"call_id":`...)
		b = AppendJSONString(b, s.CallID)
	}
	b = append(b, `,"status":`...)
	b = AppendJSONString(b, s.Status)
	b = append(b, `,"started_at":"`...)
	b = s.StartedAt.UTC().AppendFormat(b, TimeLayout)
	b = append(b, '"')
	if !s.EndedAt.IsZero() {
		b = append(b, `,"ended_at":"`...)
		b = s.EndedAt.UTC().AppendFormat(b, TimeLayout)
		b = append(b, `","duration_ms":`...)
		b = strconv.AppendInt(b, s.EndedAt.Sub(s.StartedAt).Milliseconds(), 10)
	}
	if s.Tokens != 0 {
		b = strconv.AppendInt(append(b, `,"tokens":`...), int64(s.Tokens), 10)
	}
	if s.CachedTokens != 0 {
		b = strconv.AppendInt(append(b, `,"cached_tokens":`...), int64(s.CachedTokens), 10)
	}
	if s.CostMicros != 0 {
		b = appendJSONFloat(append(b, `,"cost_usd":`...), float64(s.CostMicros)/1e6)
		b = strconv.AppendInt(append(b, `,"cost_micros":`...), s.CostMicros, 10)
	}
	if s.Parent != "" {
		b = append(b, `,"parent":`...)
		b = AppendJSONString(b, s.Parent)
	}
	var err error
	if len(s.Inspect) > 0 {
		if b, err = appendMarshaled(append(b, `,"inspect":`...), s.Inspect); err != nil {
			return nil, err
		}
	}
	if len(s.Arguments) > 0 {
		if b, err = appendMarshaled(append(b, `,"arguments":`...), s.Arguments); err != nil {
			return nil, err
		}
	}
	if len(s.Result) > 0 {
		if b, err = appendMarshaled(append(b, `,"result":`...), s.Result); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendMarshaled appends v as encoding/json writes it.
func appendMarshaled(b []byte, v any) ([]byte, error) {
	j, err := json.Marshal(v)
	return append(b, j...), err
}

// AppendJSONString appends s quoted as json.Marshal quotes it. A string
// of printable ASCII with nothing to escape (ids, statuses, most text) is
// copied; any other is left to encoding/json.
func AppendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			j, _ := json.Marshal(s)
			return append(b, j...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendJSONFloat appends f as encoding/json writes a float64: the
// shortest decimal, in exponent form below 1e-6 and from 1e21.
func appendJSONFloat(b []byte, f float64) []byte {
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 → e-9, as encoding/json writes it
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// HistoryEntry is one conversation_history entry: what a chat UI shows,
// plus evidence (tool inputs, artifacts) that outlives the transcript
// window. The record stores it without TurnID; GET /v1/conversations/{cid}
// names each entry's turn.
type HistoryEntry struct {
	Role       string         `json:"role"` // user, assistant, tool
	Kind       string         `json:"kind"` // message, followup_questions, plan, plan_approved, tool_result
	Content    string         `json:"content,omitempty"`
	Tool       string         `json:"tool,omitempty"`
	CallID     string         `json:"call_id,omitempty"`
	Status     string         `json:"status,omitempty"`
	ToolInputs map[string]any `json:"tool_inputs,omitempty"`
	Artifacts  []ArtifactRef  `json:"artifacts,omitempty"`
	At         time.Time      `json:"at"`
	TurnID     string         `json:"turn_id,omitempty"`
}

// Message is the body of POST …/messages.
type Message struct {
	Text  string   `json:"text,omitempty"`
	Files []string `json:"files,omitempty"` // uploads (artifact ids) sent with the message
	// Workflow selects a workflow explicitly, with its inputs.
	Workflow *WorkflowSelection `json:"workflow,omitempty"`
	// Supersedes names the conversation's newest turn, ended, that this
	// message replaces (edit and resend, regenerate).
	Supersedes string `json:"supersedes,omitempty"`
}

// WorkflowSelection is an explicit choice of a workflow and its inputs.
type WorkflowSelection struct {
	ID     string         `json:"id"`
	Inputs map[string]any `json:"inputs,omitempty"`
}

// Input is the body of POST …/turns/{tid}/input: either the answers of
// the open form, by call id and field, or the decision on the open
// approval.
type Input struct {
	Answers map[string]map[string]any `json:"answers,omitempty"`
	// Files names uploads (artifact ids) made for this reply.
	Files    []string  `json:"files,omitempty"`
	Approval *Decision `json:"approval,omitempty"`
}

// Decision answers a pending approval.
type Decision struct {
	ID       string `json:"id"`       // the Approval.ID answered
	Decision string `json:"decision"` // approve | reject
	Note     string `json:"note,omitempty"`
	// Arguments replaces calls' arguments with the user's edits, by call
	// id; only with approve.
	Arguments map[string]map[string]any `json:"arguments,omitempty"`
}

// Event types of a conversation's event stream (GET …/events).
const (
	EventTurnStarted = "turn.started"
	EventStepStarted = "step.started"
	EventStepEnded   = "step.ended"
	EventLLMDelta    = "llm.delta"
	EventForm        = "form"
	EventApproval    = "approval"
	EventArtifact    = "artifact"
	EventTurnEnded   = "turn.ended"
)

// Event is one event of a conversation's stream, as a client reads it.
// Which fields are set depends on Type: turn.started (Text), step.started
// and step.ended (Tool, CallID, Status), llm.delta (Text, Offset, LLMCall),
// form, approval, artifact (Artifact), turn.ended (Status, Reply, LLMCalls).
type Event struct {
	ID         string       `json:"-"` // the SSE id, for Last-Event-ID
	Type       string       `json:"type"`
	TurnID     string       `json:"turn_id"`
	At         string       `json:"at,omitempty"`
	Text       string       `json:"text,omitempty"`
	Tool       string       `json:"tool,omitempty"`
	CallID     string       `json:"call_id,omitempty"`
	Status     string       `json:"status,omitempty"`
	DurationMS int64        `json:"duration_ms,omitempty"`
	Offset     int          `json:"offset"`
	LLMCall    int          `json:"llm_call,omitempty"`
	Reply      string       `json:"reply,omitempty"`
	LLMCalls   int          `json:"llm_calls,omitempty"`
	Artifact   *ArtifactRef `json:"artifact,omitempty"`
}

// ErrorAnswer is the body of every error answer of the API.
type ErrorAnswer struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong: a stable code and a message for people.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Workflow is one workflow template of GET /v1/catalog.
type Workflow struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Inputs      []struct {
		Path        string `json:"path"`
		Type        string `json:"type"`
		Description string `json:"description"`
	} `json:"inputs"`
}
