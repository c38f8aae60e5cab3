package sfnlocal

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// childDef is an EXPRESS machine that calls "step" once and returns its payload.
const childDef = `{"QueryLanguage":"JSONata","StartAt":"Step","States":{
 "Step":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke",
   "Arguments":{"FunctionName":"step","Payload":"{% $states.input %}"},
   "Output":"{% $states.result.Payload %}","End":true}}}`

// parentDef runs childDef's machine (${Child}) with startExecution.sync:2.
const parentDef = `{"QueryLanguage":"JSONata","StartAt":"Run","States":{
 "Run":{"Type":"Task","Resource":"arn:aws:states:::states:startExecution.sync:2",
   "Arguments":{"StateMachineArn":"${Child}","Input":{"n":"{% $states.input.n %}"}},
   "Output":"{% {\"status\": $states.result.Status, \"out\": $states.result.Output, \"in\": $states.result.Input} %}",
   "Catch":[{"ErrorEquals":["States.TaskFailed"],"Output":"{% {\"caught\": $states.errorOutput.Error} %}","Next":"Caught"}],
   "End":true},
 "Caught":{"Type":"Pass","End":true}}}`

func expressPair(t *testing.T, e *Engine) (parent, child string) {
	t.Helper()
	child, err := e.CreateStateMachineOfType("child", TypeExpress, []byte(childDef))
	if err != nil {
		t.Fatal(err)
	}
	return mustCreate(t, e, "parent", Substitute([]byte(parentDef), map[string]string{"Child": child})), child
}

