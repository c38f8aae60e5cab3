package sfnlocal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/clientagent/clientagent/pkg/gopool"
)

// Handler is an in-process Lambda function: it gets the invocation payload
// and returns its output, as a Go Lambda handler would.
type Handler func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error)

// Options configure an Engine. Every field is optional.
type Options struct {
	// Clock drives timeouts, heartbeats and retry delays (default RealClock).
	Clock Clock
	// Persist stores executions so that running ones survive a restart
	// and ended ones can be described after they leave memory (default:
	// none, executions live in memory only, and only the newest
	// KeepEnded ended ones).
	Persist Persister
	// Logger receives one event per execution step (default: discard).
	Logger *slog.Logger
	// Region and AccountID appear in the ARNs (default us-east-1, 123456789012).
	Region    string
	AccountID string
	// Jitter returns a number in [0,1) for JitterStrategy FULL (default math/rand).
	Jitter func() float64
	// InvokeTimeout bounds one invocation of a function, as the Lambda
	// client's timeout does: a handler still running after it fails the
	// attempt with Lambda.ClientExecutionTimeoutException and its context is
	// cancelled. It runs on Clock (default: none).
	InvokeTimeout time.Duration
}

// KeepEnded is how many ended executions the engine keeps in memory, the
// newest; older ones are read back from the Persister when asked for.
const KeepEnded = 64

// Execution statuses, as DescribeExecution reports them.
const (
	StatusRunning   = "RUNNING"
	StatusSucceeded = "SUCCEEDED"
	StatusFailed    = "FAILED"
	StatusTimedOut  = "TIMED_OUT"
	StatusAborted   = "ABORTED"
)

// Execution describes one execution (DescribeExecution's answer).
type Execution struct {
	ExecutionArn    string          `json:"executionArn"`
	StateMachineArn string          `json:"stateMachineArn"`
	Name            string          `json:"name"`
	Status          string          `json:"status"`
	StartDate       time.Time       `json:"startDate"`
	StopDate        time.Time       `json:"stopDate,omitzero"`
	Input           json.RawMessage `json:"input"`
	Output          json.RawMessage `json:"output,omitempty"`
	Error           string          `json:"error,omitempty"`
	Cause           string          `json:"cause,omitempty"`
}

// Engine runs JSONata state machines locally with AWS Step Functions
// semantics. It is safe for concurrent use.
type Engine struct {
	clock         Clock
	persist       Persister
	log           *slog.Logger
	region        string
	account       string
	jitter        func() float64
	invokeTimeout time.Duration

	root   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	functions map[string]Handler
	machines  map[string]*machine   // by ARN
	execs     map[string]*execution // running, and the newest KeepEnded ended
	endedArns []string              // ARNs of the ended executions in execs, oldest first
	rules     []StatusRule
	closed    bool

	workers *gopool.Pool // the goroutines of executions, iterations and tasks
}

// New returns an Engine with opts.
func New(opts Options) *Engine {
	e := &Engine{
		clock: opts.Clock, persist: opts.Persist, log: opts.Logger,
		region: opts.Region, account: opts.AccountID, jitter: opts.Jitter, invokeTimeout: opts.InvokeTimeout,
		functions: map[string]Handler{}, machines: map[string]*machine{}, execs: map[string]*execution{},
		workers: gopool.New(gopool.Idle),
	}
	if e.clock == nil {
		e.clock = RealClock{}
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.region == "" {
		e.region = "us-east-1"
	}
	if e.account == "" {
		e.account = "123456789012"
	}
	if e.jitter == nil {
		e.jitter = rand.Float64
	}
	e.root, e.cancel = context.WithCancel(context.Background())
	return e
}

// RegisterFunction makes h the Lambda function named by nameOrARN. Tasks
// find it by function name: full or partial ARNs resolve to the NAME part.
func (e *Engine) RegisterFunction(nameOrARN string, h Handler) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.functions[functionName(nameOrARN)] = h
}

// CreateStateMachine loads and validates definition and returns the state
// machine's ARN. Creating the same name with the same definition again
// returns the same ARN (as AWS does); a different definition is
// ErrStateMachineAlreadyExists. Unsupported fields fail with ErrInvalidDefinition.
func (e *Engine) CreateStateMachine(name string, definition []byte) (string, error) {
	return e.CreateStateMachineOfType(name, TypeStandard, definition)
}

