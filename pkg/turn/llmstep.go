package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/catalog/batch"
	"github.com/clientagent/clientagent/pkg/guardian"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/telemetry"
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
	// FailedState names the state whose error FailTurn records.
	FailedState string `json:"failed_state,omitempty"`
	// Direct says the state machine takes a batch this step stored
	// validated straight on (NextInvoke with its calls, or NextAppend),
	// past ValidateBatch, which would only hand it on. A definition
	// older than that (an execution that started before a deploy) sends
	// none, and the step answers NextTools as before.
	Direct bool `json:"direct,omitempty"`
}

// StepOutput tells the state machine what the model did.
type StepOutput struct {
	Next string `json:"next"`
	// Calls are the ids of the calls to run now (with NextInvoke), as
	// ValidateBatch would hand them on.
	Calls []string `json:"calls,omitempty"`
	// After is the token of the next handler's read (ValidateBatch's, or
	// AppendResults' with NextAppend), which the step's write read ahead
	// (Ref.After; "" when the store keeps none or no handler reads next).
	After string `json:"after,omitempty"`
}

// LLMStep makes one LLM call with every tool and stores the assistant
// message (docs/design.md §2, §3.6). It is idempotent: a retried step whose
// assistant message is already stored returns the same answer without
// calling the model again. The call's spend is recorded as soon as the
// provider answers, so a step that fails later still counts it.
//
// Limits end the turn with a message (docs/design.md §10): at most MaxLLMCalls
// calls, the token budget, the wall-clock budget, an empty final answer, a
// call that keeps returning the same result (no progress) and a tool that
// keeps failing (the re-plan cap). A response that reaches a limit ends the
// turn there: its calls get not_executed results, none runs and none asks
// the user.
func (h *Handlers) LLMStep(ctx context.Context, in StepInput) (StepOutput, error) {
	name := telemetry.SpanLLMStep
	if len(in.Fail) > 0 {
		name = telemetry.SpanFailTurn
	}
	ctx, span := h.startStep(ctx, in.Ref, name)
	out, err := h.llmStep(ctx, in)
	endStep(span, out.Next, err)
	return out, err
}

