package devstack

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/llmtest"
	"github.com/clientagent/clientagent/pkg/procs"
	"github.com/clientagent/clientagent/pkg/record/valkey/localserver"

	"github.com/clientagent/clientagent/pkg/sfnlocal"

	"github.com/clientagent/clientagent/pkg/valkeytest"
)

// TurnCounts are the figures of one turn read from its execution history
// (the STANDARD execution's with its EXPRESS children's spliced in).
type TurnCounts struct {
	Transitions int // states entered, in both machines
	Lambdas     int // Lambda invocations (TaskScheduled of a lambda task)
	Events      int // history events
	// Standard is the states the STANDARD execution entered: AWS bills
	// STANDARD per state transition, and the account's StateTransition
	// quota counts these alone.
	Standard int
	// Express is the EXPRESS executions the turn started (AWS bills them
	// per request and duration, with no transition quota).
	Express int
}

func countHistory(h []sfnlocal.HistoryEvent) TurnCounts {
	var c TurnCounts
	c.Events = len(h)
	depth := 0 // 0: the STANDARD execution's own events
	for _, e := range h {
		switch {
		case e.Type == "ExecutionStarted":
			depth++
			if depth > 1 {
				c.Express++
			}
		case e.Type == "ExecutionSucceeded" || e.Type == "ExecutionFailed" || e.Type == "ExecutionAborted" || e.Type == "ExecutionTimedOut":
			depth--
		case strings.HasSuffix(e.Type, "StateEntered"):
			c.Transitions++
			if depth == 1 {
				c.Standard++
			}
		case e.Type == "TaskScheduled" && e.TaskScheduledEventDetails != nil && e.TaskScheduledEventDetails.ResourceType == "lambda":
			c.Lambdas++
		}
	}
	return c
}

// history is the turn's history as one list: its STANDARD execution's,
// with each EXPRESS child's spliced in where it ran (Engine.FullHistory).
func (s *Stack) history(ctx context.Context, turnID string) ([]sfnlocal.HistoryEvent, error) {
	arn := strings.Replace(s.StateMachineARN, ":stateMachine:", ":execution:", 1) + ":" + turnID
	if _, err := s.Engine.Wait(ctx, arn); err != nil {
		return nil, err
	}
	return s.Engine.FullHistory(ctx, arn)
}

// TestPopelnaseCounts pins the cost of the reference turn (issue 4 #10,
// docs/benchmarks.md): 3 LLM calls, and the state transitions and Lambda
// invocations its execution history shows.
func TestPopelnaseCounts(t *testing.T) {
	t.Parallel()
	st, c := stack(t, nil)
	cid := c.newConversation()
	tid := c.send(cid, "Create a PNG image with the word Popelnase")
	v := c.wait(cid, tid)
	if v.Status != "succeeded" || v.LLMCalls != 3 {
		t.Fatalf("turn = %s with %d LLM calls (%s), want succeeded with 3", v.Status, v.LLMCalls, v.Reply)
	}
	h, err := st.history(t.Context(), tid)
	if err != nil {
		t.Fatal(err)
	}
	got := countHistory(h)
	// STANDARD (issue 30): Init, RunLoop, AfterLoop, Done. One EXPRESS
	// child: Init, Start, then per tool round LLMStep, Choice, Map,
	// InvokeCall, Choice (5) twice, then LLMStep, Choice, Done. Each
	// round's batch goes straight from its LLM step to its call, and the
	// call's outcome appends it ("A validated batch goes straight to its
	// calls", docs/architecture.md): neither ValidateBatch nor
	// AppendResults has anything to do, so neither runs.
	want := TurnCounts{Standard: 4, Express: 1, Transitions: 4 + 2 + 2*5 + 3, Lambdas: 2*2 + 1}
	if got.Standard != want.Standard || got.Express != want.Express || got.Transitions != want.Transitions || got.Lambdas != want.Lambdas {
		t.Errorf("counts = %+v, want %d STANDARD transitions, %d EXPRESS executions, %d transitions in all and %d lambdas", got, want.Standard, want.Express, want.Transitions, want.Lambdas)
	}
	t.Logf("Popelnase turn: %d LLM calls, %d STANDARD transitions, %d EXPRESS executions (%d transitions in all), %d Lambda invocations, %d history events",
		v.LLMCalls, got.Standard, got.Express, got.Transitions, got.Lambdas, got.Events)
}

