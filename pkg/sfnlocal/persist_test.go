package sfnlocal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/valkeytest"
)

// countingPersister counts the calls the engine makes on a real persister.
type countingPersister struct {
	Persister
	mu     sync.Mutex
	saves  []string // the state of each Save
	ends   int
	closed chan struct{} // receives on each End
}

func (p *countingPersister) Save(ctx context.Context, s Snapshot) error {
	p.mu.Lock()
	p.saves = append(p.saves, s.State)
	p.mu.Unlock()
	return p.Persister.Save(ctx, s)
}

func (p *countingPersister) End(ctx context.Context, s Snapshot) error {
	err := p.Persister.End(ctx, s)
	p.mu.Lock()
	p.ends++
	p.mu.Unlock()
	if p.closed != nil {
		p.closed <- struct{}{}
	}
	return err
}

// commands counts the Valkey commands whose first key starts with prefix.
type commands struct {
	prefix string
	n      atomic.Int64
}

func (c *commands) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}
func (c *commands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}
func (c *commands) count(cmd redis.Cmder) {
	if args := cmd.Args(); len(args) > 1 {
		if k, ok := args[1].(string); ok && strings.HasPrefix(k, c.prefix) {
			c.n.Add(1)
		}
	}
}

func redisPersister(t *testing.T) (*RedisPersister, *miniredis.Miniredis, *redis.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	return &RedisPersister{Client: c}, mr, c
}

// Pass → Task → Choice → Pass → Task → Choice → Succeed.
const boundaryDef = `{"QueryLanguage":"JSONata","StartAt":"Init","States":{
	"Init":{"Type":"Pass","Assign":{"n":"{% $states.input.n %}"},"Next":"A"},
	"A":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","Arguments":{"FunctionName":"A","Payload":{"n":"{% $n %}"}},"Output":"{% $states.result.Payload %}","Next":"IsA"},
	"IsA":{"Type":"Choice","Choices":[{"Condition":"{% $exists($states.input.n) %}","Next":"Mid"}],"Default":"Mid"},
	"Mid":{"Type":"Pass","Output":{"m":"{% $n %}"},"Next":"B"},
	"B":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","Arguments":{"FunctionName":"B","Payload":"{% $states.input %}"},"Output":"{% $states.result.Payload %}","Next":"IsB"},
	"IsB":{"Type":"Choice","Choices":[{"Condition":"{% $states.input.m = $n %}","Next":"Done"}],"Default":"Done"},
	"Done":{"Type":"Succeed"}}}`