func (h *Handlers) llmStep(ctx context.Context, in StepInput) (StepOutput, error) {
	if len(in.Fail) > 0 {
		return h.failTurn(ctx, in)
	}
	started := h.now()
	conv, t, err := h.loadForLLM(ctx, in.Ref)
	if err != nil {
		return StepOutput{}, err
	}
	switch {
	case t.Status.Final() && hasRunningCalls(t):
		// A cancelled turn whose started calls lost their step (a crash,
		// a lost loop execution): Validate hands them to Invoke again,
		// which runs them to their end, as a resumed batch did.
		return StepOutput{Next: NextTools}, nil
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
	if conv, t, err = h.settleLostInWindow(ctx, in.Ref, conv, t); err != nil {
		return StepOutput{}, err
	}
	if step, msg := h.limitReached(t); msg != "" {
		return h.endFailed(ctx, in.Ref, t, step, msg)
	}
	cat, err := h.catalog(ctx)
	if err != nil {
		return StepOutput{}, err
	}
	// Issue 18: the request's start (tools, rules, transcript) stays the
	// same from call to call, so providers serve it from their prompt
	// cache; what changes per call is the Context, sent last.
	view, windowFrom := conv.LLMWindow(t.ID, h.Limits.Window)
	req := llm.Request{
		Flavour:  llm.Medium,
		System:   catalog.SystemPrompt(conv.Meta.Owner),
		Messages: view,
		Tools:    cat.Tools(),
		Context:  catalog.Context(catalog.PromptInput{Catalog: conv.Artifacts, Older: olderArtifacts(conv), Shown: shownArtifacts(view, conv.Artifacts), RecentSkillInputs: conv.RecentSkillInputs(), Now: started}),
		CacheKey: in.ConversationID,
	}
	llmCall := t.LLMCalls + 1
	// The call's step.started is written while the model thinks, once it
	// has thought for StartedAfter: its round trip is off the step's path,
	// and every later write of the step waits for it. A model that answers
	// sooner has it ride on the step's write (DefaultStartedAfter).
	var begun *later
	if h.events().Enabled() {
		begun = h.emitLater(ctx, in.ConversationID, h.startedAfter(), h.live(record.EventStepStarted, t.ID, map[string]any{"tool": "llm", "llm_call": llmCall}))
	}
	deltas := h.newDeltas(ctx, in.Ref, llmCall)
	if deltas != nil {
		req.OnText, req.OnReset = deltas.text, deltas.reset
		deltas.check = h.streamCheck(ctx)
		deltas.after = begun.wait
	}
	check := h.checkRequest(ctx, t, deltas)
	resp, err := h.chat(ctx, req, llmCall)
	rides := begun.take()
	if len(rides) > 0 && (err != nil || check != nil || h.guardian().Enabled(guardian.ModelOutput)) {
		// The ways on that may write events before the step's own write
		// (a failed call, the guardian's checks) write it first, as it is.
		h.emit(ctx, in.ConversationID, rides...)
		rides = nil
	}
	if check != nil {
		if out, done, gerr := h.applyRequestCheck(ctx, in, conv, t, check, resp); done {
			deltas.reset() // the answer to a blocked or redacted request is never shown
			return out, gerr
		}
		deltas.release()
	}
	if err != nil {
		deltas.flush()
		h.emit(ctx, in.ConversationID, h.stepEnded(t.ID, "llm", "", record.ResultFailed, started, h.now(), map[string]any{"llm_call": llmCall}))
		h.stepLog(ctx, in.Ref, "llm", "", "failed", started, 0, err)
		if errors.Is(err, llm.ErrRateLimited) || errors.Is(err, llm.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
			return StepOutput{}, &ModelUnavailableError{Err: err}
		}
		return StepOutput{}, &ProviderError{Err: err}
	}
	if out, done, err := h.applyOutputCheck(ctx, in, conv, t, deltas, resp); done {
		return out, err
	}
	// The provider call happened: count it now, once, whatever follows.
	spend := record.Spend{Calls: 1, Tokens: resp.Usage.Total(), CachedTokens: resp.Usage.CachedInputTokens, CostMicros: h.cost(resp)}
	if windowFrom != conv.WindowFrom {
		spend.WindowFrom = windowFrom
	}
	if h.events().Enabled() {
		// The answer's last text and the step's end go with the spend.
		spend.Events = append(append(rides, deltas.drain()...), h.stepEnded(t.ID, "llm", "", record.ResultSucceeded, started, h.now(),
			map[string]any{"llm_call": llmCall, "tokens": spend.Tokens, "cached_tokens": spend.CachedTokens}))
	}
	// Every way on from here saves the turn (h.write): the spend rides on
	// that write, in its round trip, and counts even when the write is
	// refused for a cancel (issue 29: one write per step).
	t.Spend = &spend
	t.LLMCalls++
	t.Tokens += spend.Tokens
	t.CachedTokens += spend.CachedTokens
	t.CostMicros += spend.CostMicros
	t.Steps = append(t.Steps, record.Step{Tool: "llm", Status: record.ResultSucceeded, StartedAt: started, EndedAt: h.now(),
		Tokens: spend.Tokens, CachedTokens: spend.CachedTokens, CostMicros: spend.CostMicros, Inspect: h.inspect(req, resp)})
	h.stepLog(ctx, in.Ref, "llm", "", "succeeded", started, resp.Usage.Total(), nil)

	if len(resp.ToolCalls) == 0 {
		text := strings.TrimSpace(resp.Text)
		if text == "" {
			// docs/design.md §3.6: an empty final answer is an error, never stored as one.
			return h.endFailed(ctx, in.Ref, t, "llm", "The model returned an empty answer. Please try again or rephrase the request.")
		}
		t.Messages = append(t.Messages, resp.AssistantMessage())
		t.History = append(t.History, record.HistoryEntry{Role: "assistant", Kind: "message", Content: text, At: h.now()})
		t.History = record.StampTurnArtifacts(t.History, conv.TurnArtifacts(t), true)
		t.FinalReport = text
		t.Status = record.StatusSucceeded
		if err := h.save(ctx, in.Ref, t); err != nil {
			return StepOutput{}, err
		}
		return StepOutput{Next: NextDone}, nil
	}
	assignCallIDs(t, resp.ToolCalls)
	t.Messages = append(t.Messages, resp.AssistantMessage())
	t.Pending = nil
	step, msg := h.limitReached(t)
	if msg == "" {
		step, msg = h.noProgress(t, resp.ToolCalls)
	}
	if msg != "" {
		// This response's calls never run: each gets its not_executed
		// result, so the transcript stays valid for every provider.
		for _, c := range resp.ToolCalls {
			r := record.ToolResult{Status: record.ResultNotExecuted, Summary: "Not executed: " + msg}
			t.Messages = append(t.Messages, llm.ToolResultMessage(c.ID, batch.Content(r)))
		}
		return h.endFailed(ctx, in.Ref, t, step, msg)
	}
	h.validateEarly(ctx, conv, t, cat)
	out := StepOutput{Next: NextTools}
	if in.Direct {
		out = directly(t)
	}
	if out.After, err = h.saveBatch(ctx, in.Ref, t, out.Next != NextInvoke); err != nil {
		return StepOutput{}, err
	}
	return out, nil
}

// directly is where a batch the step stored validated goes from the
// step ("A validated batch goes straight to its calls",
// docs/architecture.md): its ready calls run now (NextInvoke), or, when
// none can run (every call invalid), its results are appended
// (NextAppend). Exactly as ValidateBatch would hand it on, finding it
// stored so. A batch validateEarly left alone goes to ValidateBatch
// (NextTools).
func directly(t *record.Turn) StepOutput {
	if len(t.Pending) == 0 {
		return StepOutput{Next: NextTools}
	}
	out := StepOutput{Next: NextAppend}
	for _, pc := range t.Pending {
		if pc.State == record.CallReady {
			out.Next, out.Calls = NextInvoke, append(out.Calls, pc.CallID)
		}
	}
	return out
}

// validateEarly validates the calls of the model's answer, which t's
// last message holds, as ValidateBatch would, so that the step's own
// write stores the batch validated and ValidateBatch, finding it so, has
// nothing to write: one round trip less per batch (docs/architecture.md,
// "A batch is validated in the write that asked for it"). It does so only
// when nothing in the batch can pause or be checked on the way: no call
// needs a form or an approval, the guardian does not check tool calls,
// and the turn is not a workflow's. Otherwise, or when an artifact a call
// names cannot be read now, or in a program that checks no tool arguments
// (the llmstep function links no JSON Schema validator), it leaves the
// batch to ValidateBatch.
func (h *Handlers) validateEarly(ctx context.Context, conv *record.Conversation, t *record.Turn, cat *catalog.Catalog) {
	last, ok := lastMessage(t)
	if !ok || len(last.ToolCalls) == 0 || t.Workflow != nil || h.guardian().Enabled(guardian.ToolCall) || !catalog.ChecksArguments() {
		return
	}
	if ResolveArtifacts(ctx, h.Store, conv, t) != nil {
		return
	}
	pending := batch.Validate(cat, last.ToolCalls, Env(conv, t))
	if kind, _ := batch.NextPause(pending); kind != "" {
		return
	}
	t.Pending = pending
}

// saveBatch writes the step's answer with its calls, reading ahead for
// the handler that reads next (ahead: ValidateBatch or AppendResults;
// not when the calls run next, whose reads are their starts). A batch of
// one call that validateEarly stored ready to run starts in the write's
// round trip, as its InvokeCall's read would start it
// (record.StartingSave; docs/architecture.md, "The only call starts in
// the write that asked for it"): its step.started goes with the write's
// events, and its InvokeCall, told so, takes the write's read instead of
// a round trip of its own.
func (h *Handlers) saveBatch(ctx context.Context, r Ref, t *record.Turn, ahead bool) (string, error) {
	var start *record.Start
	if len(t.Pending) == 1 && t.Pending[0].State == record.CallReady {
		pc := t.Pending[0]
		start = &record.Start{CallID: pc.CallID}
		if h.events().Enabled() {
			start.Events = []record.Event{h.live(record.EventStepStarted, t.ID, map[string]any{"tool": pc.Tool, "call_id": pc.CallID})}
		}
	}
	t.UpdatedAt = h.now()
	next := batchQuery(r) // the starting call's LoadStart reads it too
	if !ahead && start == nil {
		next = nil
	}
	token, started, err := h.writeStarting(ctx, r, t, next, start)
	if started {
		h.told.put(startKey(r, start.CallID), h.now())
	}
	if !ahead {
		token = ""
	}
	return token, err
}

// inspect is what the LLM call sent and got, for the step's inspector;
// nil unless the operator turned content capture on (Tracing.Recording).
func (h *Handlers) inspect(req llm.Request, resp *llm.Response) json.RawMessage {
	if !h.tracing().Recording() {
		return nil
	}
	in := &record.LLMInspect{System: req.System, Messages: req.Messages, Context: req.Context, Tools: []string{},
		Response: record.LLMResponse{Model: resp.Model, Text: resp.Text, ToolCalls: resp.ToolCalls, Usage: resp.Usage}}
	for _, t := range req.Tools {
		in.Tools = append(in.Tools, t.Name)
	}
	b, err := json.Marshal(in)
	if err != nil {
		return nil // a message that does not encode would not have been sent
	}
	return b
}

// applyRequestCheck waits for the check of the turn's message that ran
// beside its first LLM call (guard.go). It reports done when the check
// decided the step: the turn ends blocked or failed (the model's answer,
// unseen, is dropped; its spend is counted), or the message was redacted
// and the step asks the model again with the redacted text.
func (h *Handlers) applyRequestCheck(ctx context.Context, in StepInput, conv *record.Conversation, t *record.Turn, check *requestCheck, resp *llm.Response) (StepOutput, bool, error) {
	v, gerr := check.wait()
	if gerr == nil && v.Action == guardian.Allow && v.Audit == nil {
		return StepOutput{}, false, nil
	}
	if resp != nil && (gerr != nil || v.Action != guardian.Allow) {
		if err := h.countDropped(ctx, in.Ref, t, resp); err != nil {
			return StepOutput{}, true, err
		}
	}
	if err := h.audit(ctx, h.guardEvent(conv, t, "", v)); err != nil {
		return StepOutput{}, true, err
	}
	switch {
	case gerr != nil:
		out, err := h.endFailed(ctx, in.Ref, t, "guardian", h.guardFailure(ctx, in.Ref, gerr))
		return out, true, err
	case v.Action == guardian.Block:
		out, err := h.endBlockedRequest(ctx, in.Ref, t, v.Reason)
		return out, true, err
	case v.Action == guardian.Redact:
		i := firstUser(t)
		t.Messages[i].Content = v.Text
		if err := h.save(ctx, in.Ref, t); err != nil {
			return StepOutput{}, true, err
		}
		out, err := h.llmStep(ctx, in)
		return out, true, err
	}
	return StepOutput{}, false, nil // allowed, failing open: audited above
}

// countDropped records the spend of a provider call whose answer is
// dropped unseen (a blocked request or output).
func (h *Handlers) countDropped(ctx context.Context, r Ref, t *record.Turn, resp *llm.Response) error {
	spend := record.Spend{Calls: 1, Tokens: resp.Usage.Total(), CachedTokens: resp.Usage.CachedInputTokens, CostMicros: h.cost(resp)}
	if err := h.Store.AddSpend(ctx, r.ConversationID, r.TurnID, spend); err != nil {
		return &TransientError{Err: fmt.Errorf("record spend of turn %s: %w", t.ID, err)}
	}
	t.LLMCalls++
	t.Tokens += spend.Tokens
	t.CachedTokens += spend.CachedTokens
	t.CostMicros += spend.CostMicros
	return nil
}

// endBlockedRequest ends the turn as blocked because of what the user sent
// (its message, or a selected workflow's inputs): that is not kept, as
// text, anywhere — the turn, the title and the event log keep
// record.BlockedText and the turn a hash (record.Turn.ForgetBlocked).
func (h *Handlers) endBlockedRequest(ctx context.Context, r Ref, t *record.Turn, reason string) (StepOutput, error) {
	if text := t.ForgetBlocked(); text != "" {
		if err := h.Store.ForgetText(ctx, r.ConversationID, r.TurnID, text); err != nil {
			return StepOutput{}, &TransientError{Err: fmt.Errorf("forget the blocked message of turn %s: %w", t.ID, err)}
		}
	}
	return h.endBlocked(ctx, r, t, reason)
}

// endBlocked ends the turn as blocked by the guardian, with its reason.
func (h *Handlers) endBlocked(ctx context.Context, r Ref, t *record.Turn, reason string) (StepOutput, error) {
	msg := "Blocked by the policy guardian: " + reason
	t.Status = record.StatusBlocked
	t.Error = msg
	t.History = append(t.History, record.HistoryEntry{Role: "assistant", Kind: "blocked", Content: msg, At: h.now()})
	if err := h.save(ctx, r, t); err != nil {
		return StepOutput{}, err
	}
	h.log().WarnContext(ctx, "turn blocked", "conversation", r.ConversationID, "turn", r.TurnID, "reason", reason)
	return StepOutput{Next: NextFailed}, nil
}

// cost is what resp cost at its model's price (0 for a model the price
// table does not know).
func (h *Handlers) cost(resp *llm.Response) int64 {
	prices := h.Prices
	if prices == nil {
		prices = defaultPrices
	}
	p, _ := prices.Lookup(resp.Model)
	return p.CostMicros(resp.Usage)
}

var defaultPrices = llm.DefaultPrices()

// shownArtifacts are the ids of the catalog's artifacts that view names:
// the results that produced them and the messages that uploaded them.
func shownArtifacts(view []llm.Message, arts []artifact.Artifact) map[string]bool {
	shown := map[string]bool{}
	for _, m := range view {
		if m.Role != llm.RoleTool && m.Role != llm.RoleUser {
			continue
		}
		for _, a := range arts {
			if !shown[a.ID] && strings.Contains(m.Content, a.ID) {
				shown[a.ID] = true
			}
		}
	}
	return shown
}

// olderArtifacts is how many artifacts of the catalog the step did not read.
func olderArtifacts(conv *record.Conversation) int {
	if conv.ArtifactTotal > len(conv.Artifacts) {
		return conv.ArtifactTotal - len(conv.Artifacts)
	}
	return 0
}

// limitReached returns the step and message of a limit the turn has
// reached: checked before an LLM call, and after it, when the response's
// calls would run next.
func (h *Handlers) limitReached(t *record.Turn) (step, msg string) {
	if h.Limits.MaxLLMCalls > 0 && t.LLMCalls >= h.Limits.MaxLLMCalls {
		return "limit", fmt.Sprintf("Stopped: this request needed more than %d model calls without reaching an answer. Nothing more will run; please narrow the request.", h.Limits.MaxLLMCalls)
	}
	if h.Limits.TokenBudget > 0 && t.Tokens >= h.Limits.TokenBudget {
		return "budget", fmt.Sprintf("Stopped: this request used its budget of %d tokens (%d used) without reaching an answer. Nothing more will run.", h.Limits.TokenBudget, t.Tokens)
	}
	if h.Limits.CostBudget > 0 && t.CostMicros >= h.Limits.CostBudget {
		return "budget", fmt.Sprintf("Stopped: this request used its budget of $%.4f (it cost $%.4f) without reaching an answer. Nothing more will run.", float64(h.Limits.CostBudget)/1e6, float64(t.CostMicros)/1e6)
	}
	if h.Limits.TurnTimeout > 0 && h.activeTime(t) >= h.Limits.TurnTimeout {
		return "budget", fmt.Sprintf("Stopped: this request ran for longer than its time budget of %s (not counting the time spent waiting for you). Nothing more will run; please narrow the request.", h.Limits.TurnTimeout)
	}
	return "", ""
}

// activeTime is how long turn t has run, not counting its waits for the user.
func (h *Handlers) activeTime(t *record.Turn) time.Duration {
	now := h.now()
	d := now.Sub(t.StartedAt) - t.Waited
	if !t.WaitingSince.IsZero() {
		d -= now.Sub(t.WaitingSince)
	}
	return d
}

// noProgress ends the turn before a call that cannot make progress (docs/design.md
// §10): the same call (tool and arguments) that returned the same result
// MaxRepeats-1 times in a row, or a call of a tool that already failed
// MaxFailures times in this turn (the re-plan cap). Results are counted by
// Append (countResults).
func (h *Handlers) noProgress(t *record.Turn, calls []llm.ToolCall) (step, msg string) {
	var repeated, failing []string
	for _, c := range calls {
		if r, ok := t.Repeats[callKey(c.Name, c.Arguments)]; ok && h.Limits.MaxRepeats > 0 && r.Count+1 >= h.Limits.MaxRepeats {
			repeated = append(repeated, c.Name)
		}
		if h.Limits.MaxFailures > 0 && t.Failures[c.Name] >= h.Limits.MaxFailures {
			failing = append(failing, c.Name)
		}
	}
	if len(repeated) > 0 {
		return "no_progress", fmt.Sprintf("Stopped: no progress — the model called %s with the same arguments and got the same result %d times in a row. Nothing more will run; please rephrase the request.", names(repeated), h.Limits.MaxRepeats-1)
	}
	if len(failing) > 0 {
		return "replan_cap", fmt.Sprintf("Stopped: %s failed %d times in this request and the model tried again. Nothing more will run; please check the request or try later.", names(failing), h.Limits.MaxFailures)
	}
	return "", ""
}

func names(ns []string) string {
	slices.Sort(ns)
	return strings.Join(slices.Compact(ns), ", ")
}

// callKey names a call by tool and canonical arguments.
func callKey(tool, args string) string { return tool + ":" + canonicalArgs(args) }

func canonicalArgs(raw string) string {
	var v map[string]any
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return raw
	}
	return catalog.ArgumentsHash(v)
}

