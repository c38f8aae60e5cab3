package sfnlocal

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

// execution is the live state of one execution.
type execution struct {
	sm     *machine
	done   chan struct{}
	cancel context.CancelFunc
	saveMu sync.Mutex // serializes the saves of this execution

	mu      sync.Mutex
	meta    Execution
	history []HistoryEvent
	open    map[string]*openTask // by token
	// full is set when the history quota ended the execution (event).
	full bool
	// parent is the ARN of the execution whose task started this one ("" if none).
	parent string
	// children are the executions this one's startExecution.sync:2 tasks started.
	children []*execution
	// ctxExecution and ctxMachine are the context object's Execution
	// (with meta.Input decoded) and StateMachine, made once: they are the
	// same for every state, and nothing writes into them.
	ctxExecution, ctxMachine map[string]any
	// claimed, when not nil, is closed once the store answered whether
	// this execution's name was free (Claimer); claimErr is then set when
	// it was not, or the store failed, and the execution never ran.
	claimed  chan struct{}
	claimErr error
}

// MaxHistoryEvents is Step Functions' hard quota on an execution's history:
// an event that would be the last one allowed and does not end the
// execution fails it instead, with ErrNameHistoryFull, which no Retry or
// Catch sees. A state machine that loops forever ends here, as on AWS.
const MaxHistoryEvents = 25000

// ErrNameHistoryFull is the error name of an execution the history quota ended.
const ErrNameHistoryFull = "States.Runtime"

// openTask is a task waiting for SendTaskSuccess/Failure.
type openTask struct {
	token    string
	answered bool
	answer   chan taskAnswer // capacity 1
	lastBeat time.Time       // start of the task or last SendTaskHeartbeat
}

type taskAnswer struct {
	output json.RawMessage
	err    *stateErr
}

func newExecution(meta Execution, sm *machine) *execution {
	x := &execution{sm: sm, meta: meta, done: make(chan struct{}), open: map[string]*openTask{}, cancel: func() {}}
	if sm != nil {
		x.history = make([]HistoryEvent, 0, min(sm.historyLen.Load(), maxHistoryHint))
	}
	return x
}

// maxHistoryHint bounds the room a new execution's history starts with
// (machine.historyLen): one long execution does not make every later one
// take as much.
const maxHistoryHint = 512

func (x *execution) describe() Execution {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.meta
}

// event appends ev while the execution runs.
func (x *execution) event(c Clock, ev HistoryEvent) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.meta.Status != StatusRunning {
		return
	}
	if len(x.history) >= MaxHistoryEvents-1 {
		cause := fmt.Sprintf("The execution reached the maximum number of history events (%d).", MaxHistoryEvents)
		if x.finishLocked(c, StatusFailed, nil, ErrNameHistoryFull, cause) {
			x.full = true
			x.cancel()
		}
		return
	}
	x.appendLocked(c, ev)
}

// historyFull reports whether the history quota ended the execution.
func (x *execution) historyFull() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.full
}

func (x *execution) appendLocked(c Clock, ev HistoryEvent) {
	ev.ID = int64(len(x.history) + 1)
	ev.PreviousEventID = ev.ID - 1
	ev.Timestamp = c.Now().UTC()
	x.history = append(x.history, ev)
}

// finish closes the execution with status once; it reports whether this
// call closed it.
func (x *execution) finish(c Clock, status string, output []byte, errName, cause string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.finishLocked(c, status, output, errName, cause)
}

func (x *execution) finishLocked(c Clock, status string, output []byte, errName, cause string) bool {
	if x.meta.Status != StatusRunning {
		return false
	}
	d := &ExecutionDetails{Error: errName, Cause: cause}
	ev := HistoryEvent{}
	switch status {
	case StatusSucceeded:
		ev = HistoryEvent{Type: "ExecutionSucceeded", ExecutionSucceededEventDetails: &ExecutionDetails{Output: string(output)}}
	case StatusFailed:
		ev = HistoryEvent{Type: "ExecutionFailed", ExecutionFailedEventDetails: d}
	case StatusAborted:
		ev = HistoryEvent{Type: "ExecutionAborted", ExecutionAbortedEventDetails: d}
	case StatusTimedOut:
		ev = HistoryEvent{Type: "ExecutionTimedOut", ExecutionTimedOutEventDetails: d}
	}
	x.appendLocked(c, ev)
	if x.sm != nil {
		x.sm.historyLen.Store(int64(len(x.history)))
	}
	x.meta.Status = status
	x.meta.StopDate = c.Now().UTC()
	x.meta.Output = output
	x.meta.Error, x.meta.Cause = errName, cause
	x.open = map[string]*openTask{} // every token of a closed execution is closed
	close(x.done)
	return true
}

