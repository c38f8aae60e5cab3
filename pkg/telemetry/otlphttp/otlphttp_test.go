package otlphttp_test

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/clientagent/clientagent/pkg/telemetry/otlphttp"
)

// collector is an OTLP/HTTP receiver: it answers with the scripted
// statuses in order (the last repeats) and decodes every request body with
// the collector's own message type, the oracle of the encoding.
type collector struct {
	t        *testing.T
	mu       sync.Mutex
	statuses []int
	requests []*coltracepb.ExportTraceServiceRequest
	headers  []http.Header
	url      string
}

func newCollector(t *testing.T, statuses ...int) *collector {
	c := &collector{t: t, statuses: statuses}
	srv := httptest.NewServer(http.HandlerFunc(c.handle))
	t.Cleanup(srv.Close)
	c.url = srv.URL + "/v1/traces"
	return c
}

func (c *collector) handle(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			c.t.Errorf("gzip: %v", err)
			return
		}
		body = zr
	}
	b, _ := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		c.t.Errorf("request body is not an ExportTraceServiceRequest: %v", err)
	}
	c.mu.Lock()
	n := len(c.requests)
	c.requests = append(c.requests, &req)
	c.headers = append(c.headers, r.Header.Clone())
	status := http.StatusOK
	if len(c.statuses) > 0 {
		status = c.statuses[min(n, len(c.statuses)-1)]
	}
	c.mu.Unlock()
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "0")
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, http.StatusText(status))
}

func (c *collector) got() ([]*coltracepb.ExportTraceServiceRequest, []http.Header) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests, c.headers
}

// recordSpans makes a parent and a child span (kind, attributes of each
// type, an event, an error status, a link) with a provider exporting
// through exp at each span's end.
func recordSpans(t *testing.T, exp sdktrace.SpanExporter) (parent, child trace.SpanContext) {
	t.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "llmstep"))))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr := tp.Tracer("github.com/clientagent/clientagent", trace.WithInstrumentationVersion("v1"))
	ctx, p := tr.Start(t.Context(), "turn", trace.WithSpanKind(trace.SpanKindServer))
	_, c := tr.Start(ctx, "chat gpt-test", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithLinks(trace.Link{SpanContext: p.SpanContext(), Attributes: []attribute.KeyValue{attribute.String("why", "test")}}),
		trace.WithAttributes(
			attribute.String("gen_ai.request.model", "gpt-test"),
			attribute.Int("gen_ai.usage.input_tokens", 812),
			attribute.Bool("cached", true),
			attribute.Float64("ratio", 0.5),
			attribute.StringSlice("gen_ai.response.finish_reasons", []string{"stop", "tool_calls"}),
		))
	c.AddEvent("retry", trace.WithAttributes(attribute.Int("attempt", 2)))
	c.SetStatus(codes.Error, "rate limited")
	c.End()
	p.End()
	return p.SpanContext(), c.SpanContext()
}