// benchStack starts a stack with the demo model for a benchmark, with a
// round-trip counter on the platform's Valkey client; the stack's shutdown
// is kept out of the timed region.
func benchStack(b *testing.B) (*Stack, *client, *valkeytest.RoundTrips, *valkeytest.RoundTrips) {
	st, err := Start(b.Context(), benchStore(b, Config{Addr: "127.0.0.1:0", DataDir: b.TempDir(), Procs: benchProcs(b)}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		b.StopTimer()
		st.Close()
	})
	tok, _ := st.Token("dev")
	rt, engineRT := &valkeytest.RoundTrips{}, &valkeytest.RoundTrips{}
	st.Redis.AddHook(rt)
	st.engineRDB.AddHook(engineRT)
	return st, &client{t: b, base: st.URL(), token: tok}, rt, engineRT
}

// BenchmarkPopelnaseTurn measures one whole turn through the API, the local
// engine, the embedded Valkey and the demo A2A agents, with the scripted
// demo model (so the figure is our overhead, not a model's latency).
func BenchmarkPopelnaseTurn(b *testing.B) {
	st, c, rt, engineRT := benchStack(b)
	var counts TurnCounts
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cid := c.newConversation()
		tid := c.send(cid, fmt.Sprintf("Create a PNG image with the word Popelnase%d", i))
		h, err := st.history(b.Context(), tid)
		if err != nil {
			b.Fatal(err)
		}
		counts = countHistory(h)
	}
	b.ReportMetric(float64(rt.N.Load())/float64(b.N), "valkey-roundtrips/turn")
	b.ReportMetric(float64(engineRT.N.Load())/float64(b.N), "engine-roundtrips/turn")
	b.ReportMetric(float64(counts.Transitions), "transitions/turn")
	b.ReportMetric(float64(counts.Standard), "standard-transitions/turn")
	b.ReportMetric(float64(counts.Express), "express-executions/turn")
	b.ReportMetric(float64(counts.Lambdas), "lambdas/turn")
}

// benchTurns runs b.N turns of one prompt on a stack with model m and
// returns nothing; b reports ns per whole turn (API start to execution end).
func benchTurns(b *testing.B, m llm.Provider, agents []string, mutate ...func(*Config)) {
	benchTurnsSeen(b, m, agents, nil, mutate...)
}

// benchTurnsSeen is benchTurns handing each turn's execution history to
// seen (nil: none), outside the timed part.
func benchTurnsSeen(b *testing.B, m llm.Provider, agents []string, seen func([]sfnlocal.HistoryEvent), mutate ...func(*Config)) {
	cfg := benchStore(b, Config{Addr: "127.0.0.1:0", DataDir: b.TempDir(), LLM: m, Agents: agents, Procs: benchProcs(b)})
	for _, f := range mutate {
		f(&cfg)
	}
	st, err := Start(b.Context(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	tok, _ := st.Token("dev")
	c := &client{t: b, base: st.URL(), token: tok}
	var worst time.Duration
	defer func() {
		b.StopTimer() // the stack's shutdown is not a turn
		st.Close()
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		cid := c.newConversation()
		tid := c.send(cid, "hello")
		h, err := st.history(b.Context(), tid)
		if err != nil {
			b.Fatal(err)
		}
		worst = max(worst, time.Since(start))
		if seen != nil {
			b.StopTimer()
			seen(h)
			b.StartTimer()
		}
	}
	b.ReportMetric(float64(worst.Microseconds())/1000, "max-ms/turn")
}

// BenchmarkTextTurn is the floor: one LLM call that answers at once
// (execution start, Init, LLMStep, Choice, Done, two Valkey round trips).
func BenchmarkTextTurn(b *testing.B) {
	benchTurns(b, llmtest.ProviderFunc(func(context.Context, llm.Request) (*llm.Response, error) {
		return &llm.Response{Text: "hi"}, nil
	}), nil)
}

// BenchmarkOneToolTurn adds one tool round with a specialist that answers
// at once over A2A: the difference to BenchmarkTextTurn is the
// orchestration overhead of one step (validate, Map, invoke over HTTP,
// append, the second LLM step). The specialist answers in its request, as
// the local stack's fast demo specialists do: a2a-go's server decodes the
// JSON-RPC request and encodes the answer, and nothing of its task
// executor runs, whose work is the specialist's, not ours
// (BenchmarkOneToolTurnA2AExecutor keeps it).
func BenchmarkOneToolTurn(b *testing.B) {
	benchTurns(b, oneToolModel, []string{serveAgent(b, &slowAgent{instant: true})})
}

// BenchmarkOneToolTurnA2AExecutor is BenchmarkOneToolTurn with a
// specialist served by a2a-go's own request handler and task executor
// (its task store keeps nothing): the figure issue 29's durable step was
// measured with until 2026-12-07.
func BenchmarkOneToolTurnA2AExecutor(b *testing.B) {
	// The specialist's own task store is not our overhead.
	benchTurns(b, oneToolModel, []string{serveAgent(b, &slowAgent{noTasks: true})})
}

// BenchmarkOneToolTurnSteps is BenchmarkOneToolTurn's turn read from its
// execution history: the median time of each Task state (from its
// TaskStarted to its TaskSucceeded: the handler with its reads and
// writes) and of the engine between states, in µs. The first LLM step
// (µs/LLMStep-1) answers with the tool call, the second (µs/LLMStep-2)
// ends the turn. µs/tool-step is the median, over the turns, of the
// tool step's own states summed (the LLM step that made the call,
// ValidateBatch, InvokeCall, AppendResults): the durable tool step of
// BenchmarkOneToolTurn − BenchmarkTextTurn without the engine's
// bookkeeping, within one run, so that the host's drift between two runs
// does not enter it.
func BenchmarkOneToolTurnSteps(b *testing.B) {
	ag := &slowAgent{instant: true}
	url := serveAgent(b, ag)
	took := map[string][]time.Duration{}
	benchTurnsSeen(b, oneToolModel, []string{url}, func(h []sfnlocal.HistoryEvent) {
		st := stepTimes(h)
		for k, d := range st {
			took[k] = append(took[k], d)
		}
		took["tool-step"] = append(took["tool-step"], st["LLMStep-1"]+st["ValidateBatch"]+st["InvokeCall"]+st["AppendResults"])
	})
	for k, ds := range took {
		slices.Sort(ds)
		b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds())/1e3, "µs/"+k)
	}
}

