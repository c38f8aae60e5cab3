package valkey

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/record"
)

// inFlight is how many round trips of scripts a client keeps on their way
// to the server at once before the next scripts wait to go together. Two
// let the server read one batch while the other's replies come back.
const inFlight = 2

// together is a go-redis hook that sends the scripts of many goroutines
// in one round trip when they come at once: group commit for the store.
//
// Every step of every turn is a script or two (docs/architecture.md, "One
// turn"), and at twenty turns at once most of the local stack's system
// calls were those scripts' writes and reads, one each per script on each
// side, each waking the server's or the stack's processor. With together,
// a script that finds fewer than inFlight round trips on their way goes
// at once, alone, as before: one turn alone waits for nothing. One that
// finds them all busy waits for the first to come back, then goes in one
// pipeline with every script that queued meanwhile: one write and one read
// for the lot on each side. The server still runs each script whole and
// alone (a pipeline is not a transaction), each caller gets its own reply
// or error, and go-redis's retries apply to the batch as to one command.
//
// Only scripts go together: they never block the server, and they are
// the hot path. Blocking reads (a stream's XREAD BLOCK) and commands sent
// by hand go as they did.
type together struct {
	c redis.UniversalClient

	mu    sync.Mutex
	busy  int       // round trips of scripts on their way
	queue []*waiter // scripts waiting for the next round trip
}

// waiter is one queued script. wake receives nil once the script's reply
// is in cmd, or the batch to send when this waiter leads it.
type waiter struct {
	cmd  redis.Cmder
	wake chan []*waiter
}

// SendScriptsTogether makes c's scripts that come at once share round
// trips (see together). NewClient's clients already do.
func SendScriptsTogether(c redis.UniversalClient) {
	c.AddHook(&together{c: c})
}

func (t *together) DialHook(next redis.DialHook) redis.DialHook { return next }

func (t *together) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (t *together) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !isScript(cmd) {
			return next(ctx, cmd)
		}
		t.mu.Lock()
		if t.busy < inFlight {
			t.busy++
			t.mu.Unlock()
			err := next(ctx, cmd)
			t.done(err)
			return err
		}
		w := &waiter{cmd: cmd, wake: make(chan []*waiter, 1)}
		t.queue = append(t.queue, w)
		t.mu.Unlock()
		var batch []*waiter
		select {
		case batch = <-w.wake:
		case <-ctx.Done():
			if t.leave(w) {
				cmd.SetErr(ctx.Err())
				return ctx.Err()
			}
			// Already in a batch on its way: its reply is the answer.
			batch = <-w.wake
		}
		if batch != nil {
			t.send(ctx, next, batch)
		}
		return cmd.Err()
	}
}

// done ends a round trip that ended with err: the scripts queued
// meanwhile go next, led by the first of them, in the round trip that
// ends here. When the store did not answer (a timeout, a lost
// connection), they fail at once with the same error, unsent: a paused or
// unreachable store answers every caller within its timeouts, not one
// batch after another.
func (t *together) done(err error) {
	down := unreachable(err)
	t.mu.Lock()
	batch := t.queue
	t.queue = nil
	if len(batch) == 0 || down {
		t.busy--
	}
	t.mu.Unlock()
	switch {
	case len(batch) == 0:
	case down:
		for _, w := range batch {
			w.cmd.SetErr(err)
			w.wake <- nil
		}
	default:
		batch[0].wake <- batch
	}
}

// unreachable says whether err is the store not answering: not a reply
// of its own, not a caller's context.
func unreachable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	return errors.Is(classify(err), record.ErrUnavailable)
}

// send runs batch in one round trip (a lone script as one command, with
// next), tells every other waiter of it that its reply is in, and ends the
// round trip. A leader whose caller gave up still sends: the others wait
// for it, and go-redis's timeouts bound it.
func (t *together) send(ctx context.Context, next redis.ProcessHook, batch []*waiter) {
	ctx = context.WithoutCancel(ctx)
	var err error
	if len(batch) == 1 {
		// go-redis sets a command's error from what the hooks return.
		if err = next(ctx, batch[0].cmd); err != nil {
			batch[0].cmd.SetErr(err)
		}
	} else {
		p := t.c.Pipeline()
		for _, w := range batch {
			_ = p.Process(ctx, w.cmd)
		}
		_, err = p.Exec(ctx)
	}
	for _, w := range batch[1:] {
		w.wake <- nil
	}
	t.done(err)
}

// leave takes w out of the queue if it is still there (its script not
// sent), and says whether it was.
func (t *together) leave(w *waiter) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, q := range t.queue {
		if q == w {
			t.queue = append(t.queue[:i], t.queue[i+1:]...)
			return true
		}
	}
	return false
}

// isScript says whether cmd runs a script: EVAL, EVALSHA or their
// read-only forms.
func isScript(cmd redis.Cmder) bool {
	name := cmd.Name()
	return len(name) >= 4 && strings.EqualFold(name[:4], "eval")
}