// CreateStateMachineOfType is CreateStateMachine for a machine of type typ,
// TypeStandard or TypeExpress. An EXPRESS machine's executions are never
// persisted (a crash loses them; a parent's startExecution.sync:2 task
// starts a new one when the parent resumes), may not wait for a task token
// nor run a .sync task, and run at most ExpressMaxSeconds. Locally their
// history is kept in memory like any execution's, so FullHistory can show
// it inside its parent's (on AWS it reaches CloudWatch Logs only).
func (e *Engine) CreateStateMachineOfType(name, typ string, definition []byte) (string, error) {
	if typ != TypeStandard && typ != TypeExpress {
		return "", apiErr(ErrValidation, "state machine %s: type %q is neither %s nor %s", name, typ, TypeStandard, TypeExpress)
	}
	express := typ == TypeExpress
	g, timeout, err := parseMachine(definition, express)
	if err != nil {
		return "", apiErr(ErrInvalidDefinition, "state machine %s: %v", name, err)
	}
	arn := fmt.Sprintf("arn:aws:states:%s:%s:stateMachine:%s", e.region, e.account, name)
	e.mu.Lock()
	defer e.mu.Unlock()
	if old, ok := e.machines[arn]; ok {
		if !jsonEqual(old.definition, definition) || old.express != express {
			return "", apiErr(ErrStateMachineAlreadyExists, "state machine %s exists with another definition", name)
		}
		return arn, nil
	}
	e.machines[arn] = &machine{name: name, arn: arn, definition: bytes.Clone(definition), defHash: definitionHash(definition), root: g, timeout: timeout, express: express}
	return arn, nil
}

// Substitute replaces ${key} placeholders in definition, like CloudFormation's
// DefinitionSubstitutions, so the deployed ASL file runs locally unchanged.
func Substitute(definition []byte, subs map[string]string) []byte {
	s := string(definition)
	for k, v := range subs {
		s = strings.ReplaceAll(s, "${"+k+"}", v)
	}
	return []byte(s)
}

// StartExecution starts an execution of the state machine smArn and saves
// it before returning. An empty name gets a random one. As on AWS, a start
// with the name of a running execution and the same input returns that
// execution; a different input, or a closed execution of that name (in
// memory or in the store), is ErrExecutionAlreadyExists.
func (e *Engine) StartExecution(ctx context.Context, smArn, name string, input json.RawMessage) (string, time.Time, error) {
	arn, start, _, err := e.startExecution(ctx, smArn, name, input, nil)
	return arn, start, err
}

// startExecution starts an execution as StartExecution does and returns
// it; parent, when set, is the execution whose task starts it (its child
// is listed on it, and stopping the parent stops the child).
func (e *Engine) startExecution(ctx context.Context, smArn, name string, input json.RawMessage, parent *execution) (string, time.Time, *execution, error) {
	if len(bytes.TrimSpace(input)) == 0 {
		input = json.RawMessage("{}")
	}
	var in any
	if err := json.Unmarshal(input, &in); err != nil {
		return "", time.Time{}, nil, apiErr(ErrInvalidExecutionInput, "input is not JSON: %v", err)
	}
	if name == "" {
		name = uuid.NewString()
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return "", time.Time{}, nil, apiErr(ErrValidation, "engine is closed")
	}
	sm, ok := e.machines[smArn]
	if !ok {
		e.mu.Unlock()
		return "", time.Time{}, nil, apiErr(ErrStateMachineDoesNotExist, "state machine %s", smArn)
	}
	arn := fmt.Sprintf("arn:aws:states:%s:%s:execution:%s:%s", e.region, e.account, sm.name, name)
	same := func(x *execution) (string, time.Time, *execution, error) {
		if x.claimed != nil {
			<-x.claimed
			if x.claimErr != nil {
				return "", time.Time{}, nil, x.claimErr
			}
		}
		meta := x.describe()
		if meta.Status == StatusRunning && jsonEqual(meta.Input, input) {
			return arn, meta.StartDate, x, nil
		}
		return "", time.Time{}, nil, apiErr(ErrExecutionAlreadyExists, "execution %s", arn)
	}
	x, ok := e.execs[arn]
	e.mu.Unlock()
	if ok {
		return same(x)
	}
	// An EXPRESS execution is never stored (save), so no stored one can
	// hold its name. A Claimer answers whether the name is free with the
	// first save (claim); any other persister is asked first.
	claimer, claims := e.persist.(Claimer)
	claims = claims && !sm.express
	if e.persist != nil && !sm.express && !claims { // ended and gone from memory?
		if _, err := e.persist.Load(ctx, arn); err == nil {
			return "", time.Time{}, nil, apiErr(ErrExecutionAlreadyExists, "execution %s", arn)
		} else if !errors.Is(err, ErrExecutionDoesNotExist) {
			return "", time.Time{}, nil, fmt.Errorf("start execution %s: %w", arn, err)
		}
	}
	e.mu.Lock()
	if x, ok := e.execs[arn]; ok { // started meanwhile
		e.mu.Unlock()
		return same(x)
	}
	if e.closed {
		e.mu.Unlock()
		return "", time.Time{}, nil, apiErr(ErrValidation, "engine is closed")
	}
	now := e.clock.Now().UTC()
	x = newExecution(Execution{
		ExecutionArn: arn, StateMachineArn: smArn, Name: name, Status: StatusRunning,
		StartDate: now, Input: compact(input),
	}, sm)
	if claims {
		x.claimed = make(chan struct{})
	}
	e.execs[arn] = x
	e.mu.Unlock()

	x.event(e.clock, HistoryEvent{Type: "ExecutionStarted", ExecutionStartedEventDetails: &ExecutionDetails{
		Input: string(x.meta.Input), RoleArn: fmt.Sprintf("arn:aws:iam::%s:role/sfnlocal", e.account)}})
	c := &cursor{state: sm.root.StartAt, input: in, vars: map[string]any{}}
	if claims {
		// Not cut short by the caller: a claim the store applied is an
		// execution that must run.
		if err := e.claim(context.WithoutCancel(ctx), claimer, x, c); err != nil {
			return "", time.Time{}, nil, err
		}
	}
	e.log.InfoContext(ctx, "execution started", "execution", arn)
	if parent != nil {
		x.parent = parent.meta.ExecutionArn
		parent.mu.Lock()
		parent.children = append(parent.children, x)
		parent.mu.Unlock()
	}
	if claims {
		e.launch(x, c)
	} else {
		e.start(x, c)
	}
	return arn, now, x, nil
}

