// Package guardian is the policy check of a turn (issues 19 and 25): a
// Guardian looks at the user's message, at what the model writes (its
// answer as it streams and once complete, and the arguments of the calls
// it makes), at each tool call's arguments before the call runs, and at
// each specialist's result before it reaches the transcript, and allows,
// blocks or redacts it.
//
// This package holds the domain: the Guardian interface, the Policy that
// says which kinds are checked and which fail open, the Checker that applies
// a Guardian under a Policy (deadline, fail-closed errors, audit records),
// and the audit record of a decision. The implementations live in
// subpackages named after what they use, so a binary links only what it
// is configured with:
//
//   - guardian/rules: a built-in rule set from a JSON or YAML file (deny
//     patterns; email, phone and Luhn-checked card number detectors);
//   - guardian/a2aagent: a guardian agent's skill called over A2A;
//   - guardian/bedrock: Amazon Bedrock Guardrails (ApplyGuardrail);
//   - guardian/guardianconfig: chooses one of them from CLIENTAGENT_GUARDIAN.
//
// # Integration in the turn loop
//
// A nil *Checker is valid and checks nothing, at no cost, so the loop calls
// it unconditionally:
//
//	v, err := h.Guardian.Check(ctx, guardian.Input{Kind: guardian.Request, Text: msg})
//	if err != nil {            // a *guardian.CheckError: fail the turn closed
//		return failTurn(err.Error())
//	}
//	if v.Audit != nil {        // a block, a redaction, or a check that failed open
//		events = append(events, v.Audit.Event(now, convID, turnID, user, callID))
//	}
//	switch v.Action {
//	case guardian.Block:  // request, model_output: end the turn "blocked"
//	                      // with v.Reason (and retract what was streamed);
//	                      // tool_call: a "blocked" result carrying v.Reason;
//	                      // tool_result: replace the result by a notice
//	case guardian.Redact: // tool_result, request, a model's answer: use v.Text
//	}
//
// A tool call is checked as the canonical JSON of its arguments (Input.Checked).
// A redaction of a tool call's arguments blocks the call (Checker.Check turns
// Redact into Block for ToolCall, and for a ModelOutput of a call): the call
// must run with the arguments the user approved and the audit log hashed,
// or not at all.
//
// Rule-based guardians match a normal form of the text (guardian/rules:
// compatibility forms, invisible characters, combining marks and
// confusable letters folded away); the A2A and Bedrock guardians are given
// the original text and do their own analysis.
//
// The package must not decide what the turn does with a decision, store
// anything, or log the checked text: decisions and audit records carry a
// hash of it, never the text.
package guardian

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Kind is what is being checked.
type Kind string

// The kinds of check.
const (
	// Request is the user's message of a turn.
	Request Kind = "request"
	// ToolCall is a call's arguments, after forms and approvals are
	// resolved and before the call runs.
	ToolCall Kind = "tool_call"
	// ToolResult is a specialist's result, before it reaches the transcript.
	ToolResult Kind = "tool_result"
	// ModelOutput is what the model writes: its answer (Text, also a
	// window of it while it streams) or a tool call's arguments as the
	// model wrote them (Tool and Arguments), before the answer is stored
	// or the call runs.
	ModelOutput Kind = "model_output"
)

// Kinds are all kinds, in the order a turn meets them.
var Kinds = []Kind{Request, ModelOutput, ToolCall, ToolResult}

// ParseKind reads a kind by its name.
func ParseKind(s string) (Kind, error) {
	k := Kind(strings.ToLower(strings.TrimSpace(s)))
	switch k {
	case Request, ModelOutput, ToolCall, ToolResult:
		return k, nil
	}
	return "", fmt.Errorf("guardian: unknown kind %q (want request, model_output, tool_call or tool_result)", s)
}

// Action is what a guardian decided.
type Action string

// The actions.
const (
	Allow  Action = "allow"
	Block  Action = "block"
	Redact Action = "redact"
)

// Input is one thing to check.
type Input struct {
	Kind Kind
	// Text is what is checked: the user's message (Request), or the
	// specialist's result as the model would read it (ToolResult). For a
	// ToolCall (or a ModelOutput with Arguments) it may stay empty: the
	// canonical JSON of Arguments is checked (Checked).
	Text string
	// Tool is the tool of a ToolCall or ToolResult.
	Tool string
	// Arguments are a ToolCall's arguments, or those of the call a
	// ModelOutput checks.
	Arguments map[string]any
}

// Checked is the text a guardian checks and the audit record hashes: Text,
// or for a ToolCall (or a ModelOutput with Arguments) without Text the
// canonical JSON of its arguments (object keys sorted, no HTML escaping,
// no insignificant space).
func (in Input) Checked() string {
	if in.Text != "" || !in.call() {
		return in.Text
	}
	return CanonicalJSON(in.Arguments)
}

// call reports whether in is a tool call's arguments.
func (in Input) call() bool {
	return in.Kind == ToolCall || in.Kind == ModelOutput && in.Arguments != nil
}

// CanonicalJSON is v as compact JSON with sorted object keys and without
// HTML escaping; nil arguments are "{}".
func CanonicalJSON(args map[string]any) string {
	if args == nil {
		return "{}"
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(args); err != nil {
		// Arguments come from decoded JSON; an unencodable value is a
		// programming error, still checked as its Go form.
		return fmt.Sprint(args)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// Decision is a guardian's answer about one Input.
type Decision struct {
	Action Action
	// Reason says why, for the user and the model (a block) and the audit
	// log. It never quotes the matched text.
	Reason string
	// Rule is the rule id or the agent that decided.
	Rule string
	// Text is the redacted text when Action is Redact.
	Text string
}

// Guardian checks one input.
type Guardian interface {
	// Check decides about in. An error means the guardian failed (it is
	// down, timed out, or answered something unreadable), not that it
	// disapproves: the Checker fails closed on it unless the Policy lets
	// that kind fail open. Check must respect ctx's deadline.
	Check(ctx context.Context, in Input) (Decision, error)
}
