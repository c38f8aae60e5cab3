package valkeytest

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// TurnBodies is a client hook that counts the step reads of
// pkg/record/valkey (loadStepScript and loadStartScript, and the reads
// ahead of its writes, pkg/record/valkey/ahead.go) by what their reply
// carried of the step's own turn: its body (Sent), or "=" (Kept), the
// script's word for a turn the reader wrote last and keeps
// (pkg/record/valkey/written.go). Ahead counts the reads ahead among
// them. It reads the reply on the wire, so it shows which bytes crossed
// it.
type TurnBodies struct{ Sent, Kept, Ahead atomic.Int32 }

func (o *TurnBodies) DialHook(next redis.DialHook) redis.DialHook { return next }
func (o *TurnBodies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			o.count(cmd, cmd.Err())
		}
		return err
	}
}
func (o *TurnBodies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		o.count(cmd, err)
		return err
	}
}

// count counts cmd's reply, a script's that went alone or in a pipeline.
func (o *TurnBodies) count(cmd redis.Cmder, err error) {
	c, ok := cmd.(*redis.Cmd)
	if !ok || err != nil {
		return
	}
	raw, _ := c.Val().([]any)
	if len(raw) == 3 { // a write's reply with its read ahead: {reply, token, read}
		if raw, _ = raw[2].([]any); len(raw) >= 9 {
			o.Ahead.Add(1)
		}
	}
	if len(raw) < 9 || len(c.Args()) < 5 || c.Args()[3] == "0" { // a step read names its turn's keys
		return
	}
	own, _ := raw[1].([]any)
	if len(own) == 0 {
		return
	}
	switch body, _ := own[0].(string); {
	case body == "=":
		o.Kept.Add(1)
	case body != "":
		o.Sent.Add(1)
	}
}

// RoundTrips is a client hook that counts round trips: a command sent
// alone, a pipeline or a transaction is one.
type RoundTrips struct{ N atomic.Int64 }

func (r *RoundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { r.N.Add(1); return next(ctx, cmd) }
}
func (r *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { r.N.Add(1); return next(ctx, cmds) }
}
