package sfnlocal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambda/messages"
	"github.com/google/uuid"
)

// stateErr is an ASL error (Error name + Cause) or, with abort set, the
// end of a run because the execution stopped, timed out or the engine closed.
type stateErr struct {
	Error string
	Cause string
	abort bool
}

var errAbort = &stateErr{abort: true}

func queryErr(s *state, field string, err error) *stateErr {
	return &stateErr{Error: "States.QueryEvaluationError", Cause: fmt.Sprintf("state %q field %s: %v", s.Name, field, err)}
}

// persistedWait is what a restart needs to wait again on a top-level task token.
type persistedWait struct {
	Token            string    `json:"token"`
	TimeoutAt        time.Time `json:"timeoutAt,omitzero"`
	HeartbeatSeconds int64     `json:"heartbeatSeconds,omitempty"`
}

// persistedRetry is what a restart needs to retry a top-level task as
// planned: the attempts made, each retrier's count and when to retry.
type persistedRetry struct {
	Attempt int       `json:"attempt"`
	Counts  []int     `json:"counts"`
	At      time.Time `json:"at"`
}

// frame is how a state is being run: top-level (persisted) or inside a Map.
type frame struct {
	top     bool
	resume  *persistedWait          // waiting again after a restart
	retry   *persistedRetry         // retrying after a restart
	onWait  func(w *persistedWait)  // persists the open token (top level only)
	onRetry func(r *persistedRetry) // persists a planned retry (top level only)
}

// runGraph runs the states of g from c until an end state or an error.
//
// At the top level it saves the position at the boundaries a crash must
// not lose: before a Task or Map runs when a task's result has come in
// since the last save, when a task waits on a token and when it waits to
// retry (StartExecution saves the start, ended the end). Between two saves
// only Choice and Pass states run besides the task itself; after a crash
// they run again from the saved input and variables, which gives the same
// outcome, and the task runs again, which our handlers make harmless.
func (e *Engine) runGraph(ctx context.Context, x *execution, g *graph, c *cursor) (any, *stateErr) {
	top := g == x.sm.root
	name, input, vars := c.state, c.input, c.vars
	resume, retry := c.wait, c.retry
	unsaved := false // a task's result came in after the last save
	for {
		if ctx.Err() != nil {
			return nil, errAbort
		}
		s := g.States[name]
		f := frame{top: top, resume: resume, retry: retry}
		task := s.Type == "Task" || s.Type == "Map"
		if top {
			// A token task saves once it waits (onWait), which covers its start.
			if unsaved && task && !s.waitForToken {
				e.save(x, &cursor{state: name, input: input, vars: vars})
				unsaved = false
			}
			stateName, stateInput := name, input
			f.onWait = func(w *persistedWait) {
				e.save(x, &cursor{state: stateName, input: stateInput, vars: vars, wait: w})
				unsaved = false
			}
			f.onRetry = func(r *persistedRetry) {
				e.save(x, &cursor{state: stateName, input: stateInput, vars: vars, retry: r})
				unsaved = false
			}
		}
		out, next, serr := e.runState(ctx, x, s, input, vars, f)
		resume, retry = nil, nil
		if serr != nil {
			return nil, serr
		}
		unsaved = unsaved || task
		if next == "" {
			return out, nil
		}
		name, input = next, out
	}
}

