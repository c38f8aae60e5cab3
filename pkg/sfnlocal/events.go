package sfnlocal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// StatusRule stands for an EventBridge rule on "Step Functions Execution
// Status Change" events with a Lambda target: when an execution of
// StateMachineArn ends with one of Statuses, the engine invokes the
// function Target asynchronously with the event as EventBridge sends it,
// retrying a failed invocation twice, a minute and then two minutes later
// on the engine's clock (Lambda's asynchronous invocation).
type StatusRule struct {
	StateMachineArn string
	Statuses        []string
	Target          string
}

// AsyncRetryDelays are the waits before the retries of an asynchronous
// invocation that failed, as Lambda makes them.
var AsyncRetryDelays = []time.Duration{time.Minute, 2 * time.Minute}

// AddStatusRule adds r; events are sent from then on.
func (e *Engine) AddStatusRule(r StatusRule) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.rules = append(e.rules, r)
}

// StatusChangeEvent is the EventBridge event of an execution's status
// change. Detail.Input is the execution's input as a JSON string, as AWS
// sends it; dates are epoch milliseconds.
type StatusChangeEvent struct {
	Version    string       `json:"version"`
	ID         string       `json:"id"`
	DetailType string       `json:"detail-type"`
	Source     string       `json:"source"`
	Account    string       `json:"account"`
	Time       string       `json:"time"`
	Region     string       `json:"region"`
	Resources  []string     `json:"resources"`
	Detail     StatusDetail `json:"detail"`
}

// StatusDetail is the detail of a StatusChangeEvent.
type StatusDetail struct {
	ExecutionArn    string  `json:"executionArn"`
	StateMachineArn string  `json:"stateMachineArn"`
	Name            string  `json:"name"`
	Status          string  `json:"status"`
	StartDate       int64   `json:"startDate"`
	StopDate        int64   `json:"stopDate"`
	Input           string  `json:"input"`
	Output          *string `json:"output"`
	Error           *string `json:"error"`
	Cause           *string `json:"cause"`
}

// ended is what the engine does once an execution ended: it saves the
// execution as it ended, lets it leave memory in its turn (retire) and
// sends the status change to matching rules.
func (e *Engine) ended(ctx context.Context, x *execution) {
	e.save(x, nil)
	e.retire(x)
	d := x.describe()
	e.mu.Lock()
	var targets []string
	for _, r := range e.rules {
		if r.StateMachineArn == d.StateMachineArn && slices.Contains(r.Statuses, d.Status) {
			targets = append(targets, r.Target)
		}
	}
	e.mu.Unlock()
	if len(targets) == 0 {
		return
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	ev := StatusChangeEvent{
		Version: "0", ID: hex.EncodeToString(id), DetailType: "Step Functions Execution Status Change", Source: "aws.states",
		Account: e.account, Time: d.StopDate.UTC().Format(time.RFC3339), Region: e.region, Resources: []string{d.ExecutionArn},
		Detail: StatusDetail{
			ExecutionArn: d.ExecutionArn, StateMachineArn: d.StateMachineArn, Name: d.Name, Status: d.Status,
			StartDate: d.StartDate.UnixMilli(), StopDate: d.StopDate.UnixMilli(), Input: string(d.Input),
		},
	}
	if d.Output != nil {
		out := string(d.Output)
		ev.Detail.Output = &out
	}
	if d.Error != "" {
		ev.Detail.Error, ev.Detail.Cause = &d.Error, &d.Cause
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		e.log.Error("encode status change event", "execution", d.ExecutionArn, "err", err)
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		// Close is waiting for the engine's goroutines: start no more.
		return
	}
	for _, target := range targets {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			e.deliver(target, d.ExecutionArn, payload)
		}()
	}
}

// deliver invokes target with an event, retrying as Lambda retries an
// asynchronous invocation; it gives up when the engine closes.
func (e *Engine) deliver(target, execArn string, payload json.RawMessage) {
	for attempt := 0; ; attempt++ {
		e.mu.Lock()
		h := e.functions[functionName(target)]
		e.mu.Unlock()
		var err error
		if h == nil {
			err = fmt.Errorf("function %s is not registered", target)
		} else {
			_, err = h(e.root, payload)
		}
		if err == nil {
			return
		}
		e.log.Warn("status change event not delivered", "execution", execArn, "target", target, "attempt", attempt+1, "err", err)
		if attempt >= len(AsyncRetryDelays) {
			return
		}
		t := e.clock.NewTimer(AsyncRetryDelays[attempt])
		select {
		case <-t.C():
		case <-e.root.Done():
			t.Stop()
			return
		}
	}
}