// claim stores x's start with c, a new execution's first snapshot, if its
// name is free in the store: one round trip that is StartExecution's check
// and the start's save. When the name is taken (an execution that ended
// before this process started) or the store fails, x is forgotten and
// never runs, and a concurrent StartExecution of the same name that found
// x gets the same error.
func (e *Engine) claim(ctx context.Context, cl Claimer, x *execution, c *cursor) error {
	arn := x.meta.ExecutionArn
	err := func() error {
		snap, ok, err := x.snapshot(c)
		if err != nil {
			return fmt.Errorf("start execution %s: snapshot: %w", arn, err)
		}
		if !ok {
			return nil // ended meanwhile (the history quota): nothing to store
		}
		claimed, err := cl.Claim(ctx, snap)
		switch {
		case err != nil:
			return fmt.Errorf("start execution %s: %w", arn, err)
		case !claimed:
			return apiErr(ErrExecutionAlreadyExists, "execution %s", arn)
		}
		return nil
	}()
	if err != nil {
		e.mu.Lock()
		if e.execs[arn] == x {
			delete(e.execs, arn)
		}
		e.mu.Unlock()
		x.claimErr = err
	}
	close(x.claimed)
	return err
}

// start launches x at c and returns once its start is saved. The save's
// round trip overlaps the first states: the snapshot is taken before the
// launch, and every later save of x waits for this one (saveMu), so the
// store never holds a position older than the last one saved.
func (e *Engine) start(x *execution, c *cursor) {
	if e.persist == nil || e.isClosed() || x.sm.express {
		e.launch(x, c)
		return
	}
	snap, ok, err := x.snapshot(c)
	x.saveMu.Lock()
	defer x.saveMu.Unlock()
	e.launch(x, c)
	e.write(x, snap, ok, err, false)
}

// DescribeExecution returns the execution's current description.
func (e *Engine) DescribeExecution(ctx context.Context, execArn string) (Execution, error) {
	x, err := e.lookup(ctx, execArn)
	if err != nil {
		return Execution{}, err
	}
	return x.describe(), nil
}

// Wait blocks until the execution has closed, or ctx ends, and returns
// its description. It wakes when the execution ends, not on a poll.
func (e *Engine) Wait(ctx context.Context, execArn string) (Execution, error) {
	x, err := e.lookup(ctx, execArn)
	if err != nil {
		return Execution{}, err
	}
	select {
	case <-x.done:
		return x.describe(), nil
	case <-ctx.Done():
		return x.describe(), fmt.Errorf("wait for %s: %w", execArn, ctx.Err())
	}
}

// History returns the execution's events in order.
func (e *Engine) History(ctx context.Context, execArn string) ([]HistoryEvent, error) {
	x, err := e.lookup(ctx, execArn)
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]HistoryEvent(nil), x.history...), nil
}

