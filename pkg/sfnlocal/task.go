package sfnlocal

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// taskAttempt runs one attempt of a lambda:invoke or
// lambda:invoke.waitForTaskToken task: it prepares the attempt (its token
// and deadlines), starts the function (or, resumed after a restart, waits
// on the token it had), opens its wait, arms its timers and waits for
// whichever comes first.
func (e *Engine) taskAttempt(ctx context.Context, x *execution, s *state, states, vars map[string]any, f frame) (any, *stateErr) {
	t := &taskRun{e: e, x: x, s: s}
	defer t.cleanup()
	if serr := t.prepare(states, vars, f); serr != nil {
		return nil, serr
	}
	if f.resume != nil {
		t.timeoutAt, t.heartbeatS = f.resume.TimeoutAt, f.resume.HeartbeatSeconds
	} else if serr, recorded := t.start(ctx, states, vars); serr != nil {
		if recorded {
			return t.fail("TaskFailed", serr)
		}
		return nil, serr
	}
	t.openWait(f)
	t.armTimers()
	return t.await(ctx)
}

// taskRun is one attempt of a Task state while it runs.
type taskRun struct {
	e *Engine
	x *execution
	s *state

	token                string // the task token, "" without waitForTaskToken
	timeoutS, heartbeatS int64
	timeoutAt            time.Time // zero: no TimeoutSeconds
	fn                   string    // the function's name or ARN

	resC          chan invokeResult // the function's result; nil once in (or resumed)
	invokeC       <-chan time.Time  // the engine's InvokeTimeout
	abandon       func()            // lets a running handler go on when the attempt is aborted
	ot            *openTask         // the open token, nil without one
	answerC       <-chan taskAnswer // ot's answer
	timeoutC, hbC <-chan time.Time
	hbEvery       time.Duration
	hbTimer       Timer

	// undo runs at the attempt's end, last first (what the one function
	// deferred before).
	undo []func()
}

func (t *taskRun) cleanup() {
	for i := len(t.undo) - 1; i >= 0; i-- {
		t.undo[i]()
	}
}

func (t *taskRun) details() *TaskDetails {
	r := "invoke"
	if t.s.waitForToken {
		r = "invoke.waitForTaskToken"
	}
	return &TaskDetails{ResourceType: "lambda", Resource: r}
}

// fail records the attempt's failure (TaskFailed or TaskTimedOut).
func (t *taskRun) fail(typ string, serr *stateErr) (any, *stateErr) {
	d := t.details()
	d.Error, d.Cause = serr.Error, serr.Cause
	ev := HistoryEvent{Type: typ}
	if typ == "TaskTimedOut" {
		ev.TaskTimedOutEventDetails = d
	} else {
		ev.TaskFailedEventDetails = d
	}
	t.x.event(t.e.clock, ev)
	return nil, serr
}

// prepare sets the attempt's token (a new one, or the resumed wait's) into
// the context object and evaluates its deadlines.
func (t *taskRun) prepare(states, vars map[string]any, f frame) *stateErr {
	ctxObj := states["context"].(map[string]any)
	if f.resume != nil {
		t.token = f.resume.Token
	} else if t.s.waitForToken {
		t.token = newToken(t.x.meta.ExecutionArn)
	}
	if t.token != "" {
		ctxObj["Task"] = map[string]any{"Token": t.token}
	}
	var err error
	if t.timeoutS, err = evalSeconds(t.s.TimeoutSeconds, states, vars); err != nil {
		return queryErr(t.s, "TimeoutSeconds", err)
	}
	if t.heartbeatS, err = evalSeconds(t.s.HeartbeatSeconds, states, vars); err != nil {
		return queryErr(t.s, "HeartbeatSeconds", err)
	}
	if t.timeoutS > 0 {
		t.timeoutAt = t.e.clock.Now().Add(time.Duration(t.timeoutS) * time.Second)
	}
	return nil
}

// arguments evaluates the state's Arguments: the function and its payload.
func (t *taskRun) arguments(states, vars map[string]any) (map[string]any, json.RawMessage, *stateErr) {
	argsV, err := evalTemplate(t.s.Arguments, states, vars)
	if err != nil {
		return nil, nil, queryErr(t.s, "Arguments", err)
	}
	args, _ := argsV.(map[string]any)
	t.fn, _ = args["FunctionName"].(string)
	if t.fn == "" {
		return nil, nil, &stateErr{Error: "States.Runtime", Cause: fmt.Sprintf("state %q: Arguments must be an object with a string FunctionName, got %s", t.s.Name, mustJSON(argsV))}
	}
	for k := range args {
		if !argFields[k] {
			return nil, nil, &stateErr{Error: "States.Runtime", Cause: fmt.Sprintf("state %q: Arguments field %q is not supported", t.s.Name, k)}
		}
	}
	payload := json.RawMessage("{}")
	if p, ok := args["Payload"]; ok {
		payload = json.RawMessage(mustJSON(p))
	}
	return args, payload, nil
}

