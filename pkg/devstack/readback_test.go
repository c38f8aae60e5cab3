package devstack

import (
	"testing"

	"github.com/clientagent/clientagent/pkg/valkeytest"
)

// On the local stack every step of a turn runs in one process: each
// step's read of its turn either rides on the write before it
// (docs/architecture.md, "A step's read rides on the write before it") or,
// after a write that did not read ahead (a batch's validation, before
// each call's start), takes back what that write left instead of its body
// ("A step does not read back the turn its process wrote"). No step is
// sent its turn's body.
func TestStepsReadBackWhatTheStepBeforeWrote(t *testing.T) {
	t.Parallel()
	st, c := stack(t, nil)
	bodies := &valkeytest.TurnBodies{}
	st.Redis.AddHook(bodies)
	cid := c.newConversation()
	tid := c.send(cid, "Create a PNG image with the word Popelnase")
	if _, err := st.history(t.Context(), tid); err != nil {
		t.Fatal(err)
	}
	// Five reads: LLMStep ×3, InvokeCall ×2 (LoadStart). Neither
	// ValidateBatch nor AppendResults runs: each batch is one call that
	// its LLM step stored validated and started, and that its outcome's
	// write appended. All ride on the write before them: the API's (for
	// the first LLM step), the LLM steps' with tool calls (for the
	// InvokeCall of the one call the write started), each call's outcome
	// with its append (for the next LLM step). Five reads ahead, each
	// naming the turn its writer keeps, and no read of a step's own.
	if ahead, kept, sent := bodies.Ahead.Load(), bodies.Kept.Load(), bodies.Sent.Load(); ahead != 5 || kept != 5 || sent > 0 {
		t.Errorf("the turn's reads: %d ahead, %d of them and the reads of their own without the body, %d with it; want 5, 5 and none", ahead, kept, sent)
	}
	if v := c.wait(cid, tid); v.Status != "succeeded" || v.LLMCalls != 3 {
		t.Fatalf("turn = %s with %d LLM calls, want succeeded with 3", v.Status, v.LLMCalls)
	}
}