// The sync integration returns the child's description with Input and
// Output parsed; the child's history is its own, and FullHistory shows it
// inside the parent's.
func TestStartExecutionSync(t *testing.T) {
	t.Parallel()
	e, _ := testEngine(t, Options{})
	e.RegisterFunction("step", func(_ context.Context, p json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"got":` + string(p) + `}`), nil
	})
	sm, _ := expressPair(t, e)
	arn := mustStart(t, e, sm, "p1", `{"n":7}`)
	x := mustWait(t, e, arn)
	if x.Status != StatusSucceeded {
		t.Fatalf("parent = %+v", x)
	}
	want := `{"in":{"n":7},"out":{"got":{"n":7}},"status":"SUCCEEDED"}`
	if got := string(compact(x.Output)); got != want {
		t.Errorf("output = %s, want %s", got, want)
	}
	kids, err := e.Children(t.Context(), arn)
	if err != nil || len(kids) != 1 {
		t.Fatalf("Children() = %v, %v; want one", kids, err)
	}
	if got := strings.Join(eventTypes(t, e, kids[0]), ","); !strings.Contains(got, "TaskScheduled") {
		t.Errorf("child history = %s", got)
	}
	full, err := e.FullHistory(t.Context(), arn)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ev := range full {
		types = append(types, ev.Type)
	}
	wantTypes := "ExecutionStarted,TaskStateEntered,TaskScheduled,TaskStarted,TaskSubmitted," +
		"ExecutionStarted,TaskStateEntered,TaskScheduled,TaskStarted,TaskSucceeded,TaskStateExited,ExecutionSucceeded," +
		"TaskSucceeded,TaskStateExited,ExecutionSucceeded"
	if got := strings.Join(types, ","); got != wantTypes {
		t.Errorf("full history =\n %s\nwant\n %s", got, wantTypes)
	}
	if own := eventTypes(t, e, arn); len(own) != 8 {
		t.Errorf("the parent's own history has %d events (%v), want 8: the child's are not in it", len(own), own)
	}
}

// A child that fails fails the parent's task with States.TaskFailed, its
// description as the cause.
func TestStartExecutionSyncChildFails(t *testing.T) {
	t.Parallel()
	e, _ := testEngine(t, Options{})
	e.RegisterFunction("step", func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return nil, errors.New("boom")
	})
	sm, _ := expressPair(t, e)
	x := mustWait(t, e, mustStart(t, e, sm, "p1", `{"n":1}`))
	if got := string(compact(x.Output)); x.Status != StatusSucceeded || got != `{"caught":"States.TaskFailed"}` {
		t.Errorf("parent = %s %s, want the failure caught as States.TaskFailed", x.Status, got)
	}
}

// An EXPRESS execution runs at most five minutes: one that outlasts them
// times out, and its parent's task fails.
func TestExpressTimesOutAtFiveMinutes(t *testing.T) {
	t.Parallel()
	e, clock := testEngine(t, Options{})
	release := make(chan struct{})
	defer close(release)
	e.RegisterFunction("step", func(ctx context.Context, p json.RawMessage) (json.RawMessage, error) {
		<-release
		return p, nil
	})
	sm, _ := expressPair(t, e)
	arn := mustStart(t, e, sm, "p1", `{"n":1}`)
	eventually(t, "the child's timer", func() bool {
		kids, _ := e.Children(t.Context(), arn)
		return len(kids) == 1 && clock.Timers() >= 1
	})
	clock.Advance(ExpressMaxSeconds*time.Second - time.Second)
	if x, _ := e.DescribeExecution(t.Context(), arn); x.Status != StatusRunning {
		t.Fatalf("parent after 299 s = %s, want RUNNING", x.Status)
	}
	clock.Advance(time.Second)
	x := mustWait(t, e, arn)
	kids, _ := e.Children(t.Context(), arn)
	child, _ := e.DescribeExecution(t.Context(), kids[0])
	if child.Status != StatusTimedOut || string(compact(x.Output)) != `{"caught":"States.TaskFailed"}` {
		t.Errorf("child %s, parent %s; want TIMED_OUT and the failure caught", child.Status, x.Output)
	}
}

// Stopping a parent stops its running child, as AWS does for a .sync task.
func TestStopParentStopsChild(t *testing.T) {
	t.Parallel()
	e, _ := testEngine(t, Options{})
	started := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	e.RegisterFunction("step", func(ctx context.Context, p json.RawMessage) (json.RawMessage, error) {
		close(started)
		<-release
		return p, nil
	})
	sm, _ := expressPair(t, e)
	arn := mustStart(t, e, sm, "p1", `{"n":1}`)
	<-started
	if _, err := e.StopExecution(t.Context(), arn, "Operator", "by hand"); err != nil {
		t.Fatal(err)
	}
	kids, _ := e.Children(t.Context(), arn)
	child, err := e.DescribeExecution(t.Context(), kids[0])
	if err != nil || child.Status != StatusAborted {
		t.Errorf("child after the parent's stop = %s, %v; want ABORTED", child.Status, err)
	}
}

// EXPRESS machines refuse what AWS refuses in them, and a timeout over five minutes.
func TestExpressDefinitionLimits(t *testing.T) {
	t.Parallel()
	e, _ := testEngine(t, Options{})
	for name, def := range map[string]string{
		"token": `{"QueryLanguage":"JSONata","StartAt":"A","States":{"A":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke.waitForTaskToken","Arguments":{"FunctionName":"f"},"End":true}}}`,
		"sync":  `{"QueryLanguage":"JSONata","StartAt":"A","States":{"A":{"Type":"Task","Resource":"arn:aws:states:::states:startExecution.sync:2","Arguments":{"StateMachineArn":"x"},"End":true}}}`,
		"long":  `{"QueryLanguage":"JSONata","TimeoutSeconds":301,"StartAt":"A","States":{"A":{"Type":"Pass","End":true}}}`,
	} {
		if _, err := e.CreateStateMachineOfType("x-"+name, TypeExpress, []byte(def)); !errors.Is(err, ErrInvalidDefinition) {
			t.Errorf("%s: CreateStateMachineOfType = %v, want ErrInvalidDefinition", name, err)
		}
	}
	if _, err := e.CreateStateMachineOfType("x", "BATCH", []byte(childDef)); err == nil {
		t.Error("type BATCH accepted")
	}
}

// At least once: an EXPRESS child is never persisted. After a crash the
// resumed parent runs its task again, which starts a new child, and the
// turn ends.
func TestResumedParentStartsNewChild(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	var runs atomic.Int64
	started := make(chan struct{}, 2)
	block := make(chan struct{})
	defer close(block)
	step := func(first bool) Handler {
		return func(ctx context.Context, p json.RawMessage) (json.RawMessage, error) {
			runs.Add(1)
			started <- struct{}{}
			if first {
				select { // the crash: the step never finishes here
				case <-block:
				case <-ctx.Done():
				}
				return nil, ctx.Err()
			}
			return p, nil
		}
	}
	e1 := New(Options{Persist: &RedisPersister{Client: rdb}})
	e1.RegisterFunction("step", step(true))
	sm, child := expressPair(t, e1)
	arn := mustStart(t, e1, sm, "p1", `{"n":3}`)
	<-started
	e1.Close()
	if keys := mr.Keys(); strings.Contains(strings.Join(keys, " "), ":execution:child:") {
		t.Errorf("the EXPRESS child was persisted: %v", keys)
	}

	e2 := New(Options{Persist: &RedisPersister{Client: rdb}})
	t.Cleanup(e2.Close)
	e2.RegisterFunction("step", step(false))
	if _, err := e2.CreateStateMachineOfType("child", TypeExpress, []byte(childDef)); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, e2, "parent", Substitute([]byte(parentDef), map[string]string{"Child": child}))
	if err := e2.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	x := mustWait(t, e2, arn)
	if x.Status != StatusSucceeded || !strings.Contains(string(x.Output), `"SUCCEEDED"`) || runs.Load() != 2 {
		t.Errorf("resumed parent = %s %s after %d runs of the step; want it succeeded by a new child, the step run twice", x.Status, x.Output, runs.Load())
	}
}