// start records TaskScheduled and TaskStarted and invokes the function in
// its own goroutine; its result arrives on t.resC. An error after the task
// was scheduled (no such function) is the task's (recorded true), one
// before it the state's.
func (t *taskRun) start(ctx context.Context, states, vars map[string]any) (serr *stateErr, recorded bool) {
	e, x := t.e, t.x
	args, payload, serr := t.arguments(states, vars)
	if serr != nil {
		return serr, false
	}
	d := t.details()
	d.Region, d.Parameters, d.TimeoutInSeconds, d.HeartbeatInSeconds = e.region, mustJSON(args), t.timeoutS, t.heartbeatS
	x.event(e.clock, HistoryEvent{Type: "TaskScheduled", TaskScheduledEventDetails: d})
	x.event(e.clock, HistoryEvent{Type: "TaskStarted", TaskStartedEventDetails: t.details()})
	h, ok := e.handler(t.fn)
	if !ok {
		return &stateErr{Error: "Lambda.ResourceNotFoundException",
			Cause: fmt.Sprintf("Function not found: arn:aws:lambda:%s:%s:function:%s", e.region, e.account, functionName(t.fn))}, true
	}
	t.resC = make(chan invokeResult, 1)
	// The handler's context ends when the attempt ends (timeout included)
	// or the engine closes (a process exit); the deadline is on the
	// engine's clock, not the context's. Stopping the execution does not
	// end it: on AWS a stopped execution's running Lambda runs to its end,
	// and a step that has started a specialist call must be able to record
	// what the call did (abandon, below).
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	stopRoot := context.AfterFunc(e.root, hcancel)
	release := func() { stopRoot(); hcancel() }
	t.undo = append(t.undo, func() {
		if release != nil {
			release()
		}
	})
	t.abandon = func() {
		rc, done := t.resC, release
		release = nil
		go func() {
			var timeout <-chan time.Time
			if e.invokeTimeout > 0 {
				tm := time.NewTimer(e.invokeTimeout)
				defer tm.Stop()
				timeout = tm.C
			}
			select {
			case <-rc:
			case <-timeout:
			}
			done()
		}()
	}
	if t.token != "" {
		// Register before invoking: the handler may answer at once.
		x.openToken(t.token, e.clock.Now())
	}
	resC := t.resC
	e.workers.Go(func() { resC <- invoke(hctx, h, payload) })
	if e.invokeTimeout > 0 {
		tm := e.clock.NewTimer(e.invokeTimeout)
		t.undo = append(t.undo, func() { tm.Stop() })
		t.invokeC = tm.C()
	}
	return nil, false
}

// openWait takes the attempt's open token (opening it again when resumed)
// and, at the top level, persists the wait so a restart resumes it.
func (t *taskRun) openWait(f frame) {
	if t.token == "" {
		return
	}
	x := t.x
	x.mu.Lock()
	t.ot = x.open[t.token]
	x.mu.Unlock()
	if t.ot == nil { // resumed: the heartbeat timer restarts now
		t.ot = x.openToken(t.token, t.e.clock.Now())
	}
	token := t.token
	t.undo = append(t.undo, func() { x.closeToken(token) })
	if f.top && f.onWait != nil && f.resume == nil {
		f.onWait(&persistedWait{Token: t.token, TimeoutAt: t.timeoutAt, HeartbeatSeconds: t.heartbeatS})
	}
	t.answerC = t.ot.answer
}

// armTimers starts the TimeoutSeconds and HeartbeatSeconds timers.
func (t *taskRun) armTimers() {
	clock := t.e.clock
	if !t.timeoutAt.IsZero() {
		tm := clock.NewTimer(t.timeoutAt.Sub(clock.Now()))
		t.undo = append(t.undo, func() { tm.Stop() })
		t.timeoutC = tm.C()
	}
	t.hbEvery = time.Duration(t.heartbeatS) * time.Second
	if t.heartbeatS > 0 {
		t.hbTimer = clock.NewTimer(t.hbEvery)
		t.undo = append(t.undo, func() { t.hbTimer.Stop() })
		t.hbC = t.hbTimer.C()
	}
}

// closeOr closes the token; an answer that won the race is still taken.
func (t *taskRun) closeOr() (taskAnswer, bool) {
	if t.ot == nil {
		return taskAnswer{}, false
	}
	x := t.x
	x.mu.Lock()
	answered := t.ot.answered
	t.ot.answered = true
	delete(x.open, t.token)
	x.mu.Unlock()
	if answered {
		return <-t.ot.answer, true
	}
	return taskAnswer{}, false
}