// The spans arrive as the collector decodes them: resource, scope, ids,
// parentage, kind, attributes, event, status and link intact.
func TestExportSpans(t *testing.T) {
	t.Parallel()
	col := newCollector(t)
	exp, err := otlphttp.New(otlphttp.Config{URL: col.url})
	if err != nil {
		t.Fatal(err)
	}
	parent, child := recordSpans(t, exp)
	reqs, headers := col.got()
	if len(reqs) != 2 {
		t.Fatalf("collector got %d requests, want 2 (one per span end)", len(reqs))
	}
	if ct := headers[0].Get("Content-Type"); ct != "application/x-protobuf" {
		t.Errorf("Content-Type = %q, want application/x-protobuf", ct)
	}
	rs := reqs[0].GetResourceSpans()
	if len(rs) != 1 || len(rs[0].GetScopeSpans()) != 1 || len(rs[0].GetScopeSpans()[0].GetSpans()) != 1 {
		t.Fatalf("first request = %v, want one resource, scope and span", reqs[0])
	}
	res := rs[0].GetResource().GetAttributes()
	if len(res) != 1 || res[0].GetKey() != "service.name" || res[0].GetValue().GetStringValue() != "llmstep" {
		t.Errorf("resource attributes = %v, want service.name=llmstep", res)
	}
	scope := rs[0].GetScopeSpans()[0].GetScope()
	if scope.GetName() != "github.com/clientagent/clientagent" || scope.GetVersion() != "v1" {
		t.Errorf("scope = %v, want clientagent's, version v1", scope)
	}
	s := rs[0].GetScopeSpans()[0].GetSpans()[0]
	ctid, csid, psid := child.TraceID(), child.SpanID(), parent.SpanID()
	type ids struct{ Trace, Span, Parent []byte }
	if diff := cmp.Diff(ids{ctid[:], csid[:], psid[:]}, ids{s.GetTraceId(), s.GetSpanId(), s.GetParentSpanId()}); diff != "" {
		t.Errorf("span ids (-want +got):\n%s", diff)
	}
	if s.GetName() != "chat gpt-test" || s.GetKind() != tracepb.Span_SPAN_KIND_CLIENT {
		t.Errorf("span = %q kind %v, want chat gpt-test, client", s.GetName(), s.GetKind())
	}
	if s.GetStartTimeUnixNano() == 0 || s.GetEndTimeUnixNano() < s.GetStartTimeUnixNano() {
		t.Errorf("span times %d..%d, want a start and an end after it", s.GetStartTimeUnixNano(), s.GetEndTimeUnixNano())
	}
	attrs := map[string]string{}
	for _, kv := range s.GetAttributes() {
		attrs[kv.GetKey()] = kv.GetValue().String()
	}
	for _, kv := range s.GetAttributes() {
		v := kv.GetValue()
		var ok bool
		switch kv.GetKey() {
		case "gen_ai.request.model":
			ok = v.GetStringValue() == "gpt-test"
		case "gen_ai.usage.input_tokens":
			ok = v.GetIntValue() == 812
		case "cached":
			ok = v.GetBoolValue()
		case "ratio":
			ok = v.GetDoubleValue() == 0.5
		case "gen_ai.response.finish_reasons":
			a := v.GetArrayValue().GetValues()
			ok = len(a) == 2 && a[0].GetStringValue() == "stop" && a[1].GetStringValue() == "tool_calls"
		}
		if !ok {
			t.Errorf("attribute %s = %v, want what was recorded", kv.GetKey(), v)
		}
	}
	if len(attrs) != 5 {
		t.Errorf("span has %d attributes, want 5: %v", len(attrs), attrs)
	}
	if ev := s.GetEvents(); len(ev) != 1 || ev[0].GetName() != "retry" || ev[0].GetAttributes()[0].GetValue().GetIntValue() != 2 {
		t.Errorf("events = %v, want retry with attempt=2", ev)
	}
	if st := s.GetStatus(); st.GetCode() != tracepb.Status_STATUS_CODE_ERROR || st.GetMessage() != "rate limited" {
		t.Errorf("status = %v, want error: rate limited", st)
	}
	if l := s.GetLinks(); len(l) != 1 || string(l[0].GetSpanId()) != string(psid[:]) || l[0].GetAttributes()[0].GetKey() != "why" {
		t.Errorf("links = %v, want the parent with why=test", l)
	}
	if s.GetFlags()&uint32(tracepb.SpanFlags_SPAN_FLAGS_TRACE_FLAGS_MASK) != uint32(trace.FlagsSampled) {
		t.Errorf("flags = %#x, want the sampled flag", s.GetFlags())
	}
	if p := reqs[1].GetResourceSpans()[0].GetScopeSpans()[0].GetSpans()[0]; len(p.GetParentSpanId()) != 0 || p.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("root span = %v, want no parent, kind server", p)
	}
}