// The engine saves at the start, before a task that follows another
// task's result, and at the end; never after a Choice or a Pass. The
// definition travels to Valkey once per process, not with every save.
func TestSavesOnlyAtBoundaries(t *testing.T) {
	t.Parallel()
	rp, _, c := redisPersister(t)
	defWrites := &commands{prefix: "sfnlocal:def:"}
	c.AddHook(defWrites)
	p := &countingPersister{Persister: rp}
	e, _ := testEngine(t, Options{Persist: p})
	e.RegisterFunction("A", echo)
	e.RegisterFunction("B", echo)
	sm := mustCreate(t, e, "boundaries", []byte(boundaryDef))
	for i := range 3 {
		x := mustWait(t, e, mustStart(t, e, sm, fmt.Sprintf("b%d", i), `{"n":1}`))
		if x.Status != StatusSucceeded {
			t.Fatalf("Status = %s (%s %s), want SUCCEEDED", x.Status, x.Error, x.Cause)
		}
	}
	eventually(t, "three ends saved", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.ends == 3
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	// Per execution: the start (at Init) and B's start, which holds A's result.
	want := []string{"Init", "B", "Init", "B", "Init", "B"}
	if diff := cmp.Diff(want, p.saves); diff != "" {
		t.Errorf("saved positions (-want +got):\n%s", diff)
	}
	if n := defWrites.n.Load(); n != 1 {
		t.Errorf("definition written %d times over 3 executions, want 1", n)
	}
}

// gatedPersister holds the first Save until released, and counts Loads.
type gatedPersister struct {
	countingPersister
	gate  chan struct{}
	once  sync.Once
	loads atomic.Int64
}

func (p *gatedPersister) Save(ctx context.Context, s Snapshot) error {
	p.once.Do(func() { <-p.gate })
	return p.countingPersister.Save(ctx, s)
}

func (p *gatedPersister) Load(ctx context.Context, arn string) (Snapshot, error) {
	p.loads.Add(1)
	return p.countingPersister.Load(ctx, arn)
}

// The start's save overlaps the first states (the execution reaches its
// first task while the save is held), StartExecution returns only once it
// is stored, and no later save overtakes it: the saved positions stay in
// order.
func TestStartSaveOverlapsFirstStates(t *testing.T) {
	t.Parallel()
	rp, _, _ := redisPersister(t)
	p := &gatedPersister{countingPersister: countingPersister{Persister: rp}, gate: make(chan struct{})}
	e, _ := testEngine(t, Options{Persist: p})
	reachedA := make(chan struct{})
	e.RegisterFunction("A", func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		close(reachedA)
		return in, nil
	})
	e.RegisterFunction("B", echo)
	sm := mustCreate(t, e, "overlap", []byte(boundaryDef))
	started := make(chan string)
	go func() { started <- mustStart(t, e, sm, "o1", `{"n":1}`) }()
	select {
	case <-reachedA:
	case <-time.After(5 * time.Second):
		t.Fatal("the execution did not reach its first task while its start was being saved")
	}
	select {
	case <-started:
		t.Fatal("StartExecution returned before the start was saved")
	case <-time.After(20 * time.Millisecond):
	}
	close(p.gate)
	x := mustWait(t, e, <-started)
	if x.Status != StatusSucceeded {
		t.Fatalf("Status = %s (%s %s), want SUCCEEDED", x.Status, x.Error, x.Cause)
	}
	eventually(t, "the end saved", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.ends == 1
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	if diff := cmp.Diff([]string{"Init", "B"}, p.saves); diff != "" {
		t.Errorf("saved positions (-want +got):\n%s", diff)
	}
}

// An EXPRESS execution is never stored, so its start reads nothing from
// the store to learn whether its name is taken.
func TestExpressStartReadsNothing(t *testing.T) {
	t.Parallel()
	rp, _, _ := redisPersister(t)
	p := &gatedPersister{countingPersister: countingPersister{Persister: rp}, gate: make(chan struct{})}
	close(p.gate)
	e, _ := testEngine(t, Options{Persist: p})
	e.RegisterFunction("A", echo)
	e.RegisterFunction("B", echo)
	arn, err := e.CreateStateMachineOfType("fast", TypeExpress, []byte(boundaryDef))
	if err != nil {
		t.Fatal(err)
	}
	x := mustWait(t, e, mustStart(t, e, arn, "x1", `{"n":1}`))
	if x.Status != StatusSucceeded {
		t.Fatalf("Status = %s (%s %s), want SUCCEEDED", x.Status, x.Error, x.Cause)
	}
	mustStart(t, e, mustCreate(t, e, "std", []byte(boundaryDef)), "s1", `{"n":1}`)
	if n := p.loads.Load(); n != 1 {
		t.Errorf("store reads at start = %d for one EXPRESS and one STANDARD execution, want 1 (the STANDARD's)", n)
	}
}

// A crash (Close, as a kill -9 leaves the store) while B runs: the resumed
// execution runs B again from the saved position, not A; the Choice and
// Pass between them are not saved and need not be.
func TestRestartRerunsFromLastBoundary(t *testing.T) {
	t.Parallel()
	p, _, _ := redisPersister(t)
	e1, _ := testEngine(t, Options{Persist: p})
	var a1, b1 atomic.Int32
	inB := make(chan struct{}, 1)
	e1.RegisterFunction("A", func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		a1.Add(1)
		return in, nil
	})
	e1.RegisterFunction("B", func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		b1.Add(1)
		inB <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	sm := mustCreate(t, e1, "boundaries", []byte(boundaryDef))
	arn := mustStart(t, e1, sm, "crash", `{"n":7}`)
	<-inB
	e1.Close()

	e2, _ := testEngine(t, Options{Persist: p})
	var a2 atomic.Int32
	var bIn json.RawMessage
	e2.RegisterFunction("A", func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		a2.Add(1)
		return in, nil
	})
	e2.RegisterFunction("B", func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		bIn = in
		return in, nil
	})
	if err := e2.Resume(t.Context()); err != nil {
		t.Fatalf("Resume() = %v", err)
	}
	x := mustWait(t, e2, arn)
	if x.Status != StatusSucceeded {
		t.Fatalf("Status = %s (%s %s), want SUCCEEDED", x.Status, x.Error, x.Cause)
	}
	if a1.Load() != 1 || a2.Load() != 0 || b1.Load() != 1 {
		t.Errorf("A ran %d+%d times, B %d before the crash, want A once and B once before", a1.Load(), a2.Load(), b1.Load())
	}
	if diff := cmp.Diff(any(map[string]any{"m": float64(7)}), jsonOf(t, bIn)); diff != "" {
		t.Errorf("B's payload after the restart (-want +got):\n%s", diff)
	}
	h, _ := e2.History(t.Context(), arn)
	if got := strings.Count(strings.Join(eventTypesOf(h), ","), "TaskStateEntered"); got != 2 {
		t.Errorf("history = %v, want A and B entered once each", eventTypesOf(h))
	}
}

