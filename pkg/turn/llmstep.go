package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/record"
)

// ErrNameNeverStarted is RecordFailure's error name for a turn whose
// execution was never started (the API stopped between storing the turn
// and starting it).
const ErrNameNeverStarted = "ExecutionNeverStarted"

// StepInput is LLMStep's payload. Fail is set by the state machine's
// FailTurn state with the error that ended the execution.
type StepInput struct {
	Ref
	Fail json.RawMessage `json:"fail,omitempty"`
}

// StepOutput tells the state machine what the model did.
type StepOutput struct {
	Next string `json:"next"`
}

// LLMStep makes one LLM call with every tool and stores the assistant
// message (spec §2, §3.6). It is idempotent: a retried step whose
// assistant message is already stored returns the same answer without
// calling the model again. Limits end the turn with a message: at most
// MaxLLMCalls calls, the token budget, an empty final answer, and the same
// call repeated MaxRepeats times (no progress).
func (h *Handlers) LLMStep(ctx context.Context, in StepInput) (StepOutput, error) {
	if len(in.Fail) > 0 {
		return h.failTurn(ctx, in)
	}
	started := h.now()
	conv, t, _, err := h.load(ctx, in.Ref, false)
	if err != nil {
		return StepOutput{}, err
	}
	switch {
	case t.Status == record.StatusFailed:
		return StepOutput{Next: NextFailed}, nil
	case t.Status.Final():
		return StepOutput{Next: NextDone}, nil
	}
	if last, ok := lastMessage(t); ok && last.Role == llm.RoleAssistant {
		if len(last.ToolCalls) > 0 {
			return StepOutput{Next: NextTools}, nil
		}
		return StepOutput{Next: NextDone}, nil
	}
	if t.Workflow != nil && t.LLMCalls == 0 && len(t.Messages) <= 1 && strings.TrimSpace(t.Text) == "" {
		return h.startWorkflow(ctx, in.Ref, t)
	}
	if msg := h.limitReached(t); msg != "" {
		return h.endFailed(ctx, in.Ref, t, msg)
	}
	cat, err := h.catalog(ctx)
	if err != nil {
		return StepOutput{}, err
	}
	req := llm.Request{
		Flavour:  llm.Medium,
		System:   catalog.SystemPrompt(catalog.PromptInput{Catalog: conv.Artifacts, RecentSkillInputs: conv.RecentSkillInputs(), Now: started, UserName: conv.Meta.Owner}),
		Messages: conv.LLMView(t.ID, nil, h.Limits.Window),
		Tools:    cat.Tools(),
	}
	resp, err := h.complete(ctx, req)
	if err != nil {
		h.stepLog(ctx, in.Ref, "llm", "", "failed", started, 0, err)
		if errors.Is(err, llm.ErrRateLimited) || errors.Is(err, llm.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
			return StepOutput{}, &ModelUnavailableError{Err: err}
		}
		return StepOutput{}, &ProviderError{Err: err}
	}
	t.LLMCalls++
	t.Tokens += resp.Usage.Total()
	t.Steps = append(t.Steps, record.Step{Tool: "llm", Status: record.ResultSucceeded, StartedAt: started, EndedAt: h.now()})
	h.stepLog(ctx, in.Ref, "llm", "", "succeeded", started, resp.Usage.Total(), nil)

	if len(resp.ToolCalls) == 0 {
		text := strings.TrimSpace(resp.Text)
		if text == "" {
			// spec §3.6: an empty final answer is an error, never stored as one.
			return h.endFailed(ctx, in.Ref, t, "The model returned an empty answer. Please try again or rephrase the request.")
		}
		t.Messages = append(t.Messages, resp.AssistantMessage())
		t.History = append(t.History, record.HistoryEntry{Role: "assistant", Kind: "message", Content: text, At: h.now()})
		t.History = record.StampTurnArtifacts(t.History, turnArtifacts(conv, t), true)
		t.FinalReport = text
		t.Status = record.StatusSucceeded
		if err := h.save(ctx, in.Ref, t); err != nil {
			return StepOutput{}, err
		}
		return StepOutput{Next: NextDone}, nil
	}
	uniqueCallIDs(conv, t, resp.ToolCalls)
	if msg := h.noProgress(t, resp.ToolCalls); msg != "" {
		return h.endFailed(ctx, in.Ref, t, msg)
	}
	t.Messages = append(t.Messages, resp.AssistantMessage())
	t.Pending = nil
	if err := h.save(ctx, in.Ref, t); err != nil {
		return StepOutput{}, err
	}
	return StepOutput{Next: NextTools}, nil
}

