package turn

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"

	"github.com/clientagent/clientagent/pkg/audit"
	"github.com/clientagent/clientagent/pkg/catalog/batch"
	"github.com/clientagent/clientagent/pkg/guardian"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/record"
)

// The guardian (issues 19 and 25) checks four things, each where it costs
// no latency or where nothing has happened yet:
//
//   - the user's message, in parallel with the turn's first LLM call
//     (LLMStep): a block ends the turn "blocked", the model's answer is
//     dropped unseen and the message is forgotten (record.BlockedText and a
//     hash in its place, in the turn, the title and the event log); a
//     redaction replaces the message and asks again;
//   - what the model writes (LLMStep): each streamed batch with the tail
//     already shown, before it is shown, then the whole answer and each
//     call's arguments before the answer is stored or a call runs; a block
//     retracts what was shown and ends the turn "blocked";
//   - each call's arguments once the batch is otherwise ready (Validate):
//     a blocked call gets a "blocked" result and the others still run —
//     the batch rule holds, nothing runs before every call is cleared; a
//     blocked call of a selected workflow ends the turn "blocked";
//   - each result before it reaches the transcript (Append, and every
//     batch that closes early): redacted, or withheld behind a notice.
//
// A guardian that fails fails closed (the turn ends with a message)
// unless the policy lets that check fail open; the audit log records every
// block, redaction and fail-open pass with a hash of what was checked.

// requestCheck is the check of a turn's message, running beside its first
// LLM call.
type requestCheck struct {
	done chan struct{}
	v    guardian.Verdict
	err  error
}

// checkRequest starts checking turn t's user message, or returns nil when
// there is nothing to check (no guardian, or not the turn's first call).
// The answer's text streamed meanwhile is held (d); a check that allows
// the message releases it at once, so the answer shows while it streams.
func (h *Handlers) checkRequest(ctx context.Context, t *record.Turn, d *deltas) *requestCheck {
	i := firstUser(t)
	if t.LLMCalls > 0 || i < 0 || !h.guardian().Enabled(guardian.Request) {
		return nil
	}
	d.hold()
	rc := &requestCheck{done: make(chan struct{})}
	text := t.Messages[i].Content
	go func() {
		defer close(rc.done)
		rc.v, rc.err = h.guardian().Check(ctx, guardian.Input{Kind: guardian.Request, Text: text})
		if rc.err == nil && rc.v.Action == guardian.Allow && rc.v.Audit == nil {
			d.release()
		}
	}()
	return rc
}

func (rc *requestCheck) wait() (guardian.Verdict, error) {
	<-rc.done
	return rc.v, rc.err
}

// firstUser is the index of turn t's user message, or -1.
func firstUser(t *record.Turn) int {
	for i, m := range t.Messages {
		if m.Role == llm.RoleUser {
			return i
		}
	}
	return -1
}

// guardEvent is the audit event of a verdict that has one.
func (h *Handlers) guardEvent(conv *record.Conversation, t *record.Turn, callID string, v guardian.Verdict) []audit.Event {
	if v.Audit == nil {
		return nil
	}
	return []audit.Event{v.Audit.Event(h.now(), conv.Meta.ID, t.ID, conv.Meta.Owner, callID)}
}

// guardFailedMessage is the reply of a turn the guardian could not check:
// what it could not check, not the guardian's internals (the step logs
// those).
func (h *Handlers) guardFailure(ctx context.Context, r Ref, err error) string {
	h.log().ErrorContext(ctx, "guardian failed", "conversation", r.ConversationID, "turn", r.TurnID, "error", err.Error())
	return guardFailedMessage(err)
}

func guardFailedMessage(err error) string {
	what := "request"
	var ce *guardian.CheckError
	if errors.As(err, &ce) {
		what = strings.ReplaceAll(string(ce.Kind), "_", " ")
	}
	return "Stopped: the policy guardian could not check the " + what + " (it did not answer in time or failed), and it fails closed, so nothing more ran. Your conversation is intact; please try again later."
}