// A crash while a task waits to be retried: the resumed execution retries
// at the planned time with the retriers' counts, so the retry spent before
// the crash is not granted again.
func TestRestartKeepsRetryPlan(t *testing.T) {
	t.Parallel()
	p := &FilePersister{Dir: t.TempDir()}
	clock := NewFakeClock(epoch0)
	def := `{"QueryLanguage":"JSONata","StartAt":"T","States":{"T":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke",
		"Arguments":{"FunctionName":"F","Payload":{"retry":"{% $states.context.State.RetryCount %}"}},
		"Retry":[{"ErrorEquals":["LimitError"],"IntervalSeconds":30,"MaxAttempts":1}],"End":true}}}`
	var calls atomic.Int32
	fails := func(_ context.Context, in json.RawMessage) (json.RawMessage, error) {
		calls.Add(1)
		return nil, &LimitError{Limit: 1}
	}
	e1 := New(Options{Persist: p, Clock: clock})
	e1.RegisterFunction("F", fails)
	arn := mustStart(t, e1, mustCreate(t, e1, "r", []byte(def)), "r1", `{}`)
	if !clock.WaitTimers(1, 5*time.Second) {
		t.Fatal("no retry timer")
	}
	e1.Close()

	e2 := New(Options{Persist: p, Clock: clock})
	defer e2.Close()
	e2.RegisterFunction("F", fails)
	if err := e2.Resume(t.Context()); err != nil {
		t.Fatalf("Resume() = %v", err)
	}
	if !clock.WaitTimers(1, 5*time.Second) {
		t.Fatal("the resumed execution does not wait for its retry")
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("F ran %d times before the retry time, want 1", n)
	}
	clock.Advance(30 * time.Second)
	x := mustWait(t, e2, arn)
	if x.Status != StatusFailed || x.Error != "LimitError" || calls.Load() != 2 {
		t.Errorf("Status, Error = %s, %s after %d calls, want FAILED, LimitError after 2 (MaxAttempts 1)", x.Status, x.Error, calls.Load())
	}
}