// StopExecution aborts a running execution; its open task tokens close (a
// later answer gets ErrTaskTimedOut). Stopping a closed execution changes
// nothing. It returns the stop date.
func (e *Engine) StopExecution(ctx context.Context, execArn, errName, cause string) (time.Time, error) {
	x, err := e.lookup(ctx, execArn)
	if err != nil {
		return time.Time{}, err
	}
	now := e.clock.Now().UTC()
	if !x.finish(e.clock, StatusAborted, nil, errName, cause) {
		return x.describe().StopDate, nil
	}
	e.log.InfoContext(ctx, "execution stopped", "execution", execArn)
	x.cancel()
	e.stopChildren(ctx, x)
	e.ended(ctx, x)
	return now, nil
}

// stopChildren stops the running executions x's tasks started, as Step
// Functions stops the child of a .sync task whose parent stops or times out.
func (e *Engine) stopChildren(ctx context.Context, x *execution) {
	x.mu.Lock()
	kids := append([]*execution(nil), x.children...)
	x.mu.Unlock()
	for _, k := range kids {
		if k.finish(e.clock, StatusAborted, nil, "States.Aborted", "the parent execution "+x.meta.ExecutionArn+" ended") {
			e.log.InfoContext(ctx, "execution stopped with its parent", "execution", k.meta.ExecutionArn)
			k.cancel()
			e.stopChildren(ctx, k)
			e.ended(ctx, k)
		}
	}
}

// FullHistory is History with the history of every execution a
// startExecution.sync:2 task started spliced in after that task's
// TaskSubmitted event (recursively), so one list shows a turn's loop. On
// AWS the EXPRESS child's history is in CloudWatch Logs only; locally the
// engine keeps it while the parent is in memory.
func (e *Engine) FullHistory(ctx context.Context, execArn string) ([]HistoryEvent, error) {
	x, err := e.lookup(ctx, execArn)
	if err != nil {
		return nil, err
	}
	return x.fullHistory(), nil
}

func (x *execution) fullHistory() []HistoryEvent {
	x.mu.Lock()
	h := append([]HistoryEvent(nil), x.history...)
	kids := make(map[string]*execution, len(x.children))
	for _, k := range x.children {
		kids[k.meta.ExecutionArn] = k
	}
	x.mu.Unlock()
	out := make([]HistoryEvent, 0, len(h))
	for _, ev := range h {
		out = append(out, ev)
		if d := ev.TaskSubmittedEventDetails; d != nil && d.ResourceType == "states" {
			var sub struct{ ExecutionArn string }
			if json.Unmarshal([]byte(d.Output), &sub) == nil {
				if k := kids[sub.ExecutionArn]; k != nil {
					out = append(out, k.fullHistory()...)
				}
			}
		}
	}
	return out
}

// Children returns the ARNs of the executions x's startExecution.sync:2
// tasks started, oldest first (kept while x is in memory).
func (e *Engine) Children(ctx context.Context, execArn string) ([]string, error) {
	x, err := e.lookup(ctx, execArn)
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	arns := make([]string, len(x.children))
	for i, k := range x.children {
		arns[i] = k.meta.ExecutionArn
	}
	return arns, nil
}

// Close stops running executions as a process exit would: they are not
// marked aborted and their persisted snapshots stay, so a new Engine on the
// same Persister can Resume them. Close waits for the execution goroutines.
func (e *Engine) Close() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.cancel()
	e.wg.Wait()
	e.workers.Stop()
}

