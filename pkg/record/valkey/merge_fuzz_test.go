package valkey_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/valkeytest"
)

// FuzzMergeTurns saves the progressing states of several turns through the
// real Store (on the embedded server) in a random interleaving, with
// repeated saves, and checks that Load merges them (docs/design.md §3.4a, docs/design.md §4):
// every turn's final state is there, and the transcript is each turn's
// block, whole and contiguous, ordered by turn start (ties by id). With
// duplicate provider ids across turns (issue 12), each turn's view is
// valid for a provider and holds every call of its own with its own
// result; and the view a step builds from LoadStep (issue 13) is the view
// of the whole conversation, for any window.
func FuzzMergeTurns(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{5, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 0, 1, 2, 3, 4, 0, 0, 0})
	f.Add([]byte{2, 3, 3, 1, 1, 1, 0, 0, 0, 1, 0, 1, 0, 1})
	f.Add([]byte{7, 1, 1, 1, 1, 1, 1, 1, 6, 5, 4, 3, 2, 1, 0, 6, 6, 6, 0, 3})
	f.Add([]byte("interleave the turns of one conversation in some random order"))
	_, c := valkeytest.Embedded(f)
	s := valkey.New(c, valkey.Options{})
	f.Fuzz(func(t *testing.T, data []byte) {
		next := func(n int) int {
			if len(data) == 0 {
				return 0
			}
			v := int(data[0]) % n
			data = data[1:]
			return v
		}
		cid := valkeytest.ID(t, "fz")
		if err := s.Create(t.Context(), record.Meta{ID: cid, Owner: "fuzz", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
		defer s.Delete(t.Context(), cid)
		n := 1 + next(8)
		dup := next(2) == 1 // every turn's calls are call_0, call_1, …
		starts := make([]int, n)
		final := make([]int, n)
		for i := range n {
			starts[i] = next(4) // ties on purpose
			final[i] = next(4)
		}
		state := func(i, step int) *record.Turn {
			id := fmt.Sprintf("t%d", i)
			tr := &record.Turn{ID: id, StartedAt: t0.Add(time.Duration(starts[i]) * time.Second), UpdatedAt: t0.Add(time.Duration(step) * time.Second),
				Status: record.StatusRunning, Messages: []llm.Message{{Role: llm.RoleUser, Content: "u " + id}}}
			for k := range step {
				call := fmt.Sprintf("%s-%d", id, k)
				if dup {
					call = fmt.Sprintf("call_%d", k)
				}
				tr.Messages = append(tr.Messages,
					llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: call, Name: "x", Arguments: "{}"}}},
					llm.ToolResultMessage(call, "r "+id+" "+call))
			}
			if step == final[i] {
				tr.Status = record.StatusSucceeded
				tr.Messages = append(tr.Messages, llm.Message{Role: llm.RoleAssistant, Content: "done " + id})
			}
			return tr
		}
		// One writer per turn saves its states in order, repeating some;
		// the fuzzer picks which turn writes next.
		step := make([]int, n)
		for range 3 * n * 5 {
			i := next(n)
			if step[i] > final[i] {
				continue
			}
			if err := s.SaveTurn(t.Context(), cid, state(i, step[i])); err != nil {
				t.Fatal(err)
			}
			if next(3) != 0 {
				step[i]++
			}
		}
		for i := range n { // every turn ends with its final state
			if step[i] <= final[i] {
				if err := s.SaveTurn(t.Context(), cid, state(i, final[i])); err != nil {
					t.Fatal(err)
				}
			}
		}
		conv, _, err := s.Load(t.Context(), cid, "")
		if err != nil {
			t.Fatal(err)
		}
		want := make([]*record.Turn, n)
		for i := range n {
			want[i] = state(i, final[i])
		}
		record.SortTurns(want)
		if diff := cmp.Diff(want, conv.Turns); diff != "" {
			t.Fatalf("Load() turns (-want +got):\n%s", diff)
		}
		if !dup {
			var msgs []llm.Message
			for _, tr := range want {
				msgs = append(msgs, tr.Messages...)
			}
			if diff := cmp.Diff(msgs, conv.LLMView("", 0)); diff != "" {
				t.Fatalf("LLMView() is not the turns' blocks in start order (-want +got):\n%s", diff)
			}
		}
		window := next(30)
		for _, tr := range want {
			view := conv.LLMView(tr.ID, window)
			if err := providerValid(view); err != "" {
				t.Fatalf("LLMView(%s, %d): %s", tr.ID, window, err)
			}
			// Its own calls are all there, each with its own result.
			got := map[string]bool{}
			for _, m := range view {
				if m.Role == llm.RoleTool {
					got[m.Content] = true
				}
			}
			for _, m := range tr.Messages {
				if m.Role == llm.RoleTool && !got[m.Content] {
					t.Fatalf("LLMView(%s) lost its own result %q", tr.ID, m.Content)
				}
			}
			step, _, err := s.LoadStep(t.Context(), cid, record.Query{TurnID: tr.ID, Window: max(window, 1)})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(conv.LLMView(tr.ID, max(window, 1)), step.LLMView(tr.ID, max(window, 1))); diff != "" {
				t.Fatalf("LoadStep(%s, %d) view differs from the full view (-full +step):\n%s", tr.ID, window, diff)
			}
		}
	})
}

// providerValid reports what makes a transcript invalid for a provider:
// a call without its result right after it, a result without its call, an
// id used twice.
func providerValid(msgs []llm.Message) string {
	seen := map[string]bool{}
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		if m.Role == llm.RoleTool {
			return fmt.Sprintf("message %d: result %s without its call", i, m.ToolCallID)
		}
		for k, c := range m.ToolCalls {
			if seen[c.ID] {
				return fmt.Sprintf("call id %s used twice", c.ID)
			}
			seen[c.ID] = true
			if j := i + 1 + k; j >= len(msgs) || msgs[j].Role != llm.RoleTool || msgs[j].ToolCallID != c.ID {
				return fmt.Sprintf("call %s of message %d has no result right after it", c.ID, i)
			}
		}
		i += len(m.ToolCalls)
	}
	return ""
}
