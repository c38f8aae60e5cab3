package record

import (
	"fmt"
	"slices"
	"testing"

	"github.com/clientagent/clientagent/pkg/llm"
)

// checkProviderInvariant reports the first way view breaks what every
// provider requires (docs/design.md §3.3, §3.4a), or "" when it holds: each
// assistant tool call is followed, directly after its message and before
// any other non-tool message, by exactly one result per call id; no result
// stands without its call; no call id repeats; no system messages.
func checkProviderInvariant(view []llm.Message) string {
	seen := map[string]bool{}
	for i := 0; i < len(view); i++ {
		m := view[i]
		switch m.Role {
		case llm.RoleSystem:
			return fmt.Sprintf("entry %d is a system message", i)
		case llm.RoleTool:
			return fmt.Sprintf("entry %d: result %q without a preceding call", i, m.ToolCallID)
		case llm.RoleAssistant:
			if m.Content == "" && len(m.ToolCalls) == 0 {
				return fmt.Sprintf("entry %d: empty assistant message", i)
			}
			want := map[string]int{}
			for _, tc := range m.ToolCalls {
				if tc.ID == "" {
					return fmt.Sprintf("entry %d: call without id", i)
				}
				if seen[tc.ID] {
					return fmt.Sprintf("entry %d: call id %q repeats", i, tc.ID)
				}
				seen[tc.ID] = true
				want[tc.ID]++
			}
			j := i + 1
			for ; j < len(view) && view[j].Role == llm.RoleTool; j++ {
				id := view[j].ToolCallID
				if want[id] != 1 {
					return fmt.Sprintf("entry %d: result %q is not for an unanswered call of entry %d", j, id, i)
				}
				want[id] = 0
			}
			for id, n := range want {
				if n != 0 {
					return fmt.Sprintf("entry %d: call %q has no result before entry %d", i, id, j)
				}
			}
			i = j - 1
		}
	}
	return ""
}

// bytesReader hands out fuzz bytes, then zeros.
type bytesReader struct {
	b []byte
	i int
}

func (r *bytesReader) next(n int) int {
	if n <= 0 {
		return 0
	}
	if r.i >= len(r.b) {
		return 0
	}
	v := int(r.b[r.i])
	r.i++
	return v % n
}

var fuzzStatuses = []Status{StatusRunning, StatusAwaitingInput, StatusAwaitingApproval, StatusSucceeded, StatusFailed, StatusExpired, StatusSuperseded}

// genConversation builds a random conversation: turns with random starts
// (ties included), statuses and messages drawn from a small call-id pool,
// so calls repeat, results land in other turns, duplicate and orphan.
func genConversation(data []byte) *Conversation {
	r := &bytesReader{b: data}
	n := 1 + r.next(5)
	var turns []*Turn
	for ti := range n {
		t := &Turn{ID: fmt.Sprintf("t%d", ti), StartedAt: at(r.next(6)), Status: fuzzStatuses[r.next(len(fuzzStatuses))]}
		if r.next(4) != 0 { // most turns start with their user message
			t.Messages = append(t.Messages, user(fmt.Sprintf("u-%s-0", t.ID)))
		}
		for k := range r.next(9) {
			switch r.next(6) {
			case 0:
				t.Messages = append(t.Messages, user(fmt.Sprintf("u-%s-%d", t.ID, k+1)))
			case 1, 2:
				m := llm.Message{Role: llm.RoleAssistant}
				if r.next(2) == 0 {
					m.Content = "text"
				}
				for range r.next(4) {
					id := ""
					if v := r.next(9); v > 0 {
						id = fmt.Sprintf("c%d", v)
					}
					m.ToolCalls = append(m.ToolCalls, llm.ToolCall{ID: id, Name: "x", Arguments: "{}"})
				}
				t.Messages = append(t.Messages, m)
			case 3, 4:
				id := fmt.Sprintf("c%d", r.next(10))
				t.Messages = append(t.Messages, res(id, fmt.Sprintf("r-%s-%d", t.ID, k)))
			case 5:
				t.Messages = append(t.Messages, llm.Message{Role: llm.RoleSystem, Content: "sys"})
			}
		}
		turns = append(turns, t)
	}
	return Assemble(Meta{ID: "fuzz"}, turns, nil)
}

