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
// repeated saves, and checks that Load merges them (spec §3.4a, DESIGN §3):
// every turn's final state is there, and the transcript is each turn's
// block, whole and contiguous, ordered by turn start (ties by id).
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
				tr.Messages = append(tr.Messages,
					llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: call, Name: "x", Arguments: "{}"}}},
					llm.ToolResultMessage(call, "r "+call))
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
		var msgs []llm.Message
		for _, tr := range want {
			msgs = append(msgs, tr.Messages...)
		}
		if diff := cmp.Diff(msgs, conv.LLMView("", 0)); diff != "" {
			t.Fatalf("LLMView() is not the turns' blocks in start order (-want +got):\n%s", diff)
		}
	})
}
