package devstack

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/telemetry"
)

// otlpReceiver is an in-process OTLP/HTTP receiver: it accepts protobuf
// exports on /v1/traces and keeps every span.
type otlpReceiver struct {
	mu       sync.Mutex
	spans    []*tracepb.Span
	services map[string]string // span id → service.name
	url      string
}

func startOTLP(t testing.TB) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{services: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
			http.NotFound(w, req)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		var in coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &in)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		for _, rs := range in.ResourceSpans {
			service := attr(rs.GetResource().GetAttributes(), "service.name")
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					r.spans = append(r.spans, s)
					r.services[hex.EncodeToString(s.SpanId)] = service
				}
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

// trace is every span received of trace id.
func (r *otlpReceiver) trace(id []byte) []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range r.spans {
		if bytes.Equal(s.TraceId, id) {
			out = append(out, s)
		}
	}
	return out
}

// turnSpans are the received "turn" spans of turn tid.
func (r *otlpReceiver) turnSpans(tid string) []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range r.spans {
		if s.Name == telemetry.SpanTurn && attr(s.Attributes, "clientagent.turn.id") == tid {
			out = append(out, s)
		}
	}
	return out
}

// attr is the value of attribute key as text ("" when absent).
func attr(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key != key {
			continue
		}
		switch v := kv.Value.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			return v.StringValue
		case *commonpb.AnyValue_IntValue:
			return strconv.FormatInt(v.IntValue, 10)
		case *commonpb.AnyValue_ArrayValue:
			var parts []string
			for _, e := range v.ArrayValue.Values {
				parts = append(parts, e.GetStringValue())
			}
			return strings.Join(parts, ",")
		default:
			return kv.Value.String()
		}
	}
	return ""
}

// tracedStack is a stack exporting its traces to a new in-process receiver.
func tracedStack(t *testing.T, m llm.Provider, agents []string) (*Stack, *client, *otlpReceiver, *telemetry.Tracing) {
	t.Helper()
	rcv := startOTLP(t)
	env := map[string]string{telemetry.EnvEndpoint: rcv.url, telemetry.EnvServiceName: "clientagent-test"}
	tracing, err := telemetry.FromEnv(t.Context(), func(k string) string { return env[k] }, telemetry.Options{})
	if err != nil {
		t.Fatalf("telemetry.FromEnv() error = %v", err)
	}
	if !tracing.Enabled() {
		t.Fatal("tracing.Enabled() = false with an endpoint set")
	}
	t.Cleanup(func() { _ = tracing.Shutdown(t.Context()) })
	st, c := stack(t, m, func(cfg *Config) {
		cfg.Agents = agents
		cfg.Tracing = tracing
	})
	return st, c, rcv, tracing
}

