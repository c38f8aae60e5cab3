// Package telemetry is clientagent's OpenTelemetry tracing: a tracer
// provider configured the standard way (OTEL_* variables), one trace per
// turn whose context travels as a W3C traceparent (in the execution's
// input, in A2A requests), and the few helpers the steps need to make it
// one coherent trace across processes. It records nothing itself: pkg/turn,
// pkg/api, pkg/agents and pkg/demoagents make the spans. With no exporter
// configured it hands out OpenTelemetry's no-op provider, which costs
// nothing and exports nothing.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/clientagent/clientagent/pkg/telemetry/otlphttp"
)

// ScopeName is the instrumentation scope of clientagent's spans.
const ScopeName = "github.com/clientagent/clientagent"

// Environment variables read by FromEnv (the OpenTelemetry SDK's own names).
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"        // base URL; /v1/traces is appended
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" // full URL of the traces endpoint
	EnvTracesExporter = "OTEL_TRACES_EXPORTER"               // otlp (default) or none
	EnvSDKDisabled    = "OTEL_SDK_DISABLED"                  // true: no tracing at all
	EnvServiceName    = "OTEL_SERVICE_NAME"
	EnvSampler        = "OTEL_TRACES_SAMPLER"
	EnvSamplerArg     = "OTEL_TRACES_SAMPLER_ARG"
	// EnvCaptureContent records prompts, completions, tool arguments and
	// results on the spans when "true" (the GenAI conventions' opt-in).
	EnvCaptureContent = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
)

// Tracing is the process's tracer provider and how spans are recorded. The
// zero value and nil are valid: no tracing (OpenTelemetry's no-op provider).
type Tracing struct {
	// Provider makes the tracers (never nil once built by FromEnv or New).
	Provider trace.TracerProvider
	// CaptureContent records message and tool-call content on spans.
	CaptureContent bool

	sdk    *sdktrace.TracerProvider
	tracer trace.Tracer
}

// Options are what FromEnv cannot read from the environment.
type Options struct {
	// ServiceName is service.name when OTEL_SERVICE_NAME is not set
	// (default "clientagent").
	ServiceName string
	// HTTPClient sends the OTLP requests (nil: the exporter's own), e.g.
	// one signing them with SigV4 for X-Ray's OTLP endpoint (SigV4Client).
	HTTPClient *http.Client
	// Attributes are added to the resource (e.g. faas.name).
	Attributes []attribute.KeyValue
}

// Disabled is a Tracing that records nothing.
func Disabled() *Tracing { return &Tracing{Provider: noop.NewTracerProvider()} }

// FromEnv builds the tracer provider the environment getenv reads asks for:
// an OTLP/HTTP (protobuf) exporter to OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT + "/v1/traces", with service.name from
// OTEL_SERVICE_NAME, the sampler of OTEL_TRACES_SAMPLER (default
// parentbased_always_on) and the OTLP headers, timeout and compression of
// OTEL_EXPORTER_OTLP_HEADERS … (otlphttp.ConfigFromEnv). With neither endpoint set, with
// OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true, it returns Disabled():
// nothing is exported and nothing is spent. Spans are batched; a process
// that may be frozen between requests (Lambda) calls Flush after each.
func FromEnv(ctx context.Context, getenv func(string) string, opts Options) (*Tracing, error) {
	capture := strings.EqualFold(strings.TrimSpace(getenv(EnvCaptureContent)), "true")
	// The switch also decides whether the turn record keeps each LLM
	// call's content for its inspector (Recording), exported or not.
	off := func() *Tracing {
		t := Disabled()
		t.CaptureContent = capture
		return t
	}
	if strings.EqualFold(getenv(EnvSDKDisabled), "true") {
		return off(), nil
	}
	switch exp := strings.TrimSpace(getenv(EnvTracesExporter)); exp {
	case "", "otlp":
	case "none":
		return off(), nil
	default:
		return nil, fmt.Errorf("%s=%q: only otlp (http/protobuf) or none", EnvTracesExporter, exp)
	}
	endpoint := TracesEndpoint(getenv)
	if endpoint == "" {
		return off(), nil
	}
	if _, err := url.Parse(endpoint); err != nil {
		return nil, fmt.Errorf("OTLP traces endpoint %q: %w", endpoint, err)
	}
	sampler, err := samplerFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	ecfg, err := otlphttp.ConfigFromEnv(endpoint, getenv)
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter: %w", err)
	}
	ecfg.HTTPClient = opts.HTTPClient
	exp, err := otlphttp.New(ecfg)
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter: %w", err)
	}
	name := getenv(EnvServiceName)
	if name == "" {
		name = opts.ServiceName
	}
	t := New(exp, sampler, name, opts.Attributes...)
	t.CaptureContent = capture
	return t, nil
}