// Ended executions leave memory beyond the newest KeepEnded; the store
// keeps them for the retention, so Describe, History, Wait and a second
// start of the same name still answer as for one in memory.
func TestEndedExecutionsLeaveMemory(t *testing.T) {
	t.Parallel()
	p, mr, _ := redisPersister(t)
	e, _ := testEngine(t, Options{Persist: p})
	e.RegisterFunction("A", echo)
	e.RegisterFunction("B", echo)
	sm := mustCreate(t, e, "boundaries", []byte(boundaryDef))
	const n = 200
	arns := make([]string, n)
	for i := range n {
		arns[i] = mustStart(t, e, sm, fmt.Sprintf("x%d", i), fmt.Sprintf(`{"n":%d}`, i))
		mustWait(t, e, arns[i])
	}
	inMemory := func() int {
		e.mu.Lock()
		defer e.mu.Unlock()
		return len(e.execs)
	}
	eventually(t, "ended executions retired", func() bool { return inMemory() <= KeepEnded })
	e.mu.Lock()
	_, first := e.execs[arns[0]]
	e.mu.Unlock()
	if first {
		t.Fatalf("the first of %d ended executions is still in memory", n)
	}

	x, err := e.DescribeExecution(t.Context(), arns[0])
	if err != nil || x.Status != StatusSucceeded || string(x.Output) != `{"m":0}` {
		t.Errorf("DescribeExecution(gone from memory) = %s %s, %v, want SUCCEEDED {\"m\":0}", x.Status, x.Output, err)
	}
	if w, err := e.Wait(t.Context(), arns[0]); err != nil || w.Status != StatusSucceeded {
		t.Errorf("Wait(gone from memory) = %s, %v", w.Status, err)
	}
	h, err := e.History(t.Context(), arns[0])
	if err != nil || len(h) == 0 || h[0].Type != "ExecutionStarted" || h[len(h)-1].Type != "ExecutionSucceeded" {
		t.Errorf("History(gone from memory) = %v, %v, want it whole", eventTypesOf(h), err)
	}
	if _, _, err := e.StartExecution(t.Context(), sm, "x0", json.RawMessage(`{"n":0}`)); !errors.Is(err, ErrExecutionAlreadyExists) {
		t.Errorf("StartExecution(ended name, gone from memory) = %v, want ErrExecutionAlreadyExists", err)
	}
	for _, k := range []string{"sfnlocal:exec:" + arns[0], "sfnlocal:hist:" + arns[0]} {
		if ttl := mr.TTL(k); ttl <= 0 || ttl > DefaultRetention {
			t.Errorf("TTL(%s) = %v, want the retention (%v)", k, ttl, DefaultRetention)
		}
	}
	if running := mr.Exists("sfnlocal:execs") && len(must(mr.Members("sfnlocal:execs"))) > 0; running {
		t.Errorf("running set = %v, want empty", must(mr.Members("sfnlocal:execs")))
	}
	mr.FastForward(DefaultRetention + time.Second)
	if _, err := e.DescribeExecution(t.Context(), arns[0]); !errors.Is(err, ErrExecutionDoesNotExist) {
		t.Errorf("DescribeExecution(after the retention) = %v, want ErrExecutionDoesNotExist", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// With a RedisPersister (a Claimer), a STANDARD execution's start is one
// round trip: the check that its name is free and its first save are one
// script, before its first state runs. A name an execution took before a
// restart is refused, and nothing of that start runs.
func TestStartIsOneClaim(t *testing.T) {
	t.Parallel()
	p, _, c := redisPersister(t)
	rt := &valkeytest.RoundTrips{}
	c.AddHook(rt)
	e1, _ := testEngine(t, Options{Persist: p})
	release := make(chan struct{})
	var ranA atomic.Int32
	e1.RegisterFunction("A", func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		if strings.Contains(string(in), `"n":1`) {
			ranA.Add(1)
			<-release
		}
		return in, nil
	})
	e1.RegisterFunction("B", echo)
	sm := mustCreate(t, e1, "claims", []byte(boundaryDef))
	// A first execution connects and loads the script; its end is stored
	// before the count starts.
	first := mustStart(t, e1, sm, "c0", `{"n":0}`)
	mustWait(t, e1, first)
	eventually(t, "the first execution's end stored", func() bool {
		s, err := p.Load(t.Context(), first)
		return err == nil && s.Execution.Status == StatusSucceeded
	})
	before := rt.N.Load()
	arn := mustStart(t, e1, sm, "c1", `{"n":1}`)
	if n := rt.N.Load() - before; n != 1 {
		t.Errorf("StartExecution made %d round trips to the store, want 1 (the claim)", n)
	}
	s, err := p.Load(t.Context(), arn)
	if err != nil || s.Execution.Status != StatusRunning || s.State != "Init" || len(s.History) != 1 {
		t.Fatalf("stored after the start: %+v, %v; want the running execution at Init with its ExecutionStarted", s, err)
	}
	close(release)
	if x := mustWait(t, e1, arn); x.Status != StatusSucceeded {
		t.Fatalf("Status = %s (%s %s), want SUCCEEDED", x.Status, x.Error, x.Cause)
	}
	eventually(t, "the end stored", func() bool {
		s, err := p.Load(t.Context(), arn)
		return err == nil && s.Execution.Status == StatusSucceeded
	})
	s, _ = p.Load(t.Context(), arn)
	e1.mu.Lock()
	inMemory := len(e1.execs[arn].history)
	e1.mu.Unlock()
	if len(s.History) != inMemory {
		t.Errorf("stored history has %d events, the execution %d", len(s.History), inMemory)
	}

	// A restart: the name is taken in the store, and the new engine does
	// not run it again, even for two starts at once.
	e2, _ := testEngine(t, Options{Persist: p})
	e2.RegisterFunction("A", func(ctx context.Context, in json.RawMessage) (json.RawMessage, error) {
		ranA.Add(1)
		return in, nil
	})
	e2.RegisterFunction("B", echo)
	sm2 := mustCreate(t, e2, "claims", []byte(boundaryDef))
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		wg.Go(func() { _, _, errs[i] = e2.StartExecution(t.Context(), sm2, "c1", json.RawMessage(`{"n":1}`)) })
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, ErrExecutionAlreadyExists) {
			t.Errorf("start %d of a name taken before the restart = %v, want ErrExecutionAlreadyExists", i, err)
		}
	}
	if _, err := e2.DescribeExecution(t.Context(), arn); err != nil {
		t.Errorf("DescribeExecution(%s) after the refused starts = %v, want the stored execution", arn, err)
	}
	if n := ranA.Load(); n != 1 {
		t.Errorf("A ran %d times, want once (the first engine's)", n)
	}
}