// TestTurnTrace is issue 16's acceptance: a turn through the local stack,
// with an in-process OTLP receiver, is ONE trace holding the turn span, one
// chat span per LLM call with its token usage, one execute_tool span per
// call with its status, the steps as children of the turn; and the A2A
// request carried the trace's traceparent to the specialist.
func TestTurnTrace(t *testing.T) {
	t.Parallel()
	var (
		mu           sync.Mutex
		traceparents []string
	)
	ag := &slowAgent{}
	agentURL := serveAgentWith(t, ag, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				mu.Lock()
				traceparents = append(traceparents, r.Header.Get("traceparent"))
				mu.Unlock()
			}
			next.ServeHTTP(w, r)
		})
	})
	m := &model{decide: func(req llm.Request) *llm.Response {
		r := calls(call("e1", "slow_echo", map[string]any{"text": "x"}))
		if len(toolResults(req)) > 0 {
			r = answer("echoed")
		}
		r.Model = "test-model"
		return r
	}}
	_, c, rcv, tracing := tracedStack(t, m, []string{agentURL})
	cid := c.newConversation()
	tid := c.send(cid, "echo x")
	v := c.wait(cid, tid)
	if v.Status != "succeeded" || v.LLMCalls != 2 {
		t.Fatalf("turn = %s with %d LLM calls (%s), want succeeded with 2", v.Status, v.LLMCalls, v.Reply)
	}

	// The step that ended the turn exports its root span just after the
	// turn's record says so.
	var roots []*tracepb.Span
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := tracing.Flush(t.Context()); err != nil {
			t.Fatalf("Flush() error = %v", err)
		}
		if roots = rcv.turnSpans(tid); len(roots) > 0 {
			break
		}
	}
	if len(roots) != 1 {
		t.Fatalf("turn spans of %s = %d, want 1", tid, len(roots))
	}
	root := roots[0]
	if len(root.ParentSpanId) != 0 {
		t.Errorf("turn span has parent %x, want none (the root)", root.ParentSpanId)
	}
	if got := attr(root.Attributes, "clientagent.status"); got != "succeeded" {
		t.Errorf("turn span status = %q, want succeeded", got)
	}
	if got := attr(root.Attributes, "gen_ai.operation.name"); got != "invoke_agent" {
		t.Errorf("turn span gen_ai.operation.name = %q, want invoke_agent", got)
	}
	spans := rcv.trace(root.TraceId)
	byID := map[string]*tracepb.Span{}
	count := map[string]int{}
	for _, s := range spans {
		byID[hex.EncodeToString(s.SpanId)] = s
		count[s.Name]++
	}
	parentName := func(s *tracepb.Span) string {
		if p, ok := byID[hex.EncodeToString(s.ParentSpanId)]; ok {
			return p.Name
		}
		return ""
	}
	// Every span of the turn is in this one trace.
	rcv.mu.Lock()
	for _, s := range rcv.spans {
		if attr(s.Attributes, "clientagent.turn.id") == tid && !bytes.Equal(s.TraceId, root.TraceId) {
			t.Errorf("span %s of turn %s is in trace %x, want %x", s.Name, tid, s.TraceId, root.TraceId)
		}
	}
	rcv.mu.Unlock()
	// The batch of one call went straight from its LLM step to its call,
	// whose outcome appended it: no ValidateBatch or AppendResults ran.
	wantSteps := map[string]int{
		telemetry.SpanStartTurn: 1, telemetry.SpanLLMStep: 2, telemetry.SpanValidateBatch: 0,
		telemetry.SpanInvokeCall: 1, telemetry.SpanAppendResults: 0,
	}
	for name, n := range wantSteps {
		if count[name] != n {
			t.Errorf("%s spans = %d, want %d (spans: %v)", name, count[name], n, count)
		}
	}
	var chats, tools int
	for _, s := range spans {
		switch {
		case wantSteps[s.Name] > 0:
			if parentName(s) != telemetry.SpanTurn {
				t.Errorf("%s's parent = %q, want the turn span", s.Name, parentName(s))
			}
		case strings.HasPrefix(s.Name, "chat"):
			chats++
			if s.Name != "chat test-model" || attr(s.Attributes, "gen_ai.request.model") != "test-model" {
				t.Errorf("chat span %q with gen_ai.request.model %q, want chat test-model", s.Name, attr(s.Attributes, "gen_ai.request.model"))
			}
			if parentName(s) != telemetry.SpanLLMStep {
				t.Errorf("chat span's parent = %q, want LLMStep", parentName(s))
			}
			if attr(s.Attributes, "gen_ai.operation.name") != "chat" || attr(s.Attributes, "gen_ai.usage.input_tokens") != "100" || attr(s.Attributes, "gen_ai.usage.output_tokens") != "10" {
				t.Errorf("chat span attributes = %v, want operation chat and 100/10 tokens", s.Attributes)
			}
			if attr(s.Attributes, "gen_ai.input.messages") != "" {
				t.Error("chat span records the messages without content capture")
			}
		case s.Name == "execute_tool slow_echo":
			tools++
			if parentName(s) != telemetry.SpanInvokeCall {
				t.Errorf("execute_tool span's parent = %q, want InvokeCall", parentName(s))
			}
			if attr(s.Attributes, "gen_ai.tool.name") != "slow_echo" || attr(s.Attributes, "gen_ai.tool.call.id") != "call_"+tid+"_1" ||
				attr(s.Attributes, "clientagent.status") != "succeeded" || attr(s.Attributes, "url.full") != agentURL+"/" {
				t.Errorf("execute_tool span attributes = %v", s.Attributes)
			}
			mu.Lock()
			got := append([]string(nil), traceparents...)
			mu.Unlock()
			want := "00-" + hex.EncodeToString(root.TraceId) + "-" + hex.EncodeToString(s.SpanId) + "-01"
			if len(got) != 1 || got[0] != want {
				t.Errorf("traceparents the specialist received = %q, want [%s] (the execute_tool span)", got, want)
			}
		}
	}
	if chats != v.LLMCalls {
		t.Errorf("chat spans = %d, want one per LLM call (%d)", chats, v.LLMCalls)
	}
	if tools != 1 {
		t.Errorf("execute_tool spans = %d, want 1", tools)
	}
	t.Logf("trace %x: %d spans %v", root.TraceId, len(spans), count)
}