// succeed records TaskSucceeded with out and returns it decoded.
func (t *taskRun) succeed(out json.RawMessage) (any, *stateErr) {
	var v any
	if err := json.Unmarshal(out, &v); err != nil {
		t.recordSucceeded(string(out))
		return nil, &stateErr{Error: "States.Runtime", Cause: err.Error()}
	}
	return t.succeedWith(string(out), v)
}

// succeedWith records TaskSucceeded with out, whose value v is.
func (t *taskRun) succeedWith(out string, v any) (any, *stateErr) {
	t.recordSucceeded(out)
	return v, nil
}

func (t *taskRun) recordSucceeded(out string) {
	d := t.details()
	d.Output = out
	t.x.event(t.e.clock, HistoryEvent{Type: "TaskSucceeded", TaskSucceededEventDetails: d})
}

func (t *taskRun) fromAnswer(a taskAnswer) (any, *stateErr) {
	if a.err != nil {
		return t.fail("TaskFailed", a.err)
	}
	return t.succeed(a.output)
}

// orAnswer ends the attempt with an answer that won the race, if any, else
// with the failure fail records.
func (t *taskRun) orAnswer(typ string, serr *stateErr) (any, *stateErr) {
	if a, ok := t.closeOr(); ok {
		return t.fromAnswer(a)
	}
	return t.fail(typ, serr)
}

// submitted records TaskSubmitted: the function of a waitForTaskToken task
// returned, and the task waits on for its token.
func (t *taskRun) submitted(out json.RawMessage) {
	d := t.details()
	d.Output, _ = lambdaResult(out)
	t.x.event(t.e.clock, HistoryEvent{Type: "TaskSubmitted", TaskSubmittedEventDetails: d})
}

// await waits for the function's result, the token's answer, a timeout, a
// missed heartbeat or the end of ctx, whichever comes first.
func (t *taskRun) await(ctx context.Context) (any, *stateErr) {
	for {
		select {
		case r := <-t.resC:
			t.resC, t.invokeC = nil, nil
			if r.err != nil {
				return t.orAnswer("TaskFailed", r.err)
			}
			if t.ot == nil {
				out, v := lambdaResult(r.out)
				return t.succeedWith(out, v)
			}
			t.submitted(r.out)
		case a := <-t.answerC:
			t.x.closeToken(t.token)
			if t.resC != nil {
				// Answered before the invoke returned (the handler sent the
				// token on): record the invoke first, as AWS orders it.
				select {
				case r := <-t.resC:
					if r.err == nil {
						t.submitted(r.out)
					}
				case <-ctx.Done():
					return nil, errAbort
				}
			}
			return t.fromAnswer(a)
		case <-t.invokeC:
			// The engine stops waiting for the function, as the Lambda
			// client does at its timeout; the cleanup ends the handler.
			return t.orAnswer("TaskFailed", &stateErr{Error: "Lambda.ClientExecutionTimeoutException",
				Cause: fmt.Sprintf("Client execution did not complete before the timeout: function %s ran longer than %s", functionName(t.fn), t.e.invokeTimeout)})
		case <-t.timeoutC:
			return t.orAnswer("TaskTimedOut", &stateErr{Error: "States.Timeout", Cause: fmt.Sprintf("task %q ran longer than %d seconds", t.s.Name, t.timeoutS)})
		case now := <-t.hbC:
			if t.beatDue(now) {
				continue
			}
			return t.orAnswer("TaskTimedOut", &stateErr{Error: "States.HeartbeatTimeout", Cause: fmt.Sprintf("task %q sent no heartbeat for %d seconds", t.s.Name, t.heartbeatS)})
		case <-ctx.Done():
			t.closeOr()
			if t.resC != nil && t.abandon != nil {
				t.abandon() // the handler runs on to its end; its result is dropped
			}
			return nil, errAbort
		}
	}
}

// beatDue reports whether a heartbeat came within hbEvery of now, and if
// so sets the timer to the next one due. SendTaskHeartbeat records the beat
// time synchronously, so a beat counts from the moment it was accepted.
func (t *taskRun) beatDue(now time.Time) bool {
	if t.ot == nil {
		return false
	}
	t.x.mu.Lock()
	due := t.ot.lastBeat.Add(t.hbEvery)
	t.x.mu.Unlock()
	if !now.Before(due) {
		return false
	}
	t.hbTimer = t.e.clock.NewTimer(due.Sub(now))
	t.hbC = t.hbTimer.C()
	return true
}
