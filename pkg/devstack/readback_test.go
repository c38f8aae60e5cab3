package devstack

import (
	"testing"

	"github.com/clientagent/clientagent/pkg/valkeytest"
)

// On the local stack every step of a turn runs in one process: each
// step's read of its turn takes back what the step before it wrote (the
// API's first write included) instead of its body (docs/architecture.md,
// "A step does not read back the turn its process wrote"). Only the API's
// read of the ended turn, after the last step, is not one of them.
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
	// LLMStep ×3, ValidateBatch ×2, InvokeCall ×2 (LoadStart), AppendResults ×2.
	if kept, sent := bodies.Kept.Load(), bodies.Sent.Load(); kept < 9 || sent > 0 {
		t.Errorf("the turn's steps read %d bodies they had written without the body and %d with it; want at least 9 and none", kept, sent)
	}
	if v := c.wait(cid, tid); v.Status != "succeeded" || v.LLMCalls != 3 {
		t.Fatalf("turn = %s with %d LLM calls, want succeeded with 3", v.Status, v.LLMCalls)
	}
}