// guardCalls checks the arguments of the batch's ready calls that have not
// run, in parallel. A blocked call becomes CallBlocked with the reason;
// the audit events are returned for the step to write before it saves.
func (h *Handlers) guardCalls(ctx context.Context, conv *record.Conversation, t *record.Turn, outcomes map[string]record.CallOutcome) ([]audit.Event, error) {
	if !h.guardian().Enabled(guardian.ToolCall) {
		return nil, nil
	}
	var idx []int
	for i, pc := range t.Pending {
		if _, done := outcomes[pc.CallID]; pc.State == record.CallReady && !done {
			idx = append(idx, i)
		}
	}
	verdicts := make([]guardian.Verdict, len(idx))
	errs := make([]error, len(idx))
	var wg sync.WaitGroup
	for k, i := range idx {
		wg.Go(func() {
			pc := t.Pending[i]
			verdicts[k], errs[k] = h.guardian().Check(ctx, guardian.Input{Kind: guardian.ToolCall, Tool: pc.Tool, Arguments: pc.Arguments})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, errs[firstErr(errs)]
	}
	var events []audit.Event
	for k, i := range idx {
		pc := &t.Pending[i]
		events = append(events, h.guardEvent(conv, t, pc.CallID, verdicts[k])...)
		if verdicts[k].Action == guardian.Block {
			pc.State, pc.Note = record.CallBlocked, verdicts[k].Reason
		}
	}
	return events, nil
}

func firstErr(errs []error) int {
	for i, err := range errs {
		if err != nil {
			return i
		}
	}
	return -1
}

// guardResults checks, in parallel, each result of the batch as the model
// would read it, and returns the outcomes to append: a redacted result in
// place of the original, a blocked one (or one the guardian failed to
// check) withheld behind a notice, without its artifacts. The error is the
// first guardian failure under a fail-closed policy: the results are
// withheld all the same, and the caller decides whether the turn goes on.
func (h *Handlers) guardResults(ctx context.Context, conv *record.Conversation, t *record.Turn, outcomes map[string]record.CallOutcome) (map[string]record.CallOutcome, []audit.Event, error) {
	if !h.guardian().Enabled(guardian.ToolResult) {
		return outcomes, nil, nil
	}
	var idx []int
	for i, pc := range t.Pending {
		if o, ok := outcomes[pc.CallID]; ok && pc.State == record.CallReady && o.InputRequired == nil {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return outcomes, nil, nil
	}
	verdicts := make([]guardian.Verdict, len(idx))
	errs := make([]error, len(idx))
	var wg sync.WaitGroup
	for k, i := range idx {
		wg.Go(func() {
			pc := t.Pending[i]
			text := batch.Content(batch.Compact(pc, outcomes[pc.CallID].Result))
			verdicts[k], errs[k] = h.guardian().Check(ctx, guardian.Input{Kind: guardian.ToolResult, Tool: pc.Tool, Text: text})
		})
	}
	wg.Wait()
	out := make(map[string]record.CallOutcome, len(outcomes))
	for id, o := range outcomes {
		out[id] = o
	}
	var events []audit.Event
	for k, i := range idx {
		pc := t.Pending[i]
		o := out[pc.CallID]
		v := verdicts[k]
		switch {
		case errs[k] != nil:
			o = withheld(o, "The result was withheld: the policy guardian could not check it.")
		case v.Action == guardian.Block:
			o = withheld(o, "The result was withheld by the policy guardian. Reason: "+v.Reason)
		case v.Action == guardian.Redact:
			var r record.ToolResult
			if err := json.Unmarshal([]byte(v.Text), &r); err != nil || r.Status == "" {
				o = withheld(o, "The result was withheld: the policy guardian redacted it. Reason: "+v.Reason)
			} else {
				o.Result, o.Raw = r, nil
			}
		}
		out[pc.CallID] = o
		events = append(events, h.guardEvent(conv, t, pc.CallID, v)...)
	}
	if i := firstErr(errs); i >= 0 {
		return out, events, errs[i]
	}
	return out, events, nil
}

// withheld is o with its result replaced by a notice: status blocked, no
// artifacts, nothing of what the specialist said.
func withheld(o record.CallOutcome, notice string) record.CallOutcome {
	o.Result = record.ToolResult{Status: record.ResultBlocked, Error: notice}
	o.Raw, o.Artifacts = nil, nil
	return o
}

// streamCheck is the check of the model's answer as it streams (deltas):
// each batch, with the tail of what was shown, is checked as model output
// before it is shown; nil when model output is not checked.
func (h *Handlers) streamCheck(ctx context.Context) func(string) (guardian.Verdict, error) {
	if !h.guardian().Enabled(guardian.ModelOutput) {
		return nil
	}
	return func(window string) (guardian.Verdict, error) {
		return h.guardian().Check(ctx, guardian.Input{Kind: guardian.ModelOutput, Text: window})
	}
}

// outputInputs are what the model wrote in resp, as model output: its
// text, and each call's arguments (as the raw text when they are not a
// JSON object).
func outputInputs(resp *llm.Response) []guardian.Input {
	var out []guardian.Input
	if strings.TrimSpace(resp.Text) != "" {
		out = append(out, guardian.Input{Kind: guardian.ModelOutput, Text: resp.Text})
	}
	for _, c := range resp.ToolCalls {
		in := guardian.Input{Kind: guardian.ModelOutput, Tool: c.Name}
		if err := json.Unmarshal([]byte(c.Arguments), &in.Arguments); err != nil || in.Arguments == nil {
			in.Arguments, in.Text = nil, c.Arguments
		}
		out = append(out, in)
	}
	return out
}

// applyOutputCheck checks what the model wrote (issue 25) before the answer
// is stored or a call runs: the verdict of the stream's check when it
// stopped the stream, else the answer and each call's arguments, in
// parallel. It reports done when the check decided the step: a block
// retracts what was shown and ends the turn blocked; a guardian that
// failed ends it failed (closed). The model's answer is dropped unseen and
// its spend counted. A redacted answer (no calls) replaces resp.Text and
// what was shown.
func (h *Handlers) applyOutputCheck(ctx context.Context, in StepInput, conv *record.Conversation, t *record.Turn, deltas *deltas, resp *llm.Response) (StepOutput, bool, error) {
	if !h.guardian().Enabled(guardian.ModelOutput) {
		return StepOutput{}, false, nil
	}
	stopped, v, gerr := deltas.stopVerdict()
	var events []audit.Event
	if stopped && (gerr != nil || v.Action == guardian.Block) {
		events = h.guardEvent(conv, t, "", v)
	} else {
		// The whole answer is checked (a stream stopped for a redaction
		// is redacted whole, not by the window's redaction).
		gerr = nil
		inputs := outputInputs(resp)
		verdicts := make([]guardian.Verdict, len(inputs))
		errs := make([]error, len(inputs))
		var wg sync.WaitGroup
		for k, gin := range inputs {
			wg.Go(func() { verdicts[k], errs[k] = h.guardian().Check(ctx, gin) })
		}
		wg.Wait()
		v = guardian.Verdict{Decision: guardian.Decision{Action: guardian.Allow}}
		for k, vk := range verdicts {
			if errs[k] != nil {
				continue
			}
			events = append(events, h.guardEvent(conv, t, "", vk)...)
			if vk.Action == guardian.Block && v.Action != guardian.Block || vk.Action == guardian.Redact && v.Action == guardian.Allow {
				v = vk
			}
		}
		if i := firstErr(errs); i >= 0 {
			gerr = errs[i]
		}
	}
	if gerr == nil && v.Action != guardian.Block {
		if err := h.audit(ctx, events); err != nil {
			return StepOutput{}, true, err
		}
		if v.Action == guardian.Redact && len(resp.ToolCalls) == 0 {
			resp.Text = v.Text
			deltas.replace(v.Text)
		}
		return StepOutput{}, false, nil
	}
	deltas.retract()
	if err := h.countDropped(ctx, in.Ref, t, resp); err != nil {
		return StepOutput{}, true, err
	}
	if err := h.audit(ctx, events); err != nil {
		return StepOutput{}, true, err
	}
	if gerr != nil {
		out, err := h.endFailed(ctx, in.Ref, t, "guardian", h.guardFailure(ctx, in.Ref, gerr))
		return out, true, err
	}
	out, err := h.endBlocked(ctx, in.Ref, t, v.Reason)
	return out, true, err
}