// Task tokens are opaque to callers but let the engine tell a well-formed
// token of a closed task (TaskTimedOut, as AWS answers) from garbage
// (InvalidToken): base64url("sfnlocal1|" + executionArn + "|" + nonce).
const tokenPrefix = "sfnlocal1|"

func newToken(execArn string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString([]byte(tokenPrefix + execArn + "|" + hex.EncodeToString(b[:])))
}

func tokenExecution(token string) (string, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || !strings.HasPrefix(string(raw), tokenPrefix) {
		return "", false
	}
	rest := strings.TrimPrefix(string(raw), tokenPrefix)
	i := strings.LastIndex(rest, "|")
	if i <= 0 || len(rest)-i-1 != 32 {
		return "", false
	}
	return rest[:i], true
}

// openToken registers a task token of x.
func (x *execution) openToken(token string, now time.Time) *openTask {
	ot := &openTask{token: token, answer: make(chan taskAnswer, 1), lastBeat: now}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.open[token] = ot
	return ot
}

func (x *execution) closeToken(token string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.open, token)
}

// taskFor finds the open task of token, or the AWS error for it.
func (e *Engine) taskFor(token string) (*execution, *openTask, error) {
	arn, ok := tokenExecution(token)
	if !ok {
		return nil, nil, apiErr(ErrInvalidToken, "invalid task token")
	}
	e.mu.Lock()
	x, ok := e.execs[arn]
	e.mu.Unlock()
	if !ok {
		return nil, nil, apiErr(ErrTaskTimedOut, "task of execution %s is closed", arn)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	ot, ok := x.open[token]
	if !ok || ot.answered {
		return nil, nil, apiErr(ErrTaskTimedOut, "task of execution %s is closed", arn)
	}
	return x, ot, nil
}

// SendTaskSuccess completes the task waiting on token with output (JSON).
// Unknown or malformed tokens are ErrInvalidToken; a token whose task has
// closed (timed out, answered already, execution ended) is ErrTaskTimedOut.
func (e *Engine) SendTaskSuccess(_ context.Context, token string, output json.RawMessage) error {
	var v any
	if err := json.Unmarshal(output, &v); err != nil {
		return apiErr(ErrInvalidOutput, "output is not JSON: %v", err)
	}
	return e.answer(token, taskAnswer{output: compact(output)})
}

// SendTaskFailure fails the task waiting on token with errName and cause;
// errors as for SendTaskSuccess.
func (e *Engine) SendTaskFailure(_ context.Context, token, errName, cause string) error {
	return e.answer(token, taskAnswer{err: &stateErr{Error: errName, Cause: cause}})
}

func (e *Engine) answer(token string, a taskAnswer) error {
	x, ot, err := e.taskFor(token)
	if err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if ot.answered || x.open[token] != ot {
		return apiErr(ErrTaskTimedOut, "task is closed")
	}
	ot.answered = true
	ot.answer <- a
	return nil
}

// SendTaskHeartbeat tells the task waiting on token that work goes on,
// restarting its HeartbeatSeconds timer; errors as for SendTaskSuccess.
func (e *Engine) SendTaskHeartbeat(_ context.Context, token string) error {
	x, ot, err := e.taskFor(token)
	if err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	ot.lastBeat = e.clock.Now()
	return nil
}

func mustJSON(v any) string {
	b, err := encodeValue(v)
	if err != nil {
		return fmt.Sprintf("%q", fmt.Sprint(v))
	}
	return string(b)
}

func (x *execution) contextObject(stateName string, entered time.Time) map[string]any {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ctxExecution == nil {
		var input any
		_ = json.Unmarshal(x.meta.Input, &input)
		x.ctxExecution = map[string]any{
			"Id": x.meta.ExecutionArn, "Name": x.meta.Name, "Input": input,
			"StartTime": contextTime(x.meta.StartDate),
			"RoleArn":   "arn:aws:iam::000000000000:role/sfnlocal",
		}
		x.ctxMachine = map[string]any{"Id": x.sm.arn, "Name": x.sm.name}
	}
	// A state's own object and its State: a task adds its Task, a retry
	// counts in State.
	return map[string]any{
		"Execution":    x.ctxExecution,
		"StateMachine": x.ctxMachine,
		"State":        map[string]any{"Name": stateName, "EnteredTime": contextTime(entered), "RetryCount": 0},
	}
}
