package devstack

import (
	"net/http"
	"testing"

	"github.com/alicebob/miniredis/v2"
)

// Issue 3 and 6: with a Valkey that outlives the local stack, a turn waiting
// for a form survives a restart: the engine resumes the execution on the
// same task token, and the answer sent to the new stack completes the turn.
func TestWaitingTurnSurvivesRestart(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t) // stands in for a real Valkey that keeps running
	dir := t.TempDir()
	cfg := func(c *Config) { c.ValkeyURL = "redis://" + mr.Addr(); c.DataDir = dir }

	first, c := stack(t, nil, cfg)
	cid := c.newConversation()
	tid := c.send(cid, "Design a valve flange with 4 holes")
	v := c.wait(cid, tid)
	if v.Status != "awaiting_input" {
		t.Fatalf("status = %s, want awaiting_input", v.Status)
	}
	callID := v.Form.Calls[0].CallID
	first.Close()

	_, c2 := stack(t, nil, cfg)
	if v := c2.turn(cid, tid); v.Status != "awaiting_input" {
		t.Fatalf("after restart status = %s, want awaiting_input", v.Status)
	}
	if code := c2.input(cid, tid, map[string]any{"answers": map[string]any{callID: map[string]any{"material": "pvc"}}}); code != http.StatusAccepted {
		t.Fatalf("answer after restart = %d, want 202", code)
	}
	if v := c2.wait(cid, tid); v.Status != "succeeded" || len(v.Artifacts) != 1 {
		t.Fatalf("after restart turn = %s %q, want succeeded with the drawing", v.Status, v.Reply)
	}
}
