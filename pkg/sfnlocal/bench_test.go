package sfnlocal

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// sentBytes counts what a client sends to Valkey, as RESP arrays of bulk
// strings (MULTI/EXEC included), and the round trips.
type sentBytes struct{ n, trips atomic.Int64 }

func (s *sentBytes) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *sentBytes) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s.trips.Add(1)
		s.add(cmd)
		return next(ctx, cmd)
	}
}
func (s *sentBytes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		s.trips.Add(1)
		for _, cmd := range cmds {
			s.add(cmd)
		}
		return next(ctx, cmds)
	}
}
func (s *sentBytes) add(cmd redis.Cmder) {
	args := cmd.Args()
	n := len(fmt.Sprintf("*%d\r\n", len(args)))
	for _, a := range args {
		var v string
		switch a := a.(type) {
		case string:
			v = a
		case []byte:
			v = string(a)
		case time.Duration:
			v = strconv.FormatInt(int64(a/time.Second), 10)
		default:
			v = fmt.Sprint(a)
		}
		n += len(fmt.Sprintf("$%d\r\n", len(v))) + len(v) + 2
	}
	s.n.Add(int64(n))
}

// BenchmarkTurnPersistence runs statemachine/turn.asl.json (and its
// EXPRESS loop, which is never saved) in the shape of
// the Popelnase turn (docs/benchmarks.md: 3 LLM steps, two tool rounds of
// one call) with stand-in handlers and a RedisPersister, and reports what
// the engine sends to Valkey per turn. The first turn of the process, which
// also stores the definition, is left out.
func BenchmarkTurnPersistence(b *testing.B) {
	mr := miniredis.RunT(b)
	c := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	b.Cleanup(func() { c.Close() })
	q := redis.NewClient(&redis.Options{Addr: mr.Addr()}) // the benchmark's own reads, not counted
	b.Cleanup(func() { q.Close() })
	sent := &sentBytes{}
	c.AddHook(sent)
	turn := popelnaseMachines(b, Options{Persist: &RedisPersister{Client: c}}, func(i int, arn string) {
		// Wait returns when the execution ends; its end is saved just after.
		for deadline := time.Now().Add(5 * time.Second); q.SIsMember(b.Context(), "sfnlocal:execs", arn).Val(); {
			if time.Now().After(deadline) {
				b.Fatalf("turn %d: end not saved", i)
			}
			time.Sleep(100 * time.Microsecond)
		}
	})
	turn(-1)
	sent.n.Store(0)
	sent.trips.Store(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		turn(i)
	}
	b.StopTimer()
	b.ReportMetric(float64(sent.n.Load())/float64(b.N), "valkey-bytes/turn")
	b.ReportMetric(float64(sent.trips.Load())/float64(b.N), "valkey-roundtrips/turn")
}

// BenchmarkTurnMachines is the engine's own work for one turn: the same
// machines and stand-in handlers as BenchmarkTurnPersistence, nothing
// persisted. It is what the local engine adds to every turn of the local
// stack between its steps (docs/benchmarks.md).
func BenchmarkTurnMachines(b *testing.B) {
	turn := popelnaseMachines(b, Options{}, nil)
	turn(-1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		turn(i)
	}
}

// popelnaseMachines makes an engine with opts running turn.asl.json and
// its EXPRESS loop with stand-in handlers in the Popelnase turn's shape,
// and returns a function that runs turn i to its end (then calls ended,
// when set).
func popelnaseMachines(b *testing.B, opts Options, ended func(i int, arn string)) func(i int) {
	root := repoRoot(b)
	def, err := os.ReadFile(filepath.Join(root, "statemachine", "turn.asl.json"))
	if err != nil {
		b.Fatal(err)
	}
	e := New(opts)
	b.Cleanup(e.Close)
	var mu sync.Mutex
	steps := map[string]int{}
	reply := func(v string) Handler {
		return func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(v), nil }
	}
	e.RegisterFunction("llmstep", func(_ context.Context, p json.RawMessage) (json.RawMessage, error) {
		var in struct {
			TurnID string `json:"turn_id"`
		}
		_ = json.Unmarshal(p, &in)
		mu.Lock()
		steps[in.TurnID]++
		n := steps[in.TurnID]
		mu.Unlock()
		if n < 3 {
			// The step stored its batch of one call validated and started
			// it: the machine goes straight to the call.
			return json.RawMessage(fmt.Sprintf(`{"calls":["call_%s_%d"],"next":"invoke"}`, in.TurnID, n)), nil
		}
		return json.RawMessage(`{"next":"done"}`), nil
	})
	e.RegisterFunction("validate", func(_ context.Context, p json.RawMessage) (json.RawMessage, error) {
		var in struct {
			TurnID string `json:"turn_id"`
		}
		_ = json.Unmarshal(p, &in)
		return json.RawMessage(fmt.Sprintf(`{"calls":["call_%s_1"],"next":"invoke"}`, in.TurnID)), nil
	})
	e.RegisterFunction("invoke", func(_ context.Context, p json.RawMessage) (json.RawMessage, error) {
		var in struct {
			CallID string `json:"call_id"`
		}
		_ = json.Unmarshal(p, &in)
		// Its outcome's write appended it: AppendResults has nothing to do.
		return json.RawMessage(fmt.Sprintf(`{"after":"ahead-%s","appended":true,"call_id":%q,"status":"succeeded"}`, in.CallID, in.CallID)), nil
	})
	e.RegisterFunction("append", reply(`{"next":"llm"}`))
	e.RegisterFunction("await", reply(`{}`))
	subs := map[string]string{"LLMStepFunction": "llmstep", "ValidateFunction": "validate", "AwaitFunction": "await",
		"InvokeFunction": "invoke", "AppendFunction": "append"}
	loopDef, err := os.ReadFile(filepath.Join(root, "statemachine", "loop.asl.json"))
	if err != nil {
		b.Fatal(err)
	}
	loop, err := e.CreateStateMachineOfType("clientagent-loop", TypeExpress, Substitute(loopDef, subs))
	if err != nil {
		b.Fatal(err)
	}
	subs["LoopStateMachine"] = loop
	sm, err := e.CreateStateMachine("clientagent-turn", Substitute(def, subs))
	if err != nil {
		b.Fatal(err)
	}
	return func(i int) {
		tid := fmt.Sprintf("t_%018d", i)
		in := fmt.Sprintf(`{"conversation_id":"c_%018d","turn_id":%q,"await_timeout_seconds":86400,"max_concurrency":8}`, i, tid)
		arn, _, err := e.StartExecution(b.Context(), sm, tid, json.RawMessage(in))
		if err != nil {
			b.Fatal(err)
		}
		if x, err := e.Wait(b.Context(), arn); err != nil || x.Status != StatusSucceeded {
			b.Fatalf("turn %d = %s (%s %s), %v", i, x.Status, x.Error, x.Cause, err)
		}
		if ended != nil {
			ended(i, arn)
		}
	}
}