// endFailed ends the turn with a user-facing message (never reported as
// success); step names what ended it in the log (limit, budget,
// no_progress, replan_cap, llm, or the state that failed).
func (h *Handlers) endFailed(ctx context.Context, r Ref, t *record.Turn, step, msg string, arts ...artifact.Artifact) (StepOutput, error) {
	t.Status = record.StatusFailed
	t.Error = msg
	t.History = append(t.History, record.HistoryEntry{Role: "assistant", Kind: "error", Content: msg, At: h.now()})
	if err := h.save(ctx, r, t, arts...); err != nil {
		return StepOutput{}, err
	}
	h.log().WarnContext(ctx, "turn failed", "conversation", r.ConversationID, "turn", r.TurnID, "step", step, "reason", msg)
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
	name, cause := stateError(in.Fail)
	msg := failureMessage(name, cause)
	step := in.FailedState
	if step == "" {
		step = "execution"
	}
	h.log().ErrorContext(ctx, "turn failed", "conversation", in.ConversationID, "turn", in.TurnID, "step", step, "error", name, "cause", cause)
	// Calls of the open batch that ran keep their results and artifacts;
	// the rest are closed as not executed, so nothing that happened is lost.
	arts, err := h.closeBatch(ctx, conv, t, outcomes, record.StatusFailed, "Not executed: the turn failed.", "", nil)
	if err != nil {
		return StepOutput{}, err
	}
	_, err = h.endFailed(ctx, in.Ref, t, step, msg, arts...)
	return StepOutput{Next: NextFailed}, err
}