// stepTimes is, per Task state of h (numbered from 1 when a state runs
// more than once in the loop, LLMStep-1, LLMStep-2), the time from its
// TaskStarted to its TaskSucceeded, and under "engine" the sum of the
// time between a state's exit and the next state's entry.
func stepTimes(h []sfnlocal.HistoryEvent) map[string]time.Duration {
	out := map[string]time.Duration{}
	runs := map[string]int{}
	var state string
	var started, exited time.Time
	for _, e := range h {
		switch {
		case e.StateEnteredEventDetails != nil:
			state = e.StateEnteredEventDetails.Name
			if !exited.IsZero() {
				out["engine"] += e.Timestamp.Sub(exited)
			}
		case e.StateExitedEventDetails != nil:
			exited = e.Timestamp
		case e.Type == "TaskStarted":
			started = e.Timestamp
		case e.Type == "TaskSucceeded" && !started.IsZero():
			runs[state]++
			out[fmt.Sprintf("%s-%d", state, runs[state])] = e.Timestamp.Sub(started)
			started = time.Time{}
		}
	}
	for k := range out {
		if name, n, ok := strings.Cut(k, "-"); ok && n == "1" && runs[name] == 1 {
			out[name] = out[k]
			delete(out, k)
		}
	}
	return out
}

// oneToolModel calls slow_echo once, then answers.
var oneToolModel = llmtest.ProviderFunc(func(_ context.Context, req llm.Request) (*llm.Response, error) {
	if req.Messages[len(req.Messages)-1].Role == llm.RoleTool {
		return &llm.Response{Text: "done"}, nil
	}
	return &llm.Response{ToolCalls: []llm.ToolCall{{ID: "e1", Name: "slow_echo", Arguments: `{"text":"x"}`}}}, nil
})

// TestWorkflowCounts pins the cost of the same SVG → PNG chain as one
// workflow started explicitly (docs/design.md §3.4, docs/benchmarks.md): the
// synthetic call replaces two routing decisions, so 1 LLM call, one tool
// round.
func TestWorkflowCounts(t *testing.T) {
	t.Parallel()
	st, c := stack(t, nil)
	cid := c.newConversation()
	tid := c.startWorkflow(cid, map[string]any{"workflow": map[string]any{"id": "word_to_png", "inputs": map[string]any{"word": "Popelnase"}}})
	v := c.wait(cid, tid)
	if v.Status != "succeeded" || v.LLMCalls != 1 || len(v.Artifacts) != 2 {
		t.Fatalf("turn = %s with %d LLM calls, %d artifacts (%s), want succeeded with 1 and the SVG and PNG", v.Status, v.LLMCalls, len(v.Artifacts), v.Reply)
	}
	h, err := st.history(t.Context(), tid)
	if err != nil {
		t.Fatal(err)
	}
	got := countHistory(h)
	// STANDARD: Init, RunLoop, AfterLoop, Done; the child: Init, Start, one
	// tool round (its LLMStep the synthetic call, Choice, ValidateBatch,
	// Choice, Map, InvokeCall, Choice, AppendResults, Choice: 9), LLMStep,
	// Choice, Done. A workflow's batch is validated by ValidateBatch, and
	// its results appended by AppendResults.
	want := TurnCounts{Standard: 4, Express: 1, Transitions: 4 + 2 + 9 + 3, Lambdas: 4 + 1}
	if got.Standard != want.Standard || got.Express != want.Express || got.Transitions != want.Transitions || got.Lambdas != want.Lambdas {
		t.Errorf("counts = %+v, want %d STANDARD transitions, %d EXPRESS executions, %d transitions and %d lambdas", got, want.Standard, want.Express, want.Transitions, want.Lambdas)
	}
	t.Logf("word_to_png workflow turn: %d LLM calls, %d state transitions, %d Lambda invocations, %d history events", v.LLMCalls, got.Transitions, got.Lambdas, got.Events)
}