// runState runs one state and returns its output and the next state name
// ("" when the state ends the graph).
func (e *Engine) runState(ctx context.Context, x *execution, s *state, input any, vars map[string]any, f frame) (any, string, *stateErr) {
	states := map[string]any{"input": input, "context": x.contextObject(s.Name, e.clock.Now().UTC())}
	if f.resume == nil && f.retry == nil {
		x.event(e.clock, HistoryEvent{Type: s.Type + "StateEntered", StateEnteredEventDetails: &StateDetails{Name: s.Name, Input: mustJSON(input)}})
	}
	exited := func(out any) {
		x.event(e.clock, HistoryEvent{Type: s.Type + "StateExited", StateExitedEventDetails: &StateDetails{Name: s.Name, Output: mustJSON(out)}})
	}
	switch s.Type {
	case "Pass", "Succeed":
		out, err := finishState(s.Assign, s.Output, s.hasOutput, states, vars, input)
		if err != nil {
			return nil, "", queryErr(s, "Output/Assign", err)
		}
		exited(out)
		return out, s.Next, nil
	case "Fail":
		name, err := evalString(s.Error, states, vars)
		if err != nil {
			return nil, "", queryErr(s, "Error", err)
		}
		cause, err := evalString(s.Cause, states, vars)
		if err != nil {
			return nil, "", queryErr(s, "Cause", err)
		}
		return nil, "", &stateErr{Error: name, Cause: cause}
	case "Choice":
		for i, r := range s.Choices {
			v, err := evalTemplate(r.Condition, states, vars)
			if err != nil {
				return nil, "", queryErr(s, fmt.Sprintf("Choices[%d].Condition", i), err)
			}
			b, ok := v.(bool)
			if !ok {
				return nil, "", queryErr(s, fmt.Sprintf("Choices[%d].Condition", i), fmt.Errorf("evaluated to %s, not a boolean", mustJSON(v)))
			}
			if b {
				out, err := finishState(r.Assign, r.Output, r.hasOutput, states, vars, input)
				if err != nil {
					return nil, "", queryErr(s, fmt.Sprintf("Choices[%d] Output/Assign", i), err)
				}
				exited(out)
				return out, r.Next, nil
			}
		}
		if s.Default == "" {
			return nil, "", &stateErr{Error: "States.NoChoiceMatched", Cause: fmt.Sprintf("no Choice rule of state %q matched and it has no Default", s.Name)}
		}
		out, err := finishState(s.Assign, s.Output, s.hasOutput, states, vars, input)
		if err != nil {
			return nil, "", queryErr(s, "Output/Assign", err)
		}
		exited(out)
		return out, s.Default, nil
	}

	// Task and Map: retry, then catch.
	result, serr := e.retrying(ctx, x, s, states, vars, f)
	if serr == nil {
		states["result"] = result
		out, err := finishState(s.Assign, s.Output, s.hasOutput, states, vars, result)
		if err == nil {
			exited(out)
			return out, s.Next, nil
		}
		serr = queryErr(s, "Output/Assign", err)
	}
	if serr.abort {
		return nil, "", serr
	}
	for _, c := range s.Catch {
		if !matches(c.ErrorEquals, serr.Error) {
			continue
		}
		eo := map[string]any{"Error": serr.Error, "Cause": serr.Cause}
		delete(states, "result")
		states["errorOutput"] = eo
		out, err := finishState(c.Assign, c.Output, c.hasOutput, states, vars, eo)
		if err != nil {
			return nil, "", queryErr(s, "Catch Output/Assign", err)
		}
		e.log.Info("error caught", "execution", x.meta.ExecutionArn, "state", s.Name, "error", serr.Error, "next", c.Next)
		exited(out)
		return out, c.Next, nil
	}
	return nil, "", serr
}

// finishState evaluates Output (default dflt) and Assign. Both see the
// variables as they were before this state's assignments, as on AWS.
func finishState(assign map[string]any, output any, hasOutput bool, states, vars map[string]any, dflt any) (any, error) {
	out := dflt
	if hasOutput {
		v, err := evalTemplate(output, states, vars)
		if err != nil {
			//lint:ignore ST1005 the message starts with the ASL field it is about
			return nil, fmt.Errorf("Output: %w", err)
		}
		out = v
	}
	if len(assign) > 0 {
		vals := make(map[string]any, len(assign))
		for k, tmpl := range assign {
			v, err := evalTemplate(tmpl, states, vars)
			if err != nil {
				//lint:ignore ST1005 the message starts with the ASL field it is about
				return nil, fmt.Errorf("Assign %q: %w", k, err)
			}
			vals[k] = v
		}
		for k, v := range vals {
			vars[k] = v
		}
	}
	return out, nil
}

