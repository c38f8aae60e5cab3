package devstack

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/llm"
)

// A validated batch goes straight to its calls (docs/architecture.md):
// when the LLM step's own write stored the batch validated, the loop
// goes from LLMStep to the Map of its ready calls, or, when none can run,
// to AppendResults; ValidateBatch does not run. A batch of one call
// whose outcome's write appended it goes from the Map back to the model;
// AppendResults does not run. Whichever way, the model gets every
// result, in call order, as it would through ValidateBatch and
// AppendResults (an invalid call's is failed); and a batch whose calls
// the guardian checks still goes through both.
func TestAValidatedBatchGoesStraightToItsCalls(t *testing.T) {
	t.Parallel()
	echo := func(id, text string) llm.ToolCall { return call(id, "slow_echo", map[string]any{"text": text}) }
	invalid := func(id string) llm.ToolCall { return call(id, "slow_echo", map[string]any{"text": 42}) }
	for _, tc := range []struct {
		name            string
		batch           []llm.ToolCall
		guarded         bool
		validate, apend int      // ValidateBatch and AppendResults runs
		want            []string // the results' statuses, in call order
	}{
		{"one call", []llm.ToolCall{echo("a", "one")}, false, 0, 0, []string{"succeeded"}},
		{"two calls", []llm.ToolCall{echo("a", "one"), echo("b", "two")}, false, 0, 1, []string{"succeeded", "succeeded"}},
		{"an invalid call first", []llm.ToolCall{invalid("a"), echo("b", "two")}, false, 0, 1, []string{"failed", "succeeded"}},
		{"only an invalid call", []llm.ToolCall{invalid("a")}, false, 0, 1, []string{"failed"}},
		{"one call the guardian checks", []llm.ToolCall{echo("a", "one")}, true, 1, 1, []string{"succeeded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, url := startSlowAgent(t, time.Millisecond)
			var got []string
			m := &model{decide: func(req llm.Request) *llm.Response {
				if req.Messages[len(req.Messages)-1].Role != llm.RoleTool {
					return calls(slices.Clone(tc.batch)...)
				}
				got = got[:0]
				for _, msg := range req.Messages {
					if msg.Role == llm.RoleTool {
						got = append(got, msg.ToolCallID+":"+toolResults(req)[msg.ToolCallID]["status"].(string))
					}
				}
				return answer("done")
			}}
			st, c := stack(t, m, func(cfg *Config) { cfg.Agents = []string{url} })
			if tc.guarded {
				st.Platform.Handlers.Guardian = demoGuardian(t, st, 0)
			}
			cid := c.newConversation()
			tid := c.send(cid, "echo")
			if v := c.wait(cid, tid); v.Status != "succeeded" || v.LLMCalls != 2 {
				t.Fatalf("turn = %s with %d LLM calls (%s), want succeeded with 2", v.Status, v.LLMCalls, v.Reply)
			}
			var want []string
			for i, s := range tc.want {
				want = append(want, tc.batch[i].ID+":"+s)
			}
			if !slices.Equal(got, want) {
				t.Errorf("the model got the results %v, want %v", got, want)
			}
			h, err := st.history(t.Context(), tid)
			if err != nil {
				t.Fatal(err)
			}
			entered := map[string]int{}
			var names []string
			for _, e := range h {
				if d := e.StateEnteredEventDetails; d != nil {
					entered[d.Name]++
					names = append(names, d.Name)
				}
			}
			if entered["ValidateBatch"] != tc.validate || entered["AppendResults"] != tc.apend {
				t.Errorf("ValidateBatch ran %d times and AppendResults %d, want %d and %d; states: %s",
					entered["ValidateBatch"], entered["AppendResults"], tc.validate, tc.apend, strings.Join(names, " "))
			}
		})
	}
}
