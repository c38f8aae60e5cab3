package guardian

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/clientagent/clientagent/pkg/audit"
)

// Record is the audit record of one decision: what was checked (by its
// hash, never the text), by which rule or agent, and what was decided.
type Record struct {
	Kind Kind   `json:"kind"`
	Tool string `json:"tool,omitempty"`
	// TextSHA256 is the hex sha256 of Input.Checked().
	TextSHA256 string `json:"text_sha256"`
	Action     Action `json:"action"`
	Rule       string `json:"rule,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// FailedOpen: the guardian failed and the policy let the input through.
	FailedOpen bool `json:"failed_open,omitempty"`
}

// Audit is the record of decision d about in; failOpen says that d is the
// pass a fail-open policy gave after the guardian failed (Checker.Check
// fills Verdict.Audit with it).
func Audit(in Input, d Decision, failOpen bool) Record {
	sum := sha256.Sum256([]byte(in.Checked()))
	return Record{
		Kind:       in.Kind,
		Tool:       in.Tool,
		TextSHA256: hex.EncodeToString(sum[:]),
		Action:     d.Action,
		Rule:       d.Rule,
		Reason:     d.Reason,
		FailedOpen: failOpen,
	}
}

// AuditKind is the audit.Event kind of a check of kind k:
// "guardian_request", "guardian_model_output", "guardian_tool_call" or
// "guardian_tool_result".
func AuditKind(k Kind) string { return "guardian_" + string(k) }

// Audit event statuses.
const (
	StatusBlocked    = "blocked"
	StatusRedacted   = "redacted"
	StatusFailedOpen = "failed_open"
	StatusAllowed    = "allowed"
)

// Event is r as an event of the audit log (pkg/audit): Kind is AuditKind,
// ArgumentsHash the hash of the checked text, Status blocked, redacted or
// failed_open, and Note "<rule>: <reason>". callID is empty for a request.
// The event's name stays deterministic (audit.Event.Name): a retried step
// writes the same event again.
func (r Record) Event(at time.Time, conversation, turn, user, callID string) audit.Event {
	status := StatusAllowed
	switch {
	case r.FailedOpen:
		status = StatusFailedOpen
	case r.Action == Block:
		status = StatusBlocked
	case r.Action == Redact:
		status = StatusRedacted
	}
	note := r.Reason
	if r.Rule != "" {
		note = r.Rule + ": " + r.Reason
	}
	return audit.Event{
		At:            at,
		Conversation:  conversation,
		Turn:          turn,
		User:          user,
		Kind:          AuditKind(r.Kind),
		CallID:        callID,
		Tool:          r.Tool,
		ArgumentsHash: r.TextSHA256,
		Status:        status,
		Note:          note,
	}
}