// BenchmarkOneToolTurnTraced is BenchmarkOneToolTurn with every span
// exported to an in-process OTLP receiver (docs/benchmarks.md: the
// overhead of tracing).
func BenchmarkOneToolTurnTraced(b *testing.B) {
	ag := &slowAgent{noTasks: true}
	url := serveAgent(b, ag)
	rcv := startOTLP(b)
	env := map[string]string{telemetry.EnvEndpoint: rcv.url}
	tracing, err := telemetry.FromEnv(b.Context(), func(k string) string { return env[k] }, telemetry.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer tracing.Shutdown(b.Context())
	benchTurns(b, oneToolModel, []string{url}, func(c *Config) { c.Tracing = tracing })
	b.StopTimer()
	_ = tracing.Flush(b.Context())
	rcv.mu.Lock()
	b.ReportMetric(float64(len(rcv.spans))/float64(b.N), "spans/turn")
	rcv.mu.Unlock()
}

// The user's wait is the AwaitUser span: from the moment the approval was
// stored to the moment the reply was applied, a child of the turn. The demo
// agents, which speak OTel, add their server span under each execute_tool.
func TestTurnTraceAwaitUser(t *testing.T) {
	t.Parallel()
	_, c, rcv, tracing := tracedStack(t, publishModel(), nil)
	cid := c.newConversation()
	tid := c.send(cid, "Make a Hello SVG and publish it to web")
	if v := c.wait(cid, tid); v.Status != "awaiting_approval" {
		t.Fatalf("status = %s, want awaiting_approval", v.Status)
	}
	const wait = 100 * time.Millisecond
	time.Sleep(wait)
	if code := c.decide(cid, tid, "approve", nil); code != http.StatusAccepted {
		t.Fatalf("approve = %d, want 202", code)
	}
	if v := c.wait(cid, tid); v.Status != "succeeded" {
		t.Fatalf("status = %s, want succeeded", v.Status)
	}
	var roots []*tracepb.Span
	for deadline := time.Now().Add(60 * time.Second); len(roots) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		_ = tracing.Flush(t.Context())
		roots = rcv.turnSpans(tid)
	}
	if len(roots) != 1 {
		t.Fatalf("turn spans = %d, want 1", len(roots))
	}
	root := roots[0]
	byID := map[string]*tracepb.Span{}
	var awaits, tools, servers []*tracepb.Span
	for _, s := range rcv.trace(root.TraceId) {
		byID[hex.EncodeToString(s.SpanId)] = s
		switch {
		case s.Name == telemetry.SpanAwaitUser:
			awaits = append(awaits, s)
		case strings.HasPrefix(s.Name, "execute_tool "):
			tools = append(tools, s)
		case strings.HasPrefix(s.Name, "POST /agents/"):
			servers = append(servers, s)
		}
	}
	if len(awaits) != 1 {
		t.Fatalf("AwaitUser spans = %d, want 1", len(awaits))
	}
	a := awaits[0]
	if !bytes.Equal(a.ParentSpanId, root.SpanId) || attr(a.Attributes, "clientagent.reply") != "approve" {
		t.Errorf("AwaitUser parent %x reply %q, want the turn %x and approve", a.ParentSpanId, attr(a.Attributes, "clientagent.reply"), root.SpanId)
	}
	if d := time.Duration(a.EndTimeUnixNano - a.StartTimeUnixNano); d < wait {
		t.Errorf("AwaitUser lasted %v, want at least the %v the user took", d, wait)
	}
	if len(tools) != 2 || len(servers) != 2 {
		t.Fatalf("execute_tool spans = %d, agent server spans = %d, want 2 and 2", len(tools), len(servers))
	}
	for _, s := range servers {
		if p := byID[hex.EncodeToString(s.ParentSpanId)]; p == nil || !strings.HasPrefix(p.Name, "execute_tool ") {
			t.Errorf("agent span %s's parent is not an execute_tool span", s.Name)
		}
	}
}