func evalString(tmpl any, states, vars map[string]any) (string, error) {
	if tmpl == nil {
		return "", nil
	}
	v, err := evalTemplate(tmpl, states, vars)
	if err != nil {
		return "", err
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	return mustJSON(v), nil
}

// evalSeconds evaluates TimeoutSeconds, HeartbeatSeconds or MaxConcurrency:
// a number or an expression giving a non-negative integer.
func evalSeconds(tmpl any, states, vars map[string]any) (int64, error) {
	if tmpl == nil {
		return 0, nil
	}
	v, err := evalTemplate(tmpl, states, vars)
	if err != nil {
		return 0, err
	}
	n, ok := v.(float64)
	if !ok || n < 0 || n != math.Trunc(n) {
		return 0, fmt.Errorf("evaluated to %s, not a non-negative integer", mustJSON(v))
	}
	return int64(n), nil
}

// matches reports whether an ErrorEquals list matches errName. As on AWS,
// States.ALL matches everything, States.TaskFailed everything but timeouts,
// and States.Timeout also matches a heartbeat timeout.
func matches(names []string, errName string) bool {
	for _, n := range names {
		switch {
		case n == errName, n == "States.ALL":
			return true
		case n == "States.TaskFailed" && errName != "States.Timeout" && errName != "States.HeartbeatTimeout":
			return true
		case n == "States.Timeout" && errName == "States.HeartbeatTimeout":
			return true
		}
	}
	return false
}

// retrying runs a Task or Map attempt, retrying as its Retry says.
func (e *Engine) retrying(ctx context.Context, x *execution, s *state, states, vars map[string]any, f frame) (any, *stateErr) {
	counts := make([]int, len(s.Retry))
	attempt := 0
	var at time.Time // when the next attempt starts (zero: now)
	if r := f.retry; r != nil && len(r.Counts) == len(counts) {
		copy(counts, r.Counts)
		attempt, at = r.Attempt, r.At
	}
	for {
		if !at.IsZero() {
			t := e.clock.NewTimer(at.Sub(e.clock.Now()))
			select {
			case <-t.C():
			case <-ctx.Done():
				t.Stop()
				return nil, errAbort
			}
			if st, ok := states["context"].(map[string]any)["State"].(map[string]any); ok {
				st["RetryCount"] = attempt
			}
		}
		var res any
		var serr *stateErr
		switch {
		case s.Type == "Map":
			res, serr = e.mapAttempt(ctx, x, s, states, vars)
		case s.startSync:
			res, serr = e.syncAttempt(ctx, x, s, states, vars)
		default:
			res, serr = e.taskAttempt(ctx, x, s, states, vars, f)
		}
		f.resume = nil
		if serr == nil || serr.abort {
			return res, serr
		}
		idx := -1
		for i, r := range s.Retry {
			if matches(r.ErrorEquals, serr.Error) {
				idx = i
				break
			}
		}
		if idx < 0 || counts[idx] >= s.Retry[idx].MaxAttempts {
			return nil, serr
		}
		r := s.Retry[idx]
		delay := r.IntervalSeconds * math.Pow(r.BackoffRate, float64(counts[idx]))
		if r.MaxDelaySeconds > 0 && delay > r.MaxDelaySeconds {
			delay = r.MaxDelaySeconds
		}
		if r.JitterStrategy == "FULL" {
			delay *= e.jitter()
		}
		counts[idx]++
		attempt++
		at = e.clock.Now().Add(time.Duration(delay * float64(time.Second)))
		e.log.Info("retrying", "execution", x.meta.ExecutionArn, "state", s.Name, "error", serr.Error, "attempt", attempt, "delay_s", delay)
		if f.onRetry != nil {
			f.onRetry(&persistedRetry{Attempt: attempt, Counts: slices.Clone(counts), At: at})
		}
	}
}

type invokeResult struct {
	out json.RawMessage
	err *stateErr
}

// invoke calls h like Lambda would: the returned error's Go type name
// becomes the error name, a panic is Lambda.Unknown.
func invoke(ctx context.Context, h Handler, payload json.RawMessage) (res invokeResult) {
	defer func() {
		if p := recover(); p != nil {
			res = invokeResult{err: &stateErr{Error: "Lambda.Unknown", Cause: fmt.Sprintf("The cause could not be determined because Lambda did not return an error type. Returned payload: panic: %v", p)}}
		}
	}()
	out, err := h(ctx, payload)
	if err != nil {
		name := lambdaErrorType(err)
		return invokeResult{err: &stateErr{Error: name, Cause: mustJSON(map[string]string{"errorMessage": err.Error(), "errorType": name})}}
	}
	if len(out) == 0 {
		out = json.RawMessage("null")
	}
	if !json.Valid(out) {
		return invokeResult{err: &stateErr{Error: "Lambda.Unknown", Cause: "the function returned a payload that is not JSON"}}
	}
	return invokeResult{out: out}
}

// lambdaErrorType names err as aws-lambda-go does: the Go type name without
// package, pointer dereferenced (*turn.LimitError → "LimitError",
// errors.New → "errorString"). A messages.InvokeResponse_Error keeps its Type.
func lambdaErrorType(err error) string {
	var ire messages.InvokeResponse_Error
	if errors.As(err, &ire) && ire.Type != "" {
		return ire.Type
	}
	t := reflect.TypeOf(err)
	if t.Kind() == reflect.Pointer {
		return t.Elem().Name()
	}
	return t.Name()
}

// lambdaResult is the lambda:invoke task result as AWS shapes it: as the
// JSON the history records and as the value the next state reads. The
// payload is decoded once and spliced into the JSON as the function
// returned it (compacted), not decoded, encoded and decoded again; the
// rest is written out in json.Marshal's key order.
func lambdaResult(payload json.RawMessage) (string, map[string]any) {
	var p any
	_ = json.Unmarshal(payload, &p)
	id := uuid.NewString()
	v := map[string]any{
		"ExecutedVersion": "$LATEST",
		"Payload":         p,
		"SdkHttpMetadata": map[string]any{
			"AllHttpHeaders": map[string]any{"X-Amz-Executed-Version": []any{"$LATEST"}, "Content-Type": []any{"application/json"}},
			"HttpHeaders":    map[string]any{"X-Amz-Executed-Version": "$LATEST", "Content-Type": "application/json"},
			"HttpStatusCode": float64(200),
		},
		"SdkResponseMetadata": map[string]any{"RequestId": id},
		"StatusCode":          float64(200),
	}
	var b bytes.Buffer
	b.Grow(len(payload) + 320)
	b.WriteString(`{"ExecutedVersion":"$LATEST","Payload":`)
	if err := json.Compact(&b, payload); err != nil {
		return mustJSON(v), v // not JSON after all (invoke checks it is): as before
	}
	b.WriteString(`,"SdkHttpMetadata":{"AllHttpHeaders":{"Content-Type":["application/json"],"X-Amz-Executed-Version":["$LATEST"]},` +
		`"HttpHeaders":{"Content-Type":"application/json","X-Amz-Executed-Version":"$LATEST"},"HttpStatusCode":200},` +
		`"SdkResponseMetadata":{"RequestId":"`)
	b.WriteString(id)
	b.WriteString(`"},"StatusCode":200}`)
	return b.String(), v
}

// mapAttempt runs an inline Map: one run of the ItemProcessor per item, at
// most MaxConcurrency at once (0 = no limit), results in input order. The
// first failed iteration stops the others and fails the Map.
func (e *Engine) mapAttempt(ctx context.Context, x *execution, s *state, states, vars map[string]any) (any, *stateErr) {
	items := states["input"]
	if s.hasItems {
		v, err := evalTemplate(s.Items, states, vars)
		if err != nil {
			return nil, queryErr(s, "Items", err)
		}
		items = v
	}
	arr, ok := items.([]any)
	if !ok {
		return nil, queryErr(s, "Items", fmt.Errorf("the items are %s, not an array", mustJSON(items)))
	}
	maxc, err := evalSeconds(s.MaxConcurrency, states, vars)
	if err != nil {
		return nil, queryErr(s, "MaxConcurrency", err)
	}
	if maxc == 0 || maxc > int64(len(arr)) {
		maxc = int64(max(len(arr), 1))
	}
	x.event(e.clock, HistoryEvent{Type: "MapStateStarted", MapStateStartedEventDetails: &MapStartedDetails{Length: len(arr)}})

	mctx, mcancel := context.WithCancel(ctx)
	defer mcancel()
	results := make([]any, len(arr))
	var mu sync.Mutex
	var first *stateErr
	sem := make(chan struct{}, maxc)
	var wg sync.WaitGroup
loop:
	for i, item := range arr {
		select {
		case sem <- struct{}{}:
		case <-mctx.Done():
			break loop
		}
		wg.Add(1)
		e.workers.Go(func() {
			defer wg.Done()
			defer func() { <-sem }()
			it := &MapIterationDetails{Name: s.Name, Index: i}
			x.event(e.clock, HistoryEvent{Type: "MapIterationStarted", MapIterationStartedEventDetails: it})
			out, serr := e.runIteration(mctx, x, s, states, vars, i, item)
			if serr != nil {
				if serr.abort {
					x.event(e.clock, HistoryEvent{Type: "MapIterationAborted", MapIterationAbortedEventDetails: it})
					return
				}
				x.event(e.clock, HistoryEvent{Type: "MapIterationFailed", MapIterationFailedEventDetails: it})
				mu.Lock()
				if first == nil {
					first = serr
					mcancel()
				}
				mu.Unlock()
				return
			}
			results[i] = out
			x.event(e.clock, HistoryEvent{Type: "MapIterationSucceeded", MapIterationSucceededEventDetails: it})
		})
	}
	wg.Wait()
	if first != nil {
		x.event(e.clock, HistoryEvent{Type: "MapStateFailed"})
		return nil, first
	}
	if ctx.Err() != nil {
		return nil, errAbort
	}
	x.event(e.clock, HistoryEvent{Type: "MapStateSucceeded"})
	return results, nil
}

// runIteration runs the ItemProcessor for item i. ItemSelector sees the Map
// state's input and $states.context.Map.Item; the iteration gets its own
// copy of the variables, so it reads outer variables but its assignments
// stay inside it.
func (e *Engine) runIteration(ctx context.Context, x *execution, s *state, states, vars map[string]any, i int, item any) (any, *stateErr) {
	input := item
	if s.hasSelector {
		ctxObj := map[string]any{}
		for k, v := range states["context"].(map[string]any) {
			ctxObj[k] = v
		}
		ctxObj["Map"] = map[string]any{"Item": map[string]any{"Index": float64(i), "Value": item}}
		v, err := evalTemplate(s.ItemSelector, map[string]any{"input": states["input"], "context": ctxObj}, vars)
		if err != nil {
			return nil, queryErr(s, "ItemSelector", err)
		}
		input = v
	}
	ivars := make(map[string]any, len(vars))
	for k, v := range vars {
		ivars[k] = v
	}
	return e.runGraph(ctx, x, s.processor, &cursor{state: s.processor.StartAt, input: input, vars: ivars})
}
