package record

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/clientagent/clientagent/pkg/llm"
)

// A blocked turn is never replayed to the model, even as stored before
// blocked messages were forgotten: its message, calls, results and answer
// are replaced by one placeholder.
func TestLLMViewNeverReplaysABlockedTurn(t *testing.T) {
	t.Parallel()
	blocked := turn("t1", 1, StatusBlocked, user("draw forbidden"), asst("", "a"), res("a", `{"word":"forbidden"}`), asst("forbidden!"))
	next := turn("t2", 2, StatusRunning, user("hello"))
	c := &Conversation{Turns: []*Turn{blocked, next}}
	got := c.LLMView("t2", 0)
	want := []llm.Message{user(BlockedText), user("hello")}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("LLMView (-want +got):\n%s", d)
	}
}

func TestForgetBlocked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		turn *Turn
		text string // what ForgetBlocked returns
	}{
		{"message", &Turn{Text: "draw forbidden", Messages: []llm.Message{user("draw forbidden")},
			History: []HistoryEntry{{Role: "user", Kind: KindMessage, Content: "draw forbidden"}}}, "draw forbidden"},
		{"workflow inputs", &Turn{Workflow: &WorkflowSelection{ID: "w", Inputs: map[string]any{"word": "forbidden"}},
			Messages: []llm.Message{user("Run the workflow w."), {Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c", Name: "workflow_w", Arguments: `{"word":"forbidden"}`}}}},
			Pending:  []PendingCall{{CallID: "c", Tool: "workflow_w", Arguments: map[string]any{"word": "forbidden"}}},
			History: []HistoryEntry{{Role: "user", Kind: KindMessage, Content: "Run the workflow w"},
				{Role: "tool", Kind: KindToolResult, Tool: "workflow_w", ToolInputs: map[string]any{"word": "forbidden"}}}}, "Run the workflow w."},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.turn.ForgetBlocked(); got != tc.text {
				t.Errorf("ForgetBlocked = %q, want %q", got, tc.text)
			}
			if tc.turn.BlockedHash != TextHash(tc.text) {
				t.Errorf("BlockedHash = %q, want the hash of %q", tc.turn.BlockedHash, tc.text)
			}
			b, _ := json.Marshal(tc.turn)
			if strings.Contains(string(b), "forbidden") {
				t.Errorf("the forgotten turn keeps the text: %s", b)
			}
			if again := tc.turn.ForgetBlocked(); again != "" {
				t.Errorf("a second ForgetBlocked = %q, want nothing left to forget", again)
			}
		})
	}
}