// limitReached returns the message of a limit the turn has hit before its
// next LLM call, or "".
func (h *Handlers) limitReached(t *record.Turn) string {
	if h.Limits.MaxLLMCalls > 0 && t.LLMCalls >= h.Limits.MaxLLMCalls {
		return fmt.Sprintf("Stopped: this request needed more than %d model calls without reaching an answer. Nothing more will run; please narrow the request.", h.Limits.MaxLLMCalls)
	}
	if h.Limits.TokenBudget > 0 && t.Tokens >= h.Limits.TokenBudget {
		return fmt.Sprintf("Stopped: this request used its budget of %d tokens (%d used) without reaching an answer.", h.Limits.TokenBudget, t.Tokens)
	}
	return ""
}

// noProgress counts each call by tool and canonical arguments; the same
// call a MaxRepeats-th time in one turn ends the turn (seed 004 §2).
func (h *Handlers) noProgress(t *record.Turn, calls []llm.ToolCall) string {
	if h.Limits.MaxRepeats <= 0 {
		return ""
	}
	if t.CallCounts == nil {
		t.CallCounts = map[string]int{}
	}
	var repeated []string
	for _, c := range calls {
		key := c.Name + ":" + canonicalArgs(c.Arguments)
		t.CallCounts[key]++
		if t.CallCounts[key] >= h.Limits.MaxRepeats {
			repeated = append(repeated, c.Name)
		}
	}
	if len(repeated) == 0 {
		return ""
	}
	sort.Strings(repeated)
	return fmt.Sprintf("Stopped: no progress — the model called %s with the same arguments %d times in this turn. Nothing more will run; please rephrase the request.", strings.Join(repeated, ", "), h.Limits.MaxRepeats)
}

func canonicalArgs(raw string) string {
	var v map[string]any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return raw
	}
	return catalog.ArgumentsHash(v)
}

// endFailed ends the turn with a user-facing message (never reported as success).
func (h *Handlers) endFailed(ctx context.Context, r Ref, t *record.Turn, msg string, arts ...artifact.Artifact) (StepOutput, error) {
	t.Status = record.StatusFailed
	t.Error = msg
	t.History = append(t.History, record.HistoryEntry{Role: "assistant", Kind: "error", Content: msg, At: h.now()})
	if err := h.save(ctx, r, t, arts...); err != nil {
		return StepOutput{}, err
	}
	h.stepLog(ctx, r, "limit", "", "failed", h.now(), 0, errors.New(msg))
	return StepOutput{Next: NextFailed}, nil
}

// RecordFailure records that turn r's execution ended abnormally (errName
// and cause as Step Functions reports them) when no step could record it:
// the API calls it on finding a dead execution behind a turn that still
// reads as running, so the record itself ends, not only what one poll
// shows. It is FailTurn's path, so calls that ran keep their results; a
// turn that already ended is left as it is.
func (h *Handlers) RecordFailure(ctx context.Context, r Ref, errName, cause string) error {
	fail, err := json.Marshal(map[string]string{"Error": errName, "Cause": cause})
	if err != nil {
		return fmt.Errorf("record failure of turn %s: %w", r.TurnID, err)
	}
	_, err = h.failTurn(ctx, StepInput{Ref: r, Fail: fail})
	return err
}

