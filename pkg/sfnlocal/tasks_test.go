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
)

// driveClock advances the fake clock one second at a time, whenever the
// engine is parked on a timer, until the execution closes.
func driveClock(t *testing.T, e *Engine, clock *FakeClock, arn string) Execution {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		x, _ := e.DescribeExecution(t.Context(), arn)
		if x.Status != StatusRunning {
			return x
		}
		if clock.WaitTimers(1, 5*time.Millisecond) {
			clock.Advance(time.Second)
		}
	}
	t.Fatalf("execution %s did not close", arn)
	return Execution{}
}

func TestRetryBackoff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		jitter string
		want   []time.Duration // attempt times after start
	}{
		// IntervalSeconds 2, BackoffRate 3, MaxDelaySeconds 10: 2, 6, then 18 capped to 10.
		{"backoff with MaxDelaySeconds", "NONE", []time.Duration{0, 2 * time.Second, 8 * time.Second, 18 * time.Second}},
		// FULL jitter scales each delay by Jitter() (0.5 here): 1, 3, 5.
		{"full jitter", "FULL", []time.Duration{0, 1 * time.Second, 4 * time.Second, 9 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, clock := testEngine(t, Options{Jitter: func() float64 { return 0.5 }})
			var mu sync.Mutex
			var calls []time.Duration
			e.RegisterFunction("Flaky", func(context.Context, json.RawMessage) (json.RawMessage, error) {
				mu.Lock()
				defer mu.Unlock()
				calls = append(calls, clock.Now().Sub(epoch0))
				return nil, errors.New("still broken")
			})
			def := strings.Replace(string(readDef(t, "retry.asl.json")), `"JitterStrategy": "NONE"`, `"JitterStrategy": "`+tt.jitter+`"`, 1)
			sm := mustCreate(t, e, "retry", []byte(def))
			x := driveClock(t, e, clock, mustStart(t, e, sm, "r", `{"timeout":0}`))
			want := map[string]any{"outcome": "gave up", "error": "errorString"}
			if diff := cmp.Diff(any(want), jsonOf(t, x.Output)); diff != "" {
				t.Errorf("Output mismatch (-want +got):\n%s", diff)
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff(tt.want, calls); diff != "" {
				t.Errorf("attempt times mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRetryThenSucceed(t *testing.T) {
	t.Parallel()
	e, clock := testEngine(t, Options{})
	var n atomic.Int32
	e.RegisterFunction("Flaky", func(context.Context, json.RawMessage) (json.RawMessage, error) {
		if n.Add(1) < 3 {
			return nil, errors.New("transient")
		}
		return json.RawMessage(`{"ok":true}`), nil
	})
	sm := mustCreate(t, e, "retry", readDef(t, "retry.asl.json"))
	x := driveClock(t, e, clock, mustStart(t, e, sm, "r", `{"timeout":0}`))
	if diff := cmp.Diff(any(map[string]any{"ok": true}), jsonOf(t, x.Output)); diff != "" {
		t.Errorf("Output mismatch (-want +got):\n%s", diff)
	}
	types := eventTypes(t, e, x.ExecutionArn)
	if got := strings.Count(strings.Join(types, ","), "TaskScheduled"); got != 3 {
		t.Errorf("TaskScheduled count = %d, want 3: %v", got, types)
	}
}

func TestTaskTimeout(t *testing.T) {
	t.Parallel()
	e, clock := testEngine(t, Options{})
	ended := make(chan error, 1)
	e.RegisterFunction("Flaky", func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		<-ctx.Done()
		ended <- ctx.Err()
		return nil, ctx.Err()
	})
	sm := mustCreate(t, e, "retry", readDef(t, "retry.asl.json"))
	arn := mustStart(t, e, sm, "t", `{"timeout":5}`)
	if !clock.WaitTimers(1, 5*time.Second) {
		t.Fatal("task timer never armed")
	}
	clock.Advance(4 * time.Second)
	if x, _ := e.DescribeExecution(t.Context(), arn); x.Status != StatusRunning {
		t.Fatalf("Status after 4s = %s, want RUNNING", x.Status)
	}
	clock.Advance(time.Second)
	x := mustWait(t, e, arn)
	// States.Timeout: the retrier with MaxAttempts 0 does not retry; Catch routes.
	want := map[string]any{"outcome": "timeout", "error": "States.Timeout"}
	if diff := cmp.Diff(any(want), jsonOf(t, x.Output)); diff != "" {
		t.Errorf("Output mismatch (-want +got):\n%s", diff)
	}
	select {
	case err := <-ended:
		if err == nil {
			t.Error("handler context error = nil, want cancelled")
		}
	case <-time.After(5 * time.Second):
		t.Error("handler context was not cancelled after the timeout")
	}
	if types := eventTypes(t, e, arn); !contains(types, "TaskTimedOut") {
		t.Errorf("History() = %v, want a TaskTimedOut event", types)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// awaitEngine runs wait.asl.json with an Await handler that hands out tokens.
func awaitEngine(t *testing.T, opts Options) (*Engine, *FakeClock, string, chan string) {
	t.Helper()
	e, clock := testEngine(t, opts)
	tokens := make(chan string, 4)
	e.RegisterFunction("Await", func(_ context.Context, p json.RawMessage) (json.RawMessage, error) {
		var in struct {
			Token string `json:"task_token"`
		}
		if err := json.Unmarshal(p, &in); err != nil || in.Token == "" {
			return nil, errors.New("no task_token in payload")
		}
		tokens <- in.Token
		return json.RawMessage(`{"stored":true}`), nil
	})
	return e, clock, mustCreate(t, e, "wait", readDef(t, "wait.asl.json")), tokens
}

func recvToken(t *testing.T, tokens chan string) string {
	t.Helper()
	select {
	case tok := <-tokens:
		return tok
	case <-time.After(10 * time.Second):
		t.Fatal("no task token handed to the Await function")
		return ""
	}
}

func TestTaskTokenAnswers(t *testing.T) {
	t.Parallel()
	t.Run("success, then double answer and garbage", func(t *testing.T) {
		t.Parallel()
		e, _, sm, tokens := awaitEngine(t, Options{})
		arn := mustStart(t, e, sm, "w", `{"conversation_id":"c1","timeout":3600,"heartbeat":0}`)
		tok := recvToken(t, tokens)
		if err := e.SendTaskSuccess(t.Context(), tok, json.RawMessage(`{"approved":true}`)); err != nil {
			t.Fatalf("SendTaskSuccess() = %v", err)
		}
		x := mustWait(t, e, arn)
		want := map[string]any{"answer": map[string]any{"approved": true}, "cid": "c1"}
		if diff := cmp.Diff(any(want), jsonOf(t, x.Output)); diff != "" {
			t.Errorf("Output mismatch (-want +got):\n%s", diff)
		}
		if err := e.SendTaskSuccess(t.Context(), tok, json.RawMessage(`{}`)); !errors.Is(err, ErrTaskTimedOut) {
			t.Errorf("second SendTaskSuccess() = %v, want ErrTaskTimedOut", err)
		}
		if err := e.SendTaskFailure(t.Context(), tok, "E", "c"); !errors.Is(err, ErrTaskTimedOut) {
			t.Errorf("SendTaskFailure(answered) = %v, want ErrTaskTimedOut", err)
		}
		for _, bad := range []string{"garbage", "", "c2ZubG9jYWwxfGZvbw"} {
			if err := e.SendTaskSuccess(t.Context(), bad, json.RawMessage(`{}`)); !errors.Is(err, ErrInvalidToken) {
				t.Errorf("SendTaskSuccess(%q) = %v, want ErrInvalidToken", bad, err)
			}
		}
		want2 := []string{"TaskStateEntered", "TaskScheduled", "TaskStarted", "TaskSubmitted", "TaskSucceeded", "TaskStateExited"}
		if diff := cmp.Diff(want2, eventTypes(t, e, arn)[3:9]); diff != "" {
			t.Errorf("task events mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("failure is caught by name", func(t *testing.T) {
		t.Parallel()
		e, _, sm, tokens := awaitEngine(t, Options{})
		arn := mustStart(t, e, sm, "w", `{"conversation_id":"c1","timeout":3600,"heartbeat":0}`)
		if err := e.SendTaskFailure(t.Context(), recvToken(t, tokens), "UserDeclined", "said no"); err != nil {
			t.Fatalf("SendTaskFailure() = %v", err)
		}
		x := mustWait(t, e, arn)
		if diff := cmp.Diff(any(map[string]any{"Error": "UserDeclined", "Cause": "said no"}), jsonOf(t, x.Output)); diff != "" {
			t.Errorf("Output mismatch (-want +got):\n%s", diff)
		}
	})
	t.Run("timeout from a variable, late answer", func(t *testing.T) {
		t.Parallel()
		e, clock, sm, tokens := awaitEngine(t, Options{})
		arn := mustStart(t, e, sm, "w", `{"conversation_id":"c1","timeout":60,"heartbeat":0}`)
		tok := recvToken(t, tokens)
		clock.WaitTimers(1, 5*time.Second)
		clock.Advance(59 * time.Second)
		if x, _ := e.DescribeExecution(t.Context(), arn); x.Status != StatusRunning {
			t.Fatalf("Status after 59s = %s, want RUNNING", x.Status)
		}
		clock.Advance(time.Second)
		x := mustWait(t, e, arn)
		if diff := cmp.Diff(any(map[string]any{"expired": true, "error": "States.Timeout"}), jsonOf(t, x.Output)); diff != "" {
			t.Errorf("Output mismatch (-want +got):\n%s", diff)
		}
		if err := e.SendTaskSuccess(t.Context(), tok, json.RawMessage(`{}`)); !errors.Is(err, ErrTaskTimedOut) {
			t.Errorf("late SendTaskSuccess() = %v, want ErrTaskTimedOut", err)
		}
	})
	t.Run("heartbeat extends, silence times out", func(t *testing.T) {
		t.Parallel()
		e, clock, sm, tokens := awaitEngine(t, Options{})
		arn := mustStart(t, e, sm, "w", `{"conversation_id":"c1","timeout":100,"heartbeat":10}`)
		tok := recvToken(t, tokens)
		clock.WaitTimers(2, 5*time.Second)
		clock.Advance(8 * time.Second)
		if err := e.SendTaskHeartbeat(t.Context(), tok); err != nil {
			t.Fatalf("SendTaskHeartbeat() = %v", err)
		}
		clock.Advance(9 * time.Second) // 17s: 9s since the beat
		time.Sleep(20 * time.Millisecond)
		if x, _ := e.DescribeExecution(t.Context(), arn); x.Status != StatusRunning {
			t.Fatalf("Status 9s after a heartbeat = %s (%s), want RUNNING", x.Status, x.Output)
		}
		clock.WaitTimers(2, 5*time.Second)
		clock.Advance(time.Second) // 18s: 10s since the beat
		x := mustWait(t, e, arn)
		if diff := cmp.Diff(any(map[string]any{"expired": true, "error": "States.HeartbeatTimeout"}), jsonOf(t, x.Output)); diff != "" {
			t.Errorf("Output mismatch (-want +got):\n%s", diff)
		}
		if err := e.SendTaskHeartbeat(t.Context(), tok); !errors.Is(err, ErrTaskTimedOut) {
			t.Errorf("SendTaskHeartbeat(closed) = %v, want ErrTaskTimedOut", err)
		}
	})
	t.Run("stop closes the token", func(t *testing.T) {
		t.Parallel()
		e, _, sm, tokens := awaitEngine(t, Options{})
		arn := mustStart(t, e, sm, "w", `{"conversation_id":"c1","timeout":3600,"heartbeat":0}`)
		tok := recvToken(t, tokens)
		if _, err := e.StopExecution(t.Context(), arn, "UserCancelled", "bye"); err != nil {
			t.Fatalf("StopExecution() = %v", err)
		}
		x := mustWait(t, e, arn)
		if x.Status != StatusAborted || x.Error != "UserCancelled" {
			t.Errorf("Status, Error = %s, %s, want ABORTED, UserCancelled", x.Status, x.Error)
		}
		if err := e.SendTaskSuccess(t.Context(), tok, json.RawMessage(`{}`)); !errors.Is(err, ErrTaskTimedOut) {
			t.Errorf("SendTaskSuccess(stopped) = %v, want ErrTaskTimedOut", err)
		}
		types := eventTypes(t, e, arn)
		if types[len(types)-1] != "ExecutionAborted" {
			t.Errorf("last event = %s, want ExecutionAborted", types[len(types)-1])
		}
	})
}

func TestMapConcurrencyAndOrder(t *testing.T) {
	t.Parallel()
	e, _ := testEngine(t, Options{})
	var active, peak atomic.Int32
	e.RegisterFunction("Work", func(_ context.Context, p json.RawMessage) (json.RawMessage, error) {
		n := active.Add(1)
		defer active.Add(-1)
		for {
			old := peak.Load()
			if n <= old || peak.CompareAndSwap(old, n) {
				break
			}
		}
		var in struct {
			Value float64 `json:"value"`
			Index float64 `json:"index"`
			Seen  string  `json:"seen"`
			Outer string  `json:"outer"`
		}
		json.Unmarshal(p, &in)
		// Later items finish first, so input order must be restored.
		time.Sleep(time.Duration(6-in.Index) * 3 * time.Millisecond)
		out, _ := json.Marshal(map[string]any{"v": in.Value * 10, "i": in.Index, "seen": in.Seen, "outer": in.Outer})
		return out, nil
	})
	sm := mustCreate(t, e, "map", readDef(t, "map.asl.json"))
	arn := mustStart(t, e, sm, "m", `{"max":2,"items":[{"v":1},{"v":2},{"v":3},{"v":4},{"v":5},{"v":6}]}`)
	x := mustWait(t, e, arn)
	if x.Status != StatusSucceeded {
		t.Fatalf("Status = %s (%s: %s)", x.Status, x.Error, x.Cause)
	}
	var results []any
	for i := range 6 {
		results = append(results, map[string]any{"v": float64(i+1) * 10, "i": float64(i), "seen": "changed inside", "outer": "orig"})
	}
	// The iteration's Assign shadows $outer inside it only.
	want := map[string]any{"results": results, "outer": "orig"}
	if diff := cmp.Diff(any(want), jsonOf(t, x.Output)); diff != "" {
		t.Errorf("Output mismatch (-want +got):\n%s", diff)
	}
	if got := peak.Load(); got != 2 {
		t.Errorf("max concurrent handlers = %d, want 2 (MaxConcurrency)", got)
	}
	types := strings.Join(eventTypes(t, e, arn), ",")
	for ev, n := range map[string]int{"MapStateEntered": 1, "MapStateStarted": 1, "MapIterationStarted": 6, "MapIterationSucceeded": 6, "MapStateSucceeded": 1, "MapStateExited": 1} {
		if got := strings.Count(types, ev+","); got != n {
			t.Errorf("%s count = %d, want %d", ev, got, n)
		}
	}
}

func TestMapIterationFailure(t *testing.T) {
	t.Parallel()
	e, _ := testEngine(t, Options{})
	e.RegisterFunction("Work", func(_ context.Context, p json.RawMessage) (json.RawMessage, error) {
		var in struct {
			Fail bool `json:"fail"`
		}
		json.Unmarshal(p, &in)
		if in.Fail {
			return nil, &LimitError{Limit: 3}
		}
		return p, nil
	})
	sm := mustCreate(t, e, "map", readDef(t, "map.asl.json"))
	arn := mustStart(t, e, sm, "m", `{"max":0,"items":[{"v":1},{"v":2,"fail":true},{"v":3}]}`)
	x := mustWait(t, e, arn)
	want := map[string]any{"Error": "LimitError", "Cause": `{"errorMessage":"limit 3 reached","errorType":"LimitError"}`}
	if diff := cmp.Diff(any(want), jsonOf(t, x.Output)); diff != "" {
		t.Errorf("Output mismatch (-want +got):\n%s", diff)
	}
	types := eventTypes(t, e, arn)
	if !contains(types, "MapIterationFailed") || !contains(types, "MapStateFailed") {
		t.Errorf("History() = %v, want MapIterationFailed and MapStateFailed", types)
	}
}

func TestRestartResumesWaitingExecution(t *testing.T) {
	t.Parallel()
	persisters := map[string]func(t *testing.T) Persister{
		"file": func(t *testing.T) Persister { return &FilePersister{Dir: t.TempDir()} },
		"redis": func(t *testing.T) Persister {
			mr := miniredis.RunT(t)
			c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
			t.Cleanup(func() { c.Close() })
			return &RedisPersister{Client: c}
		},
	}
	for name, mk := range persisters {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := mk(t)
			clock := NewFakeClock(epoch0)
			e1, _, sm, tokens := awaitEngine(t, Options{Persist: p, Clock: clock})
			arn := mustStart(t, e1, sm, "turn-7", `{"conversation_id":"c7","timeout":3600,"heartbeat":0}`)
			tok := recvToken(t, tokens)
			eventually(t, "snapshot with the token", func() bool {
				snaps, _ := p.LoadAll(t.Context())
				return len(snaps) == 1 && snaps[0].Wait != nil && snaps[0].Wait.Token == tok
			})
			before, _ := e1.History(t.Context(), arn)
			e1.Close()

			e2 := New(Options{Persist: p, Clock: clock})
			defer e2.Close()
			var invoked atomic.Int32
			e2.RegisterFunction("Await", func(context.Context, json.RawMessage) (json.RawMessage, error) {
				invoked.Add(1)
				return nil, nil
			})
			if err := e2.Resume(t.Context()); err != nil {
				t.Fatalf("Resume() = %v", err)
			}
			if err := e2.SendTaskSuccess(t.Context(), tok, json.RawMessage(`{"form":{"city":"Oslo"}}`)); err != nil {
				t.Fatalf("SendTaskSuccess(after restart) = %v", err)
			}
			x := mustWait(t, e2, arn)
			want := map[string]any{"answer": map[string]any{"form": map[string]any{"city": "Oslo"}}, "cid": "c7"}
			if diff := cmp.Diff(any(want), jsonOf(t, x.Output)); diff != "" {
				t.Errorf("Output mismatch (-want +got):\n%s", diff)
			}
			if n := invoked.Load(); n != 0 {
				t.Errorf("Await invoked %d times after restart, want 0 (still waiting on the same token)", n)
			}
			after, _ := e2.History(t.Context(), arn)
			if len(after) <= len(before) || after[0].Type != "ExecutionStarted" || strings.Count(strings.Join(eventTypesOf(after), ","), "ExecutionStarted") != 1 {
				t.Errorf("history after restart = %v, want the old events continued", eventTypesOf(after))
			}
			// The snapshot is dropped right after the execution closes.
			eventually(t, "snapshot deleted after completion", func() bool {
				snaps, _ := p.LoadAll(t.Context())
				return len(snaps) == 0
			})
		})
	}
}

func TestRestartRerunsTaskInFlight(t *testing.T) {
	t.Parallel()
	p := &FilePersister{Dir: t.TempDir()}
	e1, _ := testEngine(t, Options{Persist: p})
	started := make(chan struct{}, 1)
	e1.RegisterFunction("Work", func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	sm := mustCreate(t, e1, "map", readDef(t, "map.asl.json"))
	arn := mustStart(t, e1, sm, "m", `{"max":1,"items":[{"v":1}]}`)
	<-started
	e1.Close()

	e2, _ := testEngine(t, Options{Persist: p})
	e2.RegisterFunction("Work", echo)
	if err := e2.Resume(t.Context()); err != nil {
		t.Fatalf("Resume() = %v", err)
	}
	x := mustWait(t, e2, arn)
	if x.Status != StatusSucceeded {
		t.Fatalf("Status = %s (%s %s), want SUCCEEDED after the Map re-ran", x.Status, x.Error, x.Cause)
	}
}

func eventTypesOf(h []HistoryEvent) []string {
	out := make([]string, len(h))
	for i, ev := range h {
		out[i] = ev.Type
	}
	return out
}

// The Redis persister writes a transition's new history events only; any
// instance (a restarted process) reads the whole execution back, and its
// next save continues the history without losing or repeating events. A
// snapshot written whole by an older version still loads.
func TestRedisPersisterIsIncremental(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { c.Close() })
	ctx := t.Context()
	def := json.RawMessage(`{"StartAt":"A","States":{"A":{"Type":"Succeed"}}}`)
	snap := func(n int) Snapshot {
		s := Snapshot{Execution: Execution{ExecutionArn: "arn:x:1", Status: StatusRunning}, StateMachineName: "m", Definition: def,
			State: "A", StateInput: json.RawMessage(`{"n":1}`), Variables: map[string]any{"v": float64(n)}}
		for i := 1; i <= n; i++ {
			s.History = append(s.History, HistoryEvent{ID: int64(i), Type: fmt.Sprintf("E%d", i), Timestamp: epoch0.Add(time.Duration(i) * time.Second)})
		}
		return s
	}
	ids := func(s Snapshot) []int64 {
		var out []int64
		for _, e := range s.History {
			out = append(out, e.ID)
		}
		return out
	}
	a := &RedisPersister{Client: c}
	for _, n := range []int{3, 5} {
		if err := a.Save(ctx, snap(n)); err != nil {
			t.Fatalf("Save(%d events) = %v", n, err)
		}
	}
	if n := c.LLen(ctx, "sfnlocal:hist:arn:x:1").Val(); n != 5 {
		t.Errorf("history list = %d events, want 5 (appended, not rewritten)", n)
	}
	b := &RedisPersister{Client: c}
	got, err := b.LoadAll(ctx)
	if err != nil || len(got) != 1 {
		t.Fatalf("LoadAll() = %d snapshots, %v", len(got), err)
	}
	if diff := cmp.Diff([]int64{1, 2, 3, 4, 5}, ids(got[0])); diff != "" || string(got[0].Definition) != string(def) || got[0].Variables["v"] != float64(5) {
		t.Errorf("LoadAll() history (-want +got):\n%s definition %s variables %v", diff, got[0].Definition, got[0].Variables)
	}
	if err := b.Save(ctx, snap(7)); err != nil {
		t.Fatal(err)
	}
	got, _ = (&RedisPersister{Client: c}).LoadAll(ctx)
	if diff := cmp.Diff([]int64{1, 2, 3, 4, 5, 6, 7}, ids(got[0])); diff != "" {
		t.Errorf("history after a save by the restarted instance (-want +got):\n%s", diff)
	}

	legacy := snap(2)
	legacy.Execution.ExecutionArn = "arn:x:old"
	lb, _ := json.Marshal(legacy)
	c.Set(ctx, "sfnlocal:exec:arn:x:old", lb, 0)
	c.SAdd(ctx, "sfnlocal:execs", "arn:x:old")
	got, err = (&RedisPersister{Client: c}).LoadAll(ctx)
	if err != nil || len(got) != 2 {
		t.Fatalf("LoadAll() with a legacy snapshot = %d, %v", len(got), err)
	}
	for _, s := range got {
		if s.Execution.ExecutionArn == "arn:x:old" && (len(s.History) != 2 || string(s.Definition) != string(def)) {
			t.Errorf("legacy snapshot = %d events, definition %s", len(s.History), s.Definition)
		}
	}
	ended := snap(8)
	ended.Execution.Status = StatusSucceeded
	if err := b.End(ctx, ended); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"sfnlocal:exec:arn:x:1", "sfnlocal:hist:arn:x:1"} {
		if ttl := mr.TTL(k); ttl != DefaultRetention {
			t.Errorf("TTL(%s) after End = %v, want %v", k, ttl, DefaultRetention)
		}
	}
	if c.SIsMember(ctx, "sfnlocal:execs", "arn:x:1").Val() {
		t.Error("an ended execution is still in the running set")
	}
	got1, err := (&RedisPersister{Client: c}).Load(ctx, "arn:x:1")
	if err != nil || got1.Execution.Status != StatusSucceeded || len(got1.History) != 8 {
		t.Errorf("Load(ended) = %s with %d events, %v, want SUCCEEDED with 8", got1.Execution.Status, len(got1.History), err)
	}
	if _, err := b.Load(ctx, "arn:x:none"); !errors.Is(err, ErrExecutionDoesNotExist) {
		t.Errorf("Load(unknown) = %v, want ErrExecutionDoesNotExist", err)
	}
}

// An EventBridge-like rule on execution status changes: the target
// function gets the event in AWS's shape (detail-type, detail.input as a
// JSON string, error and cause) for the statuses it asked for only, and a
// failed delivery is retried a minute later, as Lambda retries an
// asynchronous invocation.
func TestStatusRuleDeliversEvents(t *testing.T) {
	t.Parallel()
	clock := NewFakeClock(epoch0)
	e := New(Options{Clock: clock})
	t.Cleanup(e.Close)
	e.RegisterFunction("Work", func(_ context.Context, p json.RawMessage) (json.RawMessage, error) {
		var in struct{ Fail bool }
		_ = json.Unmarshal(p, &in)
		if in.Fail {
			return nil, &LimitError{Limit: 1}
		}
		return p, nil
	})
	events := make(chan StatusChangeEvent, 4)
	var calls atomic.Int32
	e.RegisterFunction("Ended", func(_ context.Context, p json.RawMessage) (json.RawMessage, error) {
		if calls.Add(1) == 1 {
			return nil, errors.New("first delivery fails")
		}
		var ev StatusChangeEvent
		if err := json.Unmarshal(p, &ev); err != nil {
			return nil, err
		}
		events <- ev
		return nil, nil
	})
	def := `{"QueryLanguage":"JSONata","StartAt":"W","States":{"W":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke","Arguments":{"FunctionName":"Work","Payload":"{% $states.input %}"},"End":true}}}`
	sm := mustCreate(t, e, "rules", json.RawMessage(def))
	e.AddStatusRule(StatusRule{StateMachineArn: sm, Statuses: []string{StatusFailed, StatusAborted}, Target: "Ended"})

	ok := mustStart(t, e, sm, "ok", `{"fail":false}`)
	mustWait(t, e, ok)
	bad := mustStart(t, e, sm, "bad", `{"fail":true}`)
	mustWait(t, e, bad)
	eventually(t, "the first delivery", func() bool { return calls.Load() == 1 })
	// The failed delivery parks on its retry delay before the clock moves.
	if !clock.WaitTimers(1, 5*time.Second) {
		t.Fatal("no retry timer after the failed delivery")
	}
	clock.Advance(AsyncRetryDelays[0])
	var ev StatusChangeEvent
	select {
	case ev = <-events:
	case <-time.After(5 * time.Second):
		t.Fatal("no event after the retry delay")
	}
	if ev.DetailType != "Step Functions Execution Status Change" || ev.Source != "aws.states" || ev.Detail.ExecutionArn != bad ||
		ev.Detail.Status != StatusFailed || ev.Detail.Input != `{"fail":true}` || ev.Detail.Error == nil || *ev.Detail.Error != "LimitError" {
		t.Errorf("event = %+v, want the failed execution's status change", ev)
	}
	select {
	case ev := <-events:
		t.Errorf("unexpected event %+v: the succeeded execution matches no rule", ev)
	case <-time.After(100 * time.Millisecond):
	}
}
