package devstack

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ownTurnBodies counts the step reads whose reply carried their turn's
// body and those that named it unchanged (the reader had written it).
type ownTurnBodies struct{ sent, kept atomic.Int32 }

func (o *ownTurnBodies) DialHook(next redis.DialHook) redis.DialHook { return next }
func (o *ownTurnBodies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (o *ownTurnBodies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		c, ok := cmd.(*redis.Cmd)
		if !ok || err != nil {
			return err
		}
		raw, _ := c.Val().([]any)
		if len(raw) < 9 || len(c.Args()) < 5 || c.Args()[3] == "0" { // a step read names its turn's keys
			return err
		}
		own, _ := raw[1].([]any)
		if len(own) == 0 {
			return err
		}
		switch body, _ := own[0].(string); {
		case body == "=":
			o.kept.Add(1)
		case body != "":
			o.sent.Add(1)
		}
		return err
	}
}

// On the local stack every step of a turn runs in one process: each
// step's read of its turn takes back what the step before it wrote (the
// API's first write included) instead of its body (docs/architecture.md,
// "A step does not read back the turn its process wrote"). Only the API's
// read of the ended turn, after the last step, is not one of them.
func TestStepsReadBackWhatTheStepBeforeWrote(t *testing.T) {
	t.Parallel()
	st, c := stack(t, nil)
	bodies := &ownTurnBodies{}
	st.Redis.AddHook(bodies)
	cid := c.newConversation()
	tid := c.send(cid, "Create a PNG image with the word Popelnase")
	if _, err := st.history(t.Context(), tid); err != nil {
		t.Fatal(err)
	}
	// LLMStep ×3, ValidateBatch ×2, InvokeCall ×2 (LoadStart), AppendResults ×2.
	if kept, sent := bodies.kept.Load(), bodies.sent.Load(); kept < 9 || sent > 0 {
		t.Errorf("the turn's steps read %d bodies they had written without the body and %d with it; want at least 9 and none", kept, sent)
	}
	if v := c.wait(cid, tid); v.Status != "succeeded" || v.LLMCalls != 3 {
		t.Fatalf("turn = %s with %d LLM calls, want succeeded with 3", v.Status, v.LLMCalls)
	}
}