// failTurn records the error that ended the execution (the state machine's
// FailTurn state). A ProviderError's text is the provider's own message;
// anything else is reported as an internal error with the conversation intact.
func (h *Handlers) failTurn(ctx context.Context, in StepInput) (StepOutput, error) {
	conv, t, outcomes, err := h.load(ctx, in.Ref, true)
	if err != nil {
		return StepOutput{}, err
	}
	if t.Status.Final() {
		return StepOutput{Next: NextFailed}, nil
	}
	var e struct {
		Error string `json:"Error"`
		Cause string `json:"Cause"`
	}
	_ = json.Unmarshal(in.Fail, &e)
	msg := "The turn failed because of an internal error; your conversation is intact and you can send the request again."
	var cause struct {
		ErrorMessage string `json:"errorMessage"`
	}
	_ = json.Unmarshal([]byte(e.Cause), &cause)
	switch e.Error {
	case "ProviderError":
		msg = "The model refused the request: " + cause.ErrorMessage
	case "ModelUnavailableError":
		msg = "The model is unavailable or rate limited right now, so this request stopped; your conversation is intact. Please try again in a minute."
	case ErrNameNeverStarted:
		msg = "The turn was never started; your message is kept. Please send it again."
	case "WorkflowContinuesError":
		// The state machine's retries of a long workflow ran out.
		msg = "A workflow ran longer than the platform allows and was stopped (" + cause.ErrorMessage + "); your conversation is intact."
	}
	h.log().ErrorContext(ctx, "turn failed", "conversation", in.ConversationID, "turn", in.TurnID, "error", e.Error, "cause", e.Cause)
	// Calls of the open batch that ran keep their results and artifacts;
	// the rest are closed as not executed, so nothing that happened is lost.
	arts, err := h.closeBatch(ctx, conv, t, outcomes, record.StatusFailed, "Not executed: the turn failed.", "")
	if err != nil {
		return StepOutput{}, err
	}
	_, err = h.endFailed(ctx, in.Ref, t, msg, arts...)
	return StepOutput{Next: NextFailed}, err
}

// startWorkflow injects a synthetic assistant call to an explicitly
// selected workflow (spec §3.4): the form inputs are its arguments, so it
// takes the same validate/pause/execute path with no LLM routing decision.
func (h *Handlers) startWorkflow(ctx context.Context, r Ref, t *record.Turn) (StepOutput, error) {
	args := t.Workflow.Inputs
	if args == nil {
		args = map[string]any{}
	}
	call := llm.ToolCall{ID: SelectionCallID(t.ID), Name: catalog.WorkflowToolName(t.Workflow.ID), Arguments: mustJSON(args)}
	t.Messages = append(t.Messages, llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call}})
	if err := h.save(ctx, r, t); err != nil {
		return StepOutput{}, err
	}
	return StepOutput{Next: NextTools}, nil
}

// uniqueCallIDs gives every call of a response an id no other call of the
// conversation has: results are stored and repaired by call id, and some
// OpenAI-compatible servers send empty or constant ids.
func uniqueCallIDs(conv *record.Conversation, t *record.Turn, calls []llm.ToolCall) {
	seen := map[string]bool{}
	for _, other := range conv.Turns {
		for _, m := range other.Messages {
			for _, c := range m.ToolCalls {
				seen[c.ID] = true
			}
		}
	}
	for i := range calls {
		if calls[i].ID == "" || seen[calls[i].ID] {
			calls[i].ID = fmt.Sprintf("call_%s_%d_%d", t.ID, t.LLMCalls, i)
		}
		seen[calls[i].ID] = true
	}
}

// complete makes the LLM call with a deadline a little before the step's
// own (the Lambda's), so a slow provider ends as a ModelUnavailableError the
// state machine retries, not as a Lambda killed mid-call.
func (h *Handlers) complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	ctx, cancel := withMargin(ctx)
	defer cancel()
	return h.LLM.Complete(ctx, req)
}

// withMargin shortens ctx's deadline, if it has one, by stepMargin.
func withMargin(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(ctx, dl.Add(-stepMargin))
	}
	return context.WithCancel(ctx)
}

// stepMargin is the time a step keeps for itself after an outbound call.
const stepMargin = 5 * time.Second
