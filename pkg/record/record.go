// Package record is the conversation record of docs/design.md §3.4 and §3.4a: the
// turns of a conversation, their transcript blocks, pending calls, results
// and artifacts, and the merged view computed on read (llm_view, pending
// input ownership, recent_skill_inputs, the transcript window). The Valkey
// layout (docs/design.md §4) lives in the subpackage valkey. This package must not
// call the LLM, specialists or Step Functions.
package record

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/wire"
)

// Status is a turn's state as the API reports it.
type Status = wire.Status

const (
	StatusRunning          = wire.StatusRunning
	StatusAwaitingInput    = wire.StatusAwaitingInput
	StatusAwaitingApproval = wire.StatusAwaitingApproval
	StatusSucceeded        = wire.StatusSucceeded
	StatusFailed           = wire.StatusFailed
	StatusExpired          = wire.StatusExpired
	StatusSuperseded       = wire.StatusSuperseded
	// StatusCancelled: the user stopped the turn (issue 15).
	StatusCancelled = wire.StatusCancelled
	// StatusBlocked: the guardian refused the user's request (issue 19).
	StatusBlocked = wire.StatusBlocked
)

// Meta is a conversation's own data, written once at creation.
type Meta struct {
	ID        string    `json:"conversation_id"`
	Owner     string    `json:"owner"`
	CreatedAt time.Time `json:"created_at"`
	// Title and UpdatedAt are derived on read (first user text, newest turn update).
	Title     string    `json:"title,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
	// Status is the status of the newest turn, by start (List only): an
	// older turn that ends later does not hide a newer one still running.
	Status Status `json:"status,omitempty"`
}

// Conversation is what was read of one conversation, in one round trip.
// Turns are ordered by StartedAt (then id). Store.Load reads everything;
// Store.LoadStep reads what one step needs (Query), so that a step's cost
// does not grow with the conversation's length: then Turns holds the
// step's own turn in full, the turns still active and the newest turns
// of the transcript window (their transcript blocks and call states
// only), and Artifacts the newest of the catalog and those of the turn.
type Conversation struct {
	Meta      Meta
	Turns     []*Turn
	Artifacts []artifact.Artifact // the catalog, ordered by CreatedAt
	// ArtifactTotal is the number of artifacts in the whole catalog, when
	// Artifacts holds only part of it (0: Artifacts is the whole catalog).
	ArtifactTotal int
	// Inputs is the summary of recent_skill_inputs the store keeps (docs/design.md
	// §3.5): per tool, the inputs of its newest succeeded call of any turn.
	Inputs map[string]SkillInputs
	// WindowFrom is the turn where the last LLM call's transcript window
	// started: the next call keeps it while the window allows, so the
	// start of the transcript (a provider's cached prefix) changes only in
	// steps (LLMWindow).
	WindowFrom string
}

// SkillInputs are the inputs of one succeeded call, at its time.
type SkillInputs struct {
	At     time.Time      `json:"at"`
	Inputs map[string]any `json:"inputs"`
}

// Spend is what provider calls cost a turn.
type Spend struct {
	Calls        int
	Tokens       int
	CachedTokens int
	CostMicros   int64
	// WindowFrom, when set, is the window start the call used
	// (Conversation.WindowFrom), stored with the spend in one round trip.
	WindowFrom string
	// Events are appended to the event log in the same round trip.
	Events []Event
}

// Query says what Store.LoadStep reads besides the conversation's meta and
// its active turns (running or waiting).
type Query struct {
	// TurnID is the step's turn, read in full ("" for none).
	TurnID string
	// Window > 0 also reads the newest turns whose transcript blocks cover
	// Window entries of the LLM view (docs/design.md §3.6), for an LLM call.
	Window int
	// Outcomes reads the turn's stored call outcomes.
	Outcomes bool
	// Artifacts is how many of the newest catalog entries to read besides
	// the turn's own (0: DefaultCatalogSize; NoCatalog: none).
	Artifacts int
	// After names the writes the step follows, as its input names them:
	// the tokens of the writes that read ahead for it (ReadAhead). A Store
	// that answered the newest of them with this query hands that answer
	// over, once, instead of reading again.
	After []string
}

// ReadAhead is a Store whose writes can answer, in their own round trip,
// the read of the step that follows them (docs/architecture.md, "A step's
// read rides on the write before it"). The read is taken atomically just
// after the write, so the next step that takes it sees the record as if it
// had read the moment the write landed: a write of anyone else after that
// is one that came just after its read, which every step already meets
// (a cancel refuses the write). A step takes it only when its input names
// the write's token (Query.After), so a step that follows anything else,
// such as a user's answer, reads.
type ReadAhead interface {
	// SaveTurnAhead is SaveTurn, and next read ahead; the token names it
	// ("" when the Store keeps none).
	SaveTurnAhead(ctx context.Context, cid string, t *Turn, next Query, artifacts ...artifact.Artifact) (string, error)
	// PutOutcomeAhead is PutOutcome, and next read ahead; the token names
	// it ("" when the Store keeps none).
	PutOutcomeAhead(ctx context.Context, cid, turnID string, o CallOutcome, next Query) (Put, string, error)
}

// FirstWrite writes a conversation's new turn without a read before it:
// the write itself checks what a request with a plain message (text
// alone: no files, no workflow, no turn it replaces) would have read,
// that the conversation is owner's and that none of its turns runs or
// waits, and writes nothing otherwise (ErrReadFirst). Such a message
// then costs the API one round trip, its write, which reads ahead for
// the turn's first LLM step as ReadAhead's SaveTurnAhead does; the token
// names that read ("" when the Store keeps none). (docs/architecture.md,
// "A plain message is one round trip".)
type FirstWrite interface {
	SaveFirstTurn(ctx context.Context, cid, owner string, t *Turn, next Query) (string, error)
}

// AppendingPut stores a call's outcome and, in the same round trip, the
// turn with that outcome's result appended: the write of its batch's
// AppendResults when the call is the batch's only one (docs/architecture.md,
// "A batch of one call is appended by its call"). The turn is written only
// when the turn's results hold o as this put sent it; appended says
// whether it was, token names next read ahead as ReadAhead's do.
type AppendingPut interface {
	PutOutcomeAppending(ctx context.Context, cid string, o CallOutcome, t *Turn, next Query, artifacts ...artifact.Artifact) (put Put, appended bool, token string, err error)
}

// StartingSave writes a turn whose batch is one call ready to run and, in
// the same script, after the write, starts that call as Store.LoadStart
// would (docs/architecture.md, "The only call starts in the write that
// asked for it"): a cancel marked before the write refuses the write and
// the start with it; one marked after it finds the call started. next is
// read ahead as SaveTurnAhead reads it, and the Store keeps that read for
// the call's LoadStart, which takes it instead of a round trip and
// reports the call started. start's events, whose data names the call's
// tool itself (no CallTool), are written after the turn's when the call
// starts; LoadStart writes none for a call started this way. started says
// whether the call was started (false: the Store keeps no reads, and only
// saved the turn, without start's events).
type StartingSave interface {
	SaveTurnStarting(ctx context.Context, cid string, t *Turn, next Query, start Start, artifacts ...artifact.Artifact) (token string, started bool, err error)
}

// Start is the call a step starts in its read (Store.LoadStart), with the
// events that tell it started.
type Start struct {
	CallID string
	Events []Event
}

// CallTool, as a value of a Start event's data, stands for the call's
// tool, which the step learns only from the read the start is part of.
const CallTool = "\x00tool\x00"

// Told is s's events as the store writes them for a call of tool: each
// CallTool in their data replaced by tool.
func (s Start) Told(tool string) []Event {
	out := make([]Event, len(s.Events))
	for i, e := range s.Events {
		d := make(map[string]any, len(e.Data))
		for k, v := range e.Data {
			if v == CallTool {
				v = tool
			}
			d[k] = v
		}
		e.Data = d
		out[i] = e
	}
	return out
}

// DefaultCatalogSize is how many of a conversation's newest artifacts a
// step reads for the system prompt's catalog; older ones are looked up by
// id when a call names them (Store.Artifacts).
const DefaultCatalogSize = 50

// NoCatalog as Query.Artifacts reads neither the artifact catalog (its
// newest entries, its size) nor the skills' newest inputs: for a reader
// that needs only the conversation and its turns, such as an event
// stream that opens or a rename, whatever the catalog holds.
const NoCatalog = -1

// WorkflowSelection is an explicit workflow start (docs/api/openapi.yaml messages body).
type WorkflowSelection = wire.WorkflowSelection

// Turn is one user turn: one Step Functions execution, one hash field
// turn:<id>. Only that turn's execution writes it (the API only reads it
// and answers task tokens), so concurrent turns never lose each other's
// writes.
type Turn struct {
	ID        string             `json:"turn_id"`
	StartedAt time.Time          `json:"started_at"`
	UpdatedAt time.Time          `json:"updated_at"`
	Status    Status             `json:"status"`
	Text      string             `json:"text"`
	Files     []string           `json:"files,omitempty"` // uploads named for this turn
	Workflow  *WorkflowSelection `json:"workflow,omitempty"`
	// Supersedes is the turn this one replaces (an edited and resent, or
	// regenerated, last message): the model's window leaves that turn out;
	// the history keeps it.
	Supersedes string `json:"supersedes,omitempty"`
	// Trace is the W3C traceparent of the turn's root span (pkg/telemetry),
	// set by the API when tracing is on: the step or the API call that ends
	// the turn exports that span.
	Trace string `json:"trace,omitempty"`

	// Messages is this turn's llm_messages block: its user message, its
	// assistant messages and the tool results appended in call order.
	Messages []llm.Message `json:"llm_messages"`
	// History is this turn's conversation_history entries (user-visible).
	History []HistoryEntry `json:"conversation_history"`
	// Pending is the batch of the newest assistant message while it is
	// validated, waits for the user or runs; empty once appended.
	Pending []PendingCall `json:"pending_calls,omitempty"`
	// ToolResults is turn_tool_results: call id → raw result of this turn
	// (by call id, so two calls of one skill keep both results).
	ToolResults map[string]json.RawMessage `json:"turn_tool_results,omitempty"`

	FinalReport string `json:"final_report,omitempty"`
	Error       string `json:"error,omitempty"` // failed / expired message
	// Partial is the text the model had streamed when the user stopped
	// the turn (kept, marked interrupted, in Messages too).
	Partial string `json:"partial,omitempty"`
	// BlockedHash is the hash (TextHash) of the message the guardian
	// blocked, which is not kept (ForgetBlocked).
	BlockedHash string `json:"blocked_hash,omitempty"`

	// Events are appended to the conversation's event log by the write
	// that saves the turn, in the same round trip; not stored with it.
	Events []Event `json:"-"`
	// Spend, when set, is a provider call's spend that the write saving
	// the turn adds to its counters in the same round trip, before it
	// checks for a cancel (so a refused write still counts it), as
	// AddSpend would; not stored with the turn.
	Spend *Spend `json:"-"`

	// LLMCalls and Tokens are what the turn spent on the model. The store
	// keeps them beside the turn (Store.AddSpend), counted once per real
	// provider call, and fills them in on Load.
	LLMCalls int `json:"llm_calls"`
	Tokens   int `json:"tokens"`
	// CachedTokens are the input tokens the provider read from its prompt
	// cache (part of Tokens); CostMicros is the turn's model cost in
	// millionths of a US dollar, priced per model (llm.Prices).
	CachedTokens int    `json:"cached_tokens,omitempty"`
	CostMicros   int64  `json:"cost_micros,omitempty"`
	Steps        []Step `json:"steps,omitempty"`
	// Repeats tracks, per call (tool + canonical arguments), the newest
	// result and how many calls in a row returned it: no-progress detection
	// (docs/design.md §10) counts only repeats that changed nothing.
	Repeats map[string]Repeat `json:"repeats,omitempty"`
	// Failures counts failed results per tool this turn (the re-plan cap).
	Failures map[string]int `json:"failures,omitempty"`
	// Waited is the time this turn spent waiting for the user, which the
	// turn's wall-clock budget does not count; WaitingSince is set while
	// it waits.
	Waited       time.Duration `json:"waited,omitempty"`
	WaitingSince time.Time     `json:"waiting_since,omitzero"`
	// Produced lists the artifact ids this turn produced.
	Produced []string `json:"produced,omitempty"`
	// Answers are the user's replies to the turn's pauses, as applied, in
	// order: what a page shows as the user's answers after a reload.
	Answers []Answer `json:"answers,omitempty"`

	// TaskToken is the Step Functions token of the open pause; set by the
	// await handler together with the waiting status, cleared on resume.
	TaskToken string    `json:"task_token,omitempty"`
	ExpiresAt time.Time `json:"expires_at,omitempty"`

	// AnsweredToken is the token the API has answered (MarkAnswered), kept
	// beside the turn's field: until the execution applies the reply, a turn
	// whose TaskToken equals it is running, and a second answer is refused.
	AnsweredToken string `json:"-"`
	// CancelRequested: the user's cancel is marked (MarkCancelled); a turn
	// with it that has not ended yet has a cancel in flight, which any step
	// finishes (turn.Handlers.finishCancel).
	CancelRequested bool `json:"-"`
	// SupersededBy is the turn that replaced this one (its Supersedes),
	// stored apart by the replacing turn's writes.
	SupersededBy string `json:"-"`
}

// Answer is one reply of the user to a pause of a turn (a form or an
// approval), as applied: what the page shows after a reload.
type Answer = wire.Answer

// Answer kinds.
const (
	AnswerForm     = "form"
	AnswerApproval = "approval"
)

// Repeat is the no-progress state of one call (tool + arguments): the
// hash of its newest result and how many calls in a row returned it.
type Repeat struct {
	Result string `json:"result"`
	Count  int    `json:"count"`
}

// Answered reports whether the open pause's token has been answered.
func (t *Turn) Answered() bool { return t.TaskToken != "" && t.AnsweredToken == t.TaskToken }

// Step is one visible step of a turn (docs/api/openapi.yaml Turn.steps): an LLM call
// (Tool "llm") or a tool call.
type Step = wire.Step

// LLMInspect is one LLM call as the provider had it: the messages sent
// (the window, after the system prompt and the step's context), the tools
// offered, and the response.
type LLMInspect struct {
	System   string        `json:"system"`
	Messages []llm.Message `json:"messages"`
	Context  string        `json:"context,omitempty"`
	Tools    []string      `json:"tools"`
	Response LLMResponse   `json:"response"`
}

// LLMResponse is an LLM call's raw answer.
type LLMResponse struct {
	Model     string         `json:"model,omitempty"`
	Text      string         `json:"text,omitempty"`
	ToolCalls []llm.ToolCall `json:"tool_calls,omitempty"`
	Usage     llm.Usage      `json:"usage"`
}

// StepStopped is the status of the LLM call a cancel interrupted.
const StepStopped = wire.StepStopped

// TimeLayout is how the API writes times: RFC 3339 with milliseconds.
const TimeLayout = wire.TimeLayout

// HistoryEntry is one conversation_history entry: what a chat UI shows,
// plus evidence (tool inputs, artifacts) that outlives the transcript window.
type HistoryEntry = wire.HistoryEntry

// CallKind says what a pending call invokes.
type CallKind string

const (
	KindSkill    CallKind = "skill"
	KindWorkflow CallKind = "workflow"
	KindAskUser  CallKind = "ask_user"
	KindInvalid  CallKind = "invalid" // unknown tool or unparsable arguments
)

// CallState is where a pending call is in its lifecycle (docs/design.md §3.3).
type CallState string

const (
	CallInvalid       CallState = "invalid"        // has an immediate error result
	CallNeedsInput    CallState = "needs_input"    // a form is open
	CallNeedsApproval CallState = "needs_approval" // approval is open
	CallReady         CallState = "ready"          // runs with the batch
	CallRejected      CallState = "rejected"       // the user rejected it
	CallAnswered      CallState = "answered"       // ask_user, answered by the form
	CallNotExecuted   CallState = "not_executed"   // superseded or expired
	CallBlocked       CallState = "blocked"        // the guardian refused its arguments (Note: why)
	CallDone          CallState = "done"           // its result is stored
	// CallRunning: the call had started when its turn was cancelled; its
	// result joins the ended turn when it ends.
	CallRunning CallState = "running"
)

// PendingCall is one tool call of the current batch.
type PendingCall struct {
	CallID string   `json:"call_id"`
	Tool   string   `json:"tool"`
	Kind   CallKind `json:"kind"`
	// Arguments are the merged arguments: the model's, form answers and
	// values filled from context. Sources names where each came from.
	Arguments map[string]any    `json:"arguments,omitempty"`
	Sources   map[string]string `json:"input_sources,omitempty"` // model|user|context
	State     CallState         `json:"state"`
	Error     string            `json:"error,omitempty"` // the error result for CallInvalid
	Form      []wire.FormField  `json:"form,omitempty"`
	// FormNote is shown above the form (e.g. a specialist's input-required text).
	FormNote string `json:"form_note,omitempty"`
	// ApprovalHash is the hash of the exact arguments shown for approval;
	// the call runs only if its arguments still hash to it.
	ApprovalHash string `json:"approval_hash,omitempty"`
	Approved     bool   `json:"approved,omitempty"`
	Note         string `json:"note,omitempty"` // user's note on approval/rejection
	// EditedFrom is the hash of the arguments before the user edited them
	// on approval (docs/design.md §9 "modify"); the audit records both hashes.
	EditedFrom string `json:"edited_from,omitempty"`
	// FilesNote names the files the user uploaded with the reply to this
	// call (docs/design.md §3.5); it goes into the call's tool result.
	FilesNote string `json:"files_note,omitempty"`
	// A2A continues a specialist task that answered input-required.
	A2A *A2ATask `json:"a2a,omitempty"`
	// FromUser marks the call the user made by selecting a workflow
	// explicitly (docs/design.md §3.4): no model chose its arguments, so every input
	// it lacks is asked in its form rather than returned as an error, except
	// an artifact reference, which the user is never asked for (docs/design.md §3.2):
	// the model gets that error and picks one from the catalog.
	FromUser bool `json:"from_user,omitempty"`
	// Plan is what a workflow call waiting for approval will run, step by
	// step (set with the approval; the approval covers its arguments).
	Plan []wire.PlanStep `json:"plan,omitempty"`
}

// A2ATask identifies a specialist's task to continue with the same ids.
type A2ATask struct {
	TaskID    string `json:"task_id"`
	ContextID string `json:"context_id"`
	// WorkflowStep is the 1-based step of a workflow call whose specialist
	// asked; 0 for a skill call's own task.
	WorkflowStep int `json:"workflow_step,omitempty"`
}

// Result statuses (docs/design.md §3.5).
const (
	ResultSucceeded   = "succeeded"
	ResultFailed      = "failed"
	ResultRejected    = "rejected"
	ResultNotExecuted = "not_executed"
	// ResultBlocked: the guardian refused the call's arguments, or withheld
	// its result (issue 19).
	ResultBlocked  = "blocked"
	ResultAnswered = "answered"
)

// ToolResult is the compact JSON that goes back to the model (docs/design.md §3.5).
type ToolResult struct {
	Status       string            `json:"status"`
	Summary      string            `json:"summary,omitempty"`
	Artifacts    []artifact.Ref    `json:"artifacts,omitempty"`
	Result       string            `json:"result,omitempty"`
	Inputs       json.RawMessage   `json:"inputs,omitempty"`
	InputSources map[string]string `json:"input_sources,omitempty"`
	Error        string            `json:"error,omitempty"`
}

// CallOutcome is what invoking one call produced, stored once per call id
// in conv:{cid}:results:<tid> (HSETNX), so a retried invoke never runs a
// specialist twice for a stored result.
type CallOutcome struct {
	CallID string          `json:"call_id"`
	Tool   string          `json:"tool"`
	Result ToolResult      `json:"result"`
	Raw    json.RawMessage `json:"raw,omitempty"` // full raw result for turn_tool_results
	// Events are appended to the event log with the outcome, when it is
	// the first stored (Store.PutOutcome); not stored with it.
	Events []Event `json:"-"`
	// Reserve counts the files of Artifacts against the conversation's
	// quota with the outcome, when it is the first stored (the Quota
	// store's Puts left them to it: artifact.DeferReservations); not
	// stored with it.
	Reserve   []artifact.Reservation `json:"-"`
	Artifacts []artifact.Artifact    `json:"artifacts,omitempty"`
	// InputRequired is set when the specialist answered input-required:
	// the call goes back to a form and its answer continues Task.
	InputRequired *InputRequired `json:"input_required,omitempty"`
	StartedAt     time.Time      `json:"started_at"`
	EndedAt       time.Time      `json:"ended_at"`
	// ContinuesAt is set (1-based) on the outcome of a workflow call that
	// stopped before that step for lack of time, its finished steps
	// stored: it is no result, nothing of it is stored, and the call goes
	// on in a new invocation. Never stored.
	ContinuesAt int `json:"-"`
}

// StepStatus is the status the call's step shows for outcome o: its
// result's, or input_required.
func (o CallOutcome) StepStatus() string {
	if o.InputRequired != nil {
		return "input_required"
	}
	return o.Result.Status
}

// WorkflowStepID names step i of workflow call callID: its stored
// outcome's field and its A2A call id.
func WorkflowStepID(callID string, i int) string { return callID + "." + strconv.Itoa(i) }

// TurnArtifacts lists the catalogued artifacts turn t produced, in order.
func (c *Conversation) TurnArtifacts(t *Turn) []artifact.Artifact {
	byID := make(map[string]artifact.Artifact, len(c.Artifacts))
	for _, a := range c.Artifacts {
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

// InputRequired is a specialist's request for more input.
type InputRequired struct {
	Message string           `json:"message"`
	Fields  []wire.FormField `json:"fields"`
	Task    A2ATask          `json:"task"`
}

// Put is what PutOutcome did.
type Put struct {
	Stored    bool // this call stored the outcome (the first one)
	Cancelled bool // the turn was marked cancelled by then
	// OverQuota is the outcome's first reservation (Reserve) that did not
	// fit, with what the conversation stored before it: nothing was
	// stored nor counted.
	OverQuota *QuotaRefusal
}

// QuotaRefusal is a reservation of PutOutcome that did not fit.
type QuotaRefusal struct {
	Reservation artifact.Reservation
	Used        int64 // bytes counted before it
}

// ErrNotFound is returned for a conversation or turn that does not exist.
var ErrNotFound = errors.New("record: not found")

// ErrCancelled is returned by SaveTurn for a turn the user cancelled: once
// MarkCancelled is stored, only the cancelled turn itself is written, so a
// step that was running at the time cannot write over the cancel.
var ErrCancelled = errors.New("record: the turn was cancelled")

// ErrReadFirst is returned by FirstWrite's SaveFirstTurn when the
// conversation is not as the write assumes (gone, someone else's, not in
// the store's current layout, or with a turn running or waiting): nothing
// was written, and the caller reads the conversation and decides as for
// any request.
var ErrReadFirst = errors.New("record: the conversation must be read first")

// Store faults callers tell apart (the API answers 503 with a code; the
// step handlers fail fast with a TransientError the state machine retries).
var (
	// ErrUnavailable wraps a store that did not answer in time: paused,
	// unreachable, or its connection pool exhausted.
	ErrUnavailable = errors.New("record: store unavailable")
	// ErrFull wraps a write the store refused for lack of memory
	// (maxmemory with noeviction); reads keep working.
	ErrFull = errors.New("record: store full")
)

// Store keeps conversation records. Every method makes at most one round
// trip to the server (pipelined), and every key of one conversation shares
// one cluster slot.
type Store interface {
	// Create stores a new conversation's meta and indexes it for its owner.
	Create(ctx context.Context, m Meta) error
	// Load reads the conversation (meta, every turn, the artifact catalog)
	// and, when turnID is not empty, that turn's stored call outcomes.
	// ErrNotFound when the conversation does not exist.
	Load(ctx context.Context, cid, turnID string) (*Conversation, map[string]CallOutcome, error)
	// LoadStep reads what one step of a turn needs (Query), in one round
	// trip and without reading the whole history. ErrNotFound when the
	// conversation does not exist.
	LoadStep(ctx context.Context, cid string, q Query) (*Conversation, map[string]CallOutcome, error)
	// Artifacts reads catalog entries by id; ids not in the catalog are
	// left out.
	Artifacts(ctx context.Context, cid string, ids ...string) ([]artifact.Artifact, error)
	// AddSpend adds one provider call's spend to turnID's counters at
	// once, apart from the turn's field, so a step that fails after the
	// call still counts it and a retried step counts each real call once.
	// ErrNotFound when the conversation does not exist.
	AddSpend(ctx context.Context, cid, turnID string, s Spend) error
	// SaveTurn writes turn t's field, adds artifacts to the catalog and
	// bumps the conversation's update time, in one transaction, with t's
	// Events and Spend.
	SaveTurn(ctx context.Context, cid string, t *Turn, artifacts ...artifact.Artifact) error
	// ForgetText removes text, turn turnID's message that the guardian
	// blocked, from where the conversation keeps it besides the turn (its
	// title, the event log); the turn itself forgets it with
	// Turn.ForgetBlocked. Idempotent.
	ForgetText(ctx context.Context, cid, turnID, text string) error
	// PutArtifacts adds artifacts to the catalog (uploads, which belong to
	// no turn yet).
	PutArtifacts(ctx context.Context, cid string, arts ...artifact.Artifact) error
	// MarkAnswered records that the API answered turnID's task token, so
	// the turn reads as running until its execution applies the reply.
	MarkAnswered(ctx context.Context, cid, turnID, token string) error
	// Rename sets the conversation's title. ErrNotFound when the
	// conversation does not exist.
	Rename(ctx context.Context, cid, title string) error
	// MarkCancelled records that the user cancelled turnID: from then on
	// SaveTurn refuses (ErrCancelled) every write of it that does not end
	// it as cancelled, and StartCall starts none of its calls. It returns
	// the calls started before (they run to their end). Marking again is
	// harmless and returns the same calls.
	MarkCancelled(ctx context.Context, cid, turnID string) (started []string, err error)
	// StartCall records that a call of turnID starts, unless the turn is
	// marked cancelled or the conversation is gone (false): whichever of StartCall and MarkCancelled
	// the store ran first decides whether the call runs. A call started
	// before starts again (true). evs go to the event log in the same
	// write when the call starts (its step.started), none when it does not.
	StartCall(ctx context.Context, cid, turnID, callID string, evs ...Event) (bool, error)
	// LoadStart is LoadStep of q.TurnID with its outcomes and StartCall of
	// callID in one atomic step, starting the call only when it may run:
	// no outcome is stored for it, and it is ready in a turn that has not
	// ended, or running (started before its turn was cancelled). It
	// reports whether the call started; the read is the record as it was
	// just before.
	// start.Events go to the event log in the same write when the call
	// starts (its step.started), CallTool in their data replaced by the
	// call's tool.
	LoadStart(ctx context.Context, cid string, q Query, start Start) (*Conversation, map[string]CallOutcome, bool, error)
	// Outcomes reads the stored call outcomes of the given turns, by turn
	// id, in one round trip (the conversation route shows running calls
	// as the turn route does).
	Outcomes(ctx context.Context, cid string, turnIDs ...string) (map[string]map[string]CallOutcome, error)
	// PutOutcome stores a call's outcome unless one is stored already; it
	// reports whether this call stored it, and whether the turn was
	// marked cancelled by then.
	PutOutcome(ctx context.Context, cid, turnID string, o CallOutcome) (Put, error)
	// DeleteOutcome removes a stored outcome (an input-required answer
	// re-runs the call).
	DeleteOutcome(ctx context.Context, cid, turnID, callID string) error
	// List returns the owner's conversations, newest update first.
	List(ctx context.Context, owner string) ([]Meta, error)
	// Delete removes every key of the conversation.
	Delete(ctx context.Context, cid string) error
}