// TracesEndpoint is the OTLP traces URL the environment names, "" for none.
func TracesEndpoint(getenv func(string) string) string {
	if u := strings.TrimSpace(getenv(EnvTracesEndpoint)); u != "" {
		return u
	}
	if u := strings.TrimSpace(getenv(EnvEndpoint)); u != "" {
		return strings.TrimRight(u, "/") + "/v1/traces"
	}
	return ""
}

// New is a Tracing exporting through exp with a batching span processor
// (nil sampler: parent-based always-on).
func New(exp sdktrace.SpanExporter, sampler sdktrace.Sampler, serviceName string, attrs ...attribute.KeyValue) *Tracing {
	if serviceName == "" {
		serviceName = "clientagent"
	}
	if sampler == nil {
		sampler = sdktrace.ParentBased(sdktrace.AlwaysSample())
	}
	res := resource.NewSchemaless(append([]attribute.KeyValue{attribute.String("service.name", serviceName)}, attrs...)...)
	sdk := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(time.Second)),
		sdktrace.WithSampler(sampler),
		sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(idGenerator{}),
	)
	return &Tracing{Provider: sdk, sdk: sdk}
}

// Enabled reports whether spans are exported.
func (t *Tracing) Enabled() bool { return t != nil && t.sdk != nil }

// Tracer is clientagent's tracer (a no-op one when t is nil).
func (t *Tracing) Tracer() trace.Tracer {
	if t == nil || t.Provider == nil {
		return noopTracer
	}
	if t.tracer == nil {
		t.tracer = t.Provider.Tracer(ScopeName)
	}
	return t.tracer
}

var noopTracer = noop.NewTracerProvider().Tracer(ScopeName)

// Capture reports whether content (messages, arguments, results) may be
// recorded on spans.
func (t *Tracing) Capture() bool { return t.Enabled() && t.CaptureContent }

// Recording reports whether the operator turned content capture on
// (EnvCaptureContent), whether traces are exported or not: then the turn
// record keeps what each LLM call sent and got, for its owner's inspector.
func (t *Tracing) Recording() bool { return t != nil && t.CaptureContent }

// Flush exports the spans ended so far and waits for it: Lambda freezes
// the process after each invocation, and a batch left behind would go out
// only at the next one, or never.
func (t *Tracing) Flush(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	return t.sdk.ForceFlush(ctx)
}

// Shutdown flushes and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	return t.sdk.Shutdown(ctx)
}

// samplerFromEnv is the sampler OTEL_TRACES_SAMPLER names (the SDK's own
// values), read through getenv.
func samplerFromEnv(getenv func(string) string) (sdktrace.Sampler, error) {
	name := strings.ToLower(strings.TrimSpace(getenv(EnvSampler)))
	ratio := 1.0
	if arg := strings.TrimSpace(getenv(EnvSamplerArg)); arg != "" && strings.Contains(name, "traceidratio") {
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, fmt.Errorf("%s=%q: want a ratio in [0, 1]", EnvSamplerArg, arg)
		}
		ratio = r
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	}
	return nil, errors.New(EnvSampler + "=" + name + ": not a sampler this build knows (always_on, always_off, traceidratio, parentbased_*)")
}