func (e *Engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// lookup finds an execution in memory or, once it has left memory, in the store.
func (e *Engine) lookup(ctx context.Context, execArn string) (*execution, error) {
	e.mu.Lock()
	x, ok := e.execs[execArn]
	e.mu.Unlock()
	if ok {
		return x, nil
	}
	if e.persist == nil {
		return nil, apiErr(ErrExecutionDoesNotExist, "execution %s", execArn)
	}
	s, err := e.persist.Load(ctx, execArn)
	if err != nil {
		return nil, err
	}
	if s.Execution.Status == StatusRunning {
		// Stored as running but not run here (Resume has not loaded it):
		// nothing here can answer for it.
		return nil, apiErr(ErrExecutionDoesNotExist, "execution %s is not resumed", execArn)
	}
	return restore(s, nil), nil
}

// retire keeps x, which has ended, among the newest KeepEnded ended
// executions in memory and lets the oldest go.
func (e *Engine) retire(x *execution) {
	e.mu.Lock()
	defer e.mu.Unlock()
	arn := x.meta.ExecutionArn
	if e.execs[arn] != x {
		return
	}
	e.endedArns = append(e.endedArns, arn)
	for len(e.endedArns) > KeepEnded {
		delete(e.execs, e.endedArns[0])
		e.endedArns = e.endedArns[1:]
	}
}

func (e *Engine) handler(name string) (Handler, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h, ok := e.functions[functionName(name)]
	return h, ok
}

// cursor is where a top-level run starts: a state, its input, the variables
// and, after a restart, the task token the state is waiting on or the
// retry it is waiting for.
type cursor struct {
	state string
	input any
	vars  map[string]any
	wait  *persistedWait
	retry *persistedRetry
}

// launch runs x from c in a goroutine.
func (e *Engine) launch(x *execution, c *cursor) {
	ctx, cancel := context.WithCancel(e.root)
	x.cancel = cancel
	e.wg.Add(1)
	e.workers.Go(func() {
		defer e.wg.Done()
		defer cancel()
		if x.sm.timeout > 0 {
			// The timer starts before the first state runs, so a clock
			// that moves during a state cannot start it late.
			t := e.clock.NewTimer(time.Duration(x.sm.timeout)*time.Second - e.clock.Now().Sub(x.describe().StartDate))
			go e.watchTimeout(ctx, x, t)
		}
		out, serr := e.runGraph(ctx, x, x.sm.root, c)
		if x.historyFull() {
			e.log.Info("execution failed", "execution", x.meta.ExecutionArn, "error", ErrNameHistoryFull)
			e.ended(context.WithoutCancel(ctx), x)
			return
		}
		if e.isClosed() && ctx.Err() != nil {
			return // process "exit": keep the snapshot for Resume
		}
		if serr != nil {
			if serr.abort {
				return // stopped or timed out: already recorded
			}
			if x.finish(e.clock, StatusFailed, nil, serr.Error, serr.Cause) {
				e.log.Info("execution failed", "execution", x.meta.ExecutionArn, "error", serr.Error)
				e.ended(ctx, x)
			}
			return
		}
		b, err := encodeValue(out)
		if err != nil {
			x.finish(e.clock, StatusFailed, nil, "States.Runtime", err.Error())
		} else if x.finish(e.clock, StatusSucceeded, b, "", "") {
			e.log.Info("execution succeeded", "execution", x.meta.ExecutionArn)
		}
		e.ended(ctx, x)
	})
}

// watchTimeout ends x as timed out when t fires first.
func (e *Engine) watchTimeout(ctx context.Context, x *execution, t Timer) {
	defer t.Stop()
	select {
	case <-t.C():
		if x.finish(e.clock, StatusTimedOut, nil, "States.Timeout", "The execution timed out") {
			x.cancel()
			e.stopChildren(context.Background(), x)
			e.ended(context.Background(), x)
		}
	case <-ctx.Done():
	case <-x.done:
	}
}

// save persists x at c, a boundary a crash must not lose (runGraph says
// which), or, with c nil, x as it ended. Saves of one execution are
// serialized, and a position saved after the end is dropped, so a late
// save cannot make an ended execution look running to the next Resume.
func (e *Engine) save(x *execution, c *cursor) {
	if e.persist == nil || e.isClosed() || x.sm.express {
		return
	}
	x.saveMu.Lock()
	defer x.saveMu.Unlock()
	snap, ok, err := x.snapshot(c)
	e.write(x, snap, ok, err, c == nil)
}

// write stores snap, the snapshot taken of x (ok false: x ended since),
// as its end or as its position. The caller holds x.saveMu.
func (e *Engine) write(x *execution, snap Snapshot, ok bool, err error, ended bool) {
	if err != nil {
		e.log.Error("snapshot execution", "execution", x.meta.ExecutionArn, "err", err)
		return
	}
	if !ok {
		return
	}
	save := e.persist.Save
	if ended {
		save = e.persist.End
	}
	if err := save(context.Background(), snap); err != nil {
		e.log.Error("save execution snapshot", "execution", x.meta.ExecutionArn, "err", err)
	}
}

func jsonEqual(a, b []byte) bool {
	return bytes.Equal(compact(a), compact(b))
}

// compact returns b in canonical form (decoded and re-encoded), so equal
// JSON compares equal whatever its spacing or key order.
func compact(b []byte) json.RawMessage {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return bytes.Clone(b)
	}
	out, err := encodeValue(v)
	if err != nil {
		return bytes.Clone(b)
	}
	return out
}