// stateError reads a Step Functions error output ({"Error", "Cause"}); the
// cause of a Lambda error is its JSON with errorMessage, which is returned.
func stateError(raw json.RawMessage) (name, cause string) {
	var e struct {
		Error string `json:"Error"`
		Cause string `json:"Cause"`
	}
	_ = json.Unmarshal(raw, &e)
	var c struct {
		ErrorMessage string `json:"errorMessage"`
	}
	if json.Unmarshal([]byte(e.Cause), &c) == nil && c.ErrorMessage != "" {
		return e.Error, c.ErrorMessage
	}
	return e.Error, e.Cause
}

// failureMessage is what the user reads for a step that failed with error
// name: a ProviderError's text is the provider's own message; anything
// unexpected is an internal error with the conversation intact.
func failureMessage(name, cause string) string {
	switch name {
	case "ProviderError":
		return "The model refused the request: " + cause
	case "ModelUnavailableError":
		return "The model is unavailable or rate limited right now, so this request stopped; your conversation is intact. Please try again in a minute."
	case ErrNameNeverStarted:
		return "The turn was never started; your message is kept. Please send it again."
	case "WorkflowContinuesError":
		// The state machine's retries of a long workflow ran out.
		return "A workflow ran longer than the platform allows and was stopped (" + cause + "); your conversation is intact."
	}
	return "The turn failed because of an internal error; your conversation is intact and you can send the request again."
}

// startWorkflow injects a synthetic assistant call to an explicitly
// selected workflow (docs/design.md §3.4): the form inputs are its arguments, so it
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

// assignCallIDs gives every call of a response its stored id (CallID),
// numbered after the calls the turn made already.
func assignCallIDs(t *record.Turn, calls []llm.ToolCall) {
	n := 0
	for _, m := range t.Messages {
		n += len(m.ToolCalls)
	}
	for i := range calls {
		calls[i].ID = CallID(t.ID, n+i+1)
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