// BenchmarkWorkflowTurn is BenchmarkPopelnaseTurn's chain as the
// word_to_png workflow, started explicitly.
func BenchmarkWorkflowTurn(b *testing.B) {
	st, c, rt, engineRT := benchStack(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cid := c.newConversation()
		tid := c.startWorkflow(cid, map[string]any{"workflow": map[string]any{"id": "word_to_png", "inputs": map[string]any{"word": fmt.Sprintf("Popelnase%d", i)}}})
		if _, err := st.history(b.Context(), tid); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rt.N.Load())/float64(b.N), "valkey-roundtrips/turn")
	b.ReportMetric(float64(engineRT.N.Load())/float64(b.N), "engine-roundtrips/turn")
}

// benchProcs is the processors' adapter of make run (pkg/procs), so a
// benchmark's turns run as that stack's do; GOMAXPROCS set in the
// environment fixes them instead.
func benchProcs(b *testing.B) *procs.Adapter {
	a := procs.FromEnv(os.Getenv)
	b.Cleanup(a.Close)
	return a
}

// benchStore sets the store the benchmarks use from BENCH_STORE: memory
// (the default, the embedded Valkey in memory), embedded (its snapshot),
// server (a valkey-server child with its AOF, as make run), or url
// (VALKEY_URL).
func benchStore(b *testing.B, cfg Config) Config {
	switch os.Getenv("BENCH_STORE") {
	case "", "memory":
	case "embedded":
		cfg.PersistEmbedded = true
	case "server":
		if cfg.ValkeyServer = localserver.Find(); cfg.ValkeyServer == "" {
			b.Fatal("BENCH_STORE=server: no valkey-server or redis-server on PATH")
		}
	case "url":
		if cfg.ValkeyURL = os.Getenv("VALKEY_URL"); cfg.ValkeyURL == "" {
			b.Fatal("BENCH_STORE=url: VALKEY_URL is not set")
		}
	default:
		b.Fatalf("BENCH_STORE=%q: want memory, embedded, server or url", os.Getenv("BENCH_STORE"))
	}
	return cfg
}

// TestPauseCounts pins what a pause adds (issue 30): a form is AwaitUser
// in the STANDARD execution, which then starts the next EXPRESS child at
// ValidateBatch with the answer and reads its end: 3 STANDARD transitions
// and one EXPRESS execution per form or approval.
func TestPauseCounts(t *testing.T) {
	t.Parallel()
	st, c := stack(t, nil)
	cid := c.newConversation()
	tid := c.send(cid, "Design a valve flange with 4 holes")
	v := c.wait(cid, tid)
	if v.Status != "awaiting_input" || v.Form == nil {
		t.Fatalf("status = %s, want awaiting_input with a form", v.Status)
	}
	if code := c.input(cid, tid, map[string]any{"answers": map[string]any{v.Form.Calls[0].CallID: map[string]any{"material": "pvc"}}}); code != http.StatusAccepted {
		t.Fatalf("answer = %d, want 202", code)
	}
	if v := c.wait(cid, tid); v.Status != "succeeded" {
		t.Fatalf("turn = %s %q, want succeeded", v.Status, v.Reply)
	}
	h, err := st.history(t.Context(), tid)
	if err != nil {
		t.Fatal(err)
	}
	got := countHistory(h)
	// Init, RunLoop, AfterLoop, then AwaitUser, RunLoop, AfterLoop, then Done.
	if got.Standard != 4+3 || got.Express != 2 {
		t.Errorf("counts = %+v, want %d STANDARD transitions and 2 EXPRESS executions (the reference turn's 4, +3 and +1 for the form)", got, 4+3)
	}
	var second []string // the states the second child entered first
	for _, e := range h {
		if d := e.StateEnteredEventDetails; d != nil && (d.Name == "ValidateBatch" || d.Name == "LLMStep" || d.Name == "AwaitUser") {
			second = append(second, d.Name)
		}
	}
	if i := slices.Index(second, "AwaitUser"); i < 0 || i+1 >= len(second) || second[i+1] != "ValidateBatch" {
		t.Errorf("states after the form = %v, want the next child to start at ValidateBatch", second)
	}
	t.Logf("form turn: %d STANDARD transitions, %d EXPRESS executions, %d transitions in all, %d Lambda invocations", got.Standard, got.Express, got.Transitions, got.Lambdas)
}