// OTEL_EXPORTER_OTLP_* variables: headers (URL-encoded values), timeout,
// gzip; the traces-specific one wins.
func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		want    otlphttp.Config
		wantErr string
	}{
		{name: "none", want: otlphttp.Config{URL: "u"}},
		{name: "headers, timeout, gzip", env: map[string]string{
			"OTEL_EXPORTER_OTLP_HEADERS":     "x-api-key=a%20b, tenant=t1",
			"OTEL_EXPORTER_OTLP_TIMEOUT":     "1500",
			"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
		}, want: otlphttp.Config{URL: "u", Headers: map[string]string{"x-api-key": "a b", "tenant": "t1"}, Timeout: 1500 * time.Millisecond, Gzip: true}},
		{name: "traces-specific wins", env: map[string]string{
			"OTEL_EXPORTER_OTLP_HEADERS": "a=1", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "b=2",
			"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "none",
		}, want: otlphttp.Config{URL: "u", Headers: map[string]string{"b": "2"}}},
		{name: "bad header", env: map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "novalue"}, wantErr: "not key=value"},
		{name: "bad timeout", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "10s"}, wantErr: "milliseconds"},
		{name: "bad compression", env: map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, wantErr: "gzip or none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := otlphttp.ConfigFromEnv("u", func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("ConfigFromEnv() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ConfigFromEnv() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ConfigFromEnv() (-want +got):\n%s", diff)
			}
		})
	}
}

// Headers go on every request; a gzip body decodes as the plain one.
func TestHeadersAndGzip(t *testing.T) {
	t.Parallel()
	col := newCollector(t)
	exp, err := otlphttp.New(otlphttp.Config{URL: col.url, Headers: map[string]string{"X-Api-Key": "k"}, Gzip: true})
	if err != nil {
		t.Fatal(err)
	}
	recordSpans(t, exp)
	reqs, headers := col.got()
	if len(reqs) != 2 || len(reqs[0].GetResourceSpans()) != 1 {
		t.Fatalf("collector got %d requests (%v), want 2 with spans", len(reqs), reqs)
	}
	if h := headers[0]; h.Get("X-Api-Key") != "k" || h.Get("Content-Encoding") != "gzip" {
		t.Errorf("headers = %v, want X-Api-Key and Content-Encoding gzip", h)
	}
}

// 503 is retried (after the server's Retry-After); 400 is final.
func TestRetry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		statuses     []int
		wantRequests int
		wantErr      string
	}{
		{"503 then 200", []int{503, 200}, 2, ""},
		{"400 is final", []int{400}, 1, "HTTP 400: Bad Request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			col := newCollector(t, tt.statuses...)
			exp, err := otlphttp.New(otlphttp.Config{URL: col.url})
			if err != nil {
				t.Fatal(err)
			}
			var spans []sdktrace.ReadOnlySpan
			rec := recorder{spans: &spans}
			recordSpans(t, rec)
			err = exp.ExportSpans(t.Context(), spans[:1])
			if reqs, _ := col.got(); len(reqs) != tt.wantRequests {
				t.Errorf("collector got %d requests, want %d", len(reqs), tt.wantRequests)
			}
			if tt.wantErr == "" && err != nil {
				t.Errorf("ExportSpans() error = %v, want success", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("ExportSpans() error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// The export's deadline ends retries against a server that stays down.
func TestExportGivesUpAtTheDeadline(t *testing.T) {
	t.Parallel()
	col := newCollector(t, 503)
	exp, err := otlphttp.New(otlphttp.Config{URL: col.url})
	if err != nil {
		t.Fatal(err)
	}
	var spans []sdktrace.ReadOnlySpan
	recordSpans(t, recorder{spans: &spans})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := exp.ExportSpans(ctx, spans); !errors.Is(err, context.Canceled) {
		t.Errorf("ExportSpans() error = %v, want context.Canceled", err)
	}
}

func TestNewRejectsBadURLs(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "localhost:4318", "ftp://x/v1/traces", "http:///v1/traces"} {
		if _, err := otlphttp.New(otlphttp.Config{URL: u}); err == nil {
			t.Errorf("New(%q) error = nil, want one", u)
		}
	}
}

// recorder is a span exporter keeping the spans it is given.
type recorder struct{ spans *[]sdktrace.ReadOnlySpan }

func (r recorder) ExportSpans(_ context.Context, s []sdktrace.ReadOnlySpan) error {
	*r.spans = append(*r.spans, s...)
	return nil
}

func (recorder) Shutdown(context.Context) error { return nil }