func FuzzLLMView(f *testing.F) {
	f.Add([]byte{}, uint8(0), uint8(0), uint8(0))
	f.Add([]byte{3, 1, 3, 1, 4, 1, 1, 2, 1, 3, 3, 1, 2, 0, 5, 3, 4, 2, 1, 5, 9, 2, 6, 5, 3, 5}, uint8(1), uint8(4), uint8(3))
	f.Add([]byte{4, 0, 0, 1, 8, 1, 0, 3, 1, 2, 3, 4, 2, 3, 2, 3, 1, 5, 1, 8, 0, 1, 1, 3, 3, 4, 2, 7, 7, 7}, uint8(2), uint8(3), uint8(1))
	f.Add([]byte{255, 128, 64, 32, 16, 8, 4, 2, 1, 0, 255, 254, 253, 252, 251, 250, 249, 248, 247, 246}, uint8(0), uint8(2), uint8(9))
	f.Add([]byte("the quick brown fox jumps over the lazy dog, twice: the quick brown fox jumps"), uint8(3), uint8(6), uint8(5))
	f.Fuzz(func(t *testing.T, data []byte, self, window, fill uint8) {
		c := genConversation(data)
		turnID := fmt.Sprintf("t%d", int(self)%(len(c.Turns)+1)) // may name no turn
		_ = fill                                                 // kept so the corpus stays valid
		w := int(window) % 40
		full := c.LLMView(turnID, 0)
		got := c.LLMView(turnID, w)

		for name, v := range map[string][]llm.Message{"full": full, "windowed": got} {
			if err := checkProviderInvariant(v); err != "" {
				t.Fatalf("LLMView(%q, window %d) %s view: %s\n%v", turnID, w, name, err, v)
			}
		}
		// The window only drops a prefix, and only at a user message.
		if len(got) > len(full) || !slices.EqualFunc(got, full[len(full)-len(got):], msgEqual) {
			t.Fatalf("LLMView(window %d) is not a suffix of the full view", w)
		}
		if len(got) < len(full) && got[0].Role != llm.RoleUser {
			t.Fatalf("LLMView(window %d) cut before a %s message, want a user message", w, got[0].Role)
		}
		// No user message is lost without a window; this turn's never, and
		// this turn's block comes last.
		var users, selfUsers []string
		for _, tr := range c.Turns {
			for _, m := range tr.Messages {
				if m.Role == llm.RoleUser {
					users = append(users, m.Content)
					if tr.ID == turnID {
						selfUsers = append(selfUsers, m.Content)
					}
				}
			}
		}
		if n := countRole(full, llm.RoleUser); n != len(users) {
			t.Fatalf("LLMView full view has %d user messages, want %d", n, len(users))
		}
		var tail []string
		for _, m := range got {
			if m.Role == llm.RoleUser {
				tail = append(tail, m.Content)
			}
		}
		if len(tail) < len(selfUsers) || !slices.Equal(tail[len(tail)-len(selfUsers):], selfUsers) {
			t.Fatalf("LLMView(%q, window %d) user messages %v do not end with this turn's %v", turnID, w, tail, selfUsers)
		}
	})
}

// msgEqual compares messages but for call ids: an id repeated across
// turns is shown renamed within the window's view (uniqueIDs), so a
// windowed view may name a call differently than the full view does.
func msgEqual(a, b llm.Message) bool {
	if a.Role != b.Role || a.Content != b.Content || len(a.ToolCalls) != len(b.ToolCalls) || (a.ToolCallID == "") != (b.ToolCallID == "") {
		return false
	}
	for i := range a.ToolCalls {
		if a.ToolCalls[i].Name != b.ToolCalls[i].Name || a.ToolCalls[i].Arguments != b.ToolCalls[i].Arguments {
			return false
		}
	}
	return true
}

func countRole(v []llm.Message, r llm.Role) int {
	n := 0
	for _, m := range v {
		if m.Role == r {
			n++
		}
	}
	return n
}
