package telemetry

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// Without an endpoint, or with the SDK or the exporter turned off, tracing
// is the no-op provider: nothing is recorded, nothing costs.
func TestFromEnvDisabled(t *testing.T) {
	t.Parallel()
	for name, vars := range map[string]map[string]string{
		"nothing set":   {},
		"exporter none": {EnvEndpoint: "http://127.0.0.1:4318", EnvTracesExporter: "none"},
		"sdk disabled":  {EnvEndpoint: "http://127.0.0.1:4318", EnvSDKDisabled: "true"},
	} {
		tr, err := FromEnv(t.Context(), env(vars), Options{})
		if err != nil {
			t.Fatalf("%s: FromEnv() error = %v", name, err)
		}
		if tr.Enabled() {
			t.Errorf("%s: Enabled() = true, want false", name)
		}
		ctx, tp := tr.StartTurn(t.Context())
		if tp != "" || trace.SpanContextFromContext(ctx).IsValid() {
			t.Errorf("%s: StartTurn() = %q, want no trace", name, tp)
		}
		if _, span := tr.Tracer().Start(t.Context(), "x"); span.IsRecording() {
			t.Errorf("%s: a span records with tracing off", name)
		}
	}
}

func TestFromEnvErrors(t *testing.T) {
	t.Parallel()
	for name, vars := range map[string]map[string]string{
		"grpc exporter": {EnvEndpoint: "http://127.0.0.1:4318", EnvTracesExporter: "zipkin"},
		"bad sampler":   {EnvEndpoint: "http://127.0.0.1:4318", EnvSampler: "sometimes"},
		"bad ratio":     {EnvEndpoint: "http://127.0.0.1:4318", EnvSampler: "traceidratio", EnvSamplerArg: "2"},
	} {
		if _, err := FromEnv(t.Context(), env(vars), Options{}); err == nil {
			t.Errorf("%s: FromEnv() error = nil, want one", name)
		}
	}
}

func TestTracesEndpoint(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{}, ""},
		{map[string]string{EnvEndpoint: "http://c:4318/"}, "http://c:4318/v1/traces"},
		{map[string]string{EnvEndpoint: "http://c:4318", EnvTracesEndpoint: "https://x/v1/t"}, "https://x/v1/t"},
	} {
		if got := TracesEndpoint(env(tt.vars)); got != tt.want {
			t.Errorf("TracesEndpoint(%v) = %q, want %q", tt.vars, got, tt.want)
		}
	}
}

// The root span StartTurn chose the ids of is exported by EndTurn, in
// another process, with those ids, as the parent of the steps' spans.
func TestTurnRootSpanAcrossProcesses(t *testing.T) {
	t.Parallel()
	api := New(tracetest.NewInMemoryExporter(), nil, "api")
	_, tp := api.StartTurn(t.Context())
	sc, ok := ParseTraceparent(tp)
	if !ok || !sc.IsSampled() {
		t.Fatalf("StartTurn() traceparent = %q, want a sampled one", tp)
	}
	if sec := int64(sc.TraceID()[0])<<24 | int64(sc.TraceID()[1])<<16 | int64(sc.TraceID()[2])<<8 | int64(sc.TraceID()[3]); time.Since(time.Unix(sec, 0)).Abs() > time.Minute {
		t.Errorf("trace id %s does not start with the time (X-Ray)", sc.TraceID())
	}

	exp := tracetest.NewInMemoryExporter()
	step := New(exp, nil, "llmstep")
	_, span := step.Tracer().Start(step.Remote(t.Context(), tp), SpanLLMStep)
	span.End()
	start := time.Now().Add(-time.Minute)
	step.EndTurn(t.Context(), tp, start, time.Now(), "")
	if err := step.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans()
	if len(spans) != 2 {
		t.Fatalf("exported %d spans, want 2", len(spans))
	}
	child, root := spans[0], spans[1]
	if root.Name != SpanTurn || root.SpanContext.SpanID() != sc.SpanID() || root.SpanContext.TraceID() != sc.TraceID() || root.Parent.IsValid() {
		t.Errorf("root = %s %s parent %v, want %s with the ids of %s and no parent", root.Name, root.SpanContext.SpanID(), root.Parent.SpanID(), SpanTurn, tp)
	}
	if !root.StartTime.Equal(start) {
		t.Errorf("root starts at %v, want %v", root.StartTime, start)
	}
	if child.Parent.SpanID() != sc.SpanID() || child.SpanContext.TraceID() != sc.TraceID() {
		t.Errorf("step span's parent = %s, want the root %s", child.Parent.SpanID(), sc.SpanID())
	}
	// Only EndTurn's span gets the fixed ids.
	_, other := step.Tracer().Start(step.Remote(t.Context(), tp), "other")
	if other.SpanContext().SpanID() == sc.SpanID() {
		t.Error("a later span reused the root's span id")
	}
}

func TestEndTurnNotSampled(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tr := New(exp, sdktrace.ParentBased(sdktrace.AlwaysSample()), "x")
	tr.EndTurn(context.Background(), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", time.Now(), time.Now(), "")
	tr.EndTurn(context.Background(), "not a traceparent", time.Now(), time.Now(), "")
	_ = tr.Flush(context.Background())
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("exported %d spans for an unsampled or invalid turn, want 0", n)
	}
}

func TestXRayTraceHeader(t *testing.T) {
	t.Parallel()
	sc, _ := ParseTraceparent("00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01")
	want := "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	if got := XRayTraceHeader(sc); got != want {
		t.Errorf("XRayTraceHeader() = %q, want %q", got, want)
	}
}

func TestInjectExtract(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	Inject(t.Context(), h)
	if len(h) != 0 {
		t.Errorf("Inject without a span wrote %v", h)
	}
	tp := "00-5759e988bd862e3fe1be46a994272793-53995c3f42cd8ad8-01"
	sc, _ := ParseTraceparent(tp)
	Inject(trace.ContextWithSpanContext(t.Context(), sc), h)
	if got := h.Get("traceparent"); got != tp {
		t.Errorf("traceparent = %q, want %q", got, tp)
	}
	if got := trace.SpanContextFromContext(Extract(t.Context(), h)); got.TraceID() != sc.TraceID() || !got.IsRemote() {
		t.Errorf("Extract() = %v, want the remote %v", got, sc)
	}
}

func TestXRayRegion(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{
		"https://xray.eu-west-1.amazonaws.com/v1/traces":              "eu-west-1",
		"https://xray.cn-north-1.amazonaws.com.cn/v1/traces":          "cn-north-1",
		"http://xray.eu-west-1.amazonaws.com/v1/traces":               "",
		"https://xray.eu-west-1.amazonaws.com.evil.example/v1/traces": "",
		"https://collector.example.com/v1/traces":                     "",
		"http://127.0.0.1:4318/v1/traces":                             "",
	} {
		got, ok := XRayRegion(url)
		if got != want || ok != (want != "") {
			t.Errorf("XRayRegion(%q) = %q, %v, want %q", url, got, ok, want)
		}
	}
}

func TestTraceparentInvalid(t *testing.T) {
	t.Parallel()
	if got := Traceparent(trace.SpanContext{}); got != "" {
		t.Errorf("Traceparent(invalid) = %q, want empty", got)
	}
	if _, ok := ParseTraceparent(strings.Repeat("0", 55)); ok {
		t.Error("ParseTraceparent(zeros) ok, want not")
	}
}
