package record

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/clientagent/clientagent/pkg/llm"
)

// BlockedText is what is kept of a message the guardian blocked, in place
// of its text: in the turn's text, its transcript, its history and the
// conversation's title. The turn keeps a hash of the text instead
// (Turn.BlockedHash), as the audit log does.
const BlockedText = "[message blocked by the policy guardian]"

// TextHash is the hash a blocked text is kept as: "sha256:" and its hex.
func TextHash(text string) string {
	sum := sha256.Sum256([]byte(text))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ForgetBlocked replaces what the user sent in turn t — its text, its user
// messages and history entries, a selected workflow's inputs, the
// arguments of the calls made from them and the form answers to them —
// by BlockedText, keeping only the text's hash. It returns the text it replaced, so the store can
// forget it where the turn is not the only copy (the title, the event log).
// A turn already forgotten is left as it is.
func (t *Turn) ForgetBlocked() string {
	if t.BlockedHash != "" {
		return ""
	}
	text := t.Text
	if text == "" {
		for _, m := range t.Messages {
			if m.Role == llm.RoleUser {
				text = m.Content
				break
			}
		}
	}
	if text == "" && t.Workflow != nil {
		text = mustJSON(t.Workflow.Inputs)
	}
	t.BlockedHash = TextHash(text)
	if t.Text != "" {
		t.Text = BlockedText
	}
	if t.Workflow != nil {
		t.Workflow = &WorkflowSelection{ID: t.Workflow.ID}
	}
	// The transcript keeps only the placeholder: calls made from the
	// message (a workflow's inputs) and their results are dropped with it.
	t.Messages = []llm.Message{{Role: llm.RoleUser, Content: BlockedText}}
	for i := range t.Pending {
		t.Pending[i].Arguments = nil
	}
	// An LLM call's inspector held the message too.
	for i := range t.Steps {
		t.Steps[i].Inspect = nil
	}
	// Form answers fill the calls' arguments: they go with them.
	for i := range t.Answers {
		t.Answers[i].Values = nil
	}
	for i := range t.History {
		h := &t.History[i]
		if h.Role == "user" {
			h.Content = BlockedText
		}
		h.ToolInputs = nil
	}
	return text
}
