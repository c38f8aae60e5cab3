package telemetry

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// A turn is one trace. Its root span, "turn", covers the turn from the
// API's request to the step that ends it, but those are different
// processes (different Lambdas, hours apart when the turn waits for the
// user). So the API only chooses the root's ids (StartTurn) and passes them
// on as a traceparent; every step's span is a child of that span id; and
// the step that ends the turn exports the root span itself with the same
// ids and the turn's start time (EndTurn). The ids come from this
// package's ID generator, which the tracer provider of New uses.

// propagator is W3C Trace Context: traceparent (and tracestate).
var propagator = propagation.TraceContext{}

// Traceparent is sc as a W3C traceparent header value, "" when sc is not valid.
func Traceparent(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	return fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags())
}

// ParseTraceparent reads a W3C traceparent; ok is false for "" or a value
// that is not one.
func ParseTraceparent(tp string) (trace.SpanContext, bool) {
	if tp == "" {
		return trace.SpanContext{}, false
	}
	ctx := propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	sc := trace.SpanContextFromContext(ctx)
	return sc, sc.IsValid()
}

// Remote returns ctx whose parent span is the one traceparent names (a
// span of another process); ctx unchanged when tp is empty or invalid, or
// when tracing is off (no span would use it, and a no-op tracer would only
// carry it along).
func (t *Tracing) Remote(ctx context.Context, tp string) context.Context {
	if !t.Enabled() {
		return ctx
	}
	if sc, ok := ParseTraceparent(tp); ok {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return ctx
}

// Inject writes the traceparent of ctx's span into h (nothing when ctx has
// no valid span), so the server of an outgoing request joins the trace.
func Inject(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		propagator.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// Extract returns ctx with the remote span context of h's traceparent.
func Extract(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// StartTurn chooses the ids of a new turn's root span, with the sampler's
// decision, and returns ctx with that span as parent and its traceparent
// ("" when tracing is off). The span itself is never ended here: EndTurn
// exports it when the turn ends.
func (t *Tracing) StartTurn(ctx context.Context) (context.Context, string) {
	if !t.Enabled() {
		return ctx, ""
	}
	_, span := t.Tracer().Start(ctx, SpanTurn, trace.WithNewRoot())
	// Only its ids (and the sampler's decision) are needed: a span that is
	// not ended is never exported.
	sc := span.SpanContext()
	return trace.ContextWithSpanContext(ctx, sc), Traceparent(sc)
}

// EndTurn exports the root span of the turn whose traceparent is tp: the
// span StartTurn chose the ids of, from start to end, with attrs, and an
// error status when failed is not "". It does nothing when tracing is off,
// tp is not valid, or the turn was not sampled.
func (t *Tracing) EndTurn(ctx context.Context, tp string, start, end time.Time, failed string, attrs ...attribute.KeyValue) {
	if !t.Enabled() {
		return
	}
	sc, ok := ParseTraceparent(tp)
	if !ok || !sc.IsSampled() {
		return
	}
	ctx = context.WithValue(ctx, fixedIDsKey{}, sc)
	_, span := t.Tracer().Start(ctx, SpanTurn, trace.WithNewRoot(), trace.WithTimestamp(start),
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	if failed != "" {
		span.SetStatus(codes.Error, failed)
	}
	span.End(trace.WithTimestamp(end))
}

// XRayTraceHeader is sc as an X-Ray trace header (Root=1-…;Parent=…;
// Sampled=…), for Step Functions' StartExecution: the execution's and its
// Lambdas' X-Ray segments then carry the same trace id as the OTel spans.
// The generator puts the time in the id's first 4 bytes, as X-Ray wants.
func XRayTraceHeader(sc trace.SpanContext) string {
	if !sc.IsValid() {
		return ""
	}
	id := sc.TraceID().String()
	sampled := 0
	if sc.IsSampled() {
		sampled = 1
	}
	return fmt.Sprintf("Root=1-%s-%s;Parent=%s;Sampled=%d", id[:8], id[8:], sc.SpanID(), sampled)
}

// Span names of a turn's trace: the root, the state machine's steps, and
// the user's wait.
const (
	SpanTurn          = "turn"
	SpanStartTurn     = "StartTurn"
	SpanLLMStep       = "LLMStep"
	SpanFailTurn      = "FailTurn"
	SpanValidateBatch = "ValidateBatch"
	SpanAwaitUser     = "AwaitUser"
	SpanInvokeCall    = "InvokeCall"
	SpanAppendResults = "AppendResults"
	SpanCancel        = "CancelTurn"
)

// fixedIDsKey carries the ids EndTurn's span must have.
type fixedIDsKey struct{}

// idGenerator makes X-Ray-compatible trace ids (the first 4 bytes are the
// Unix time in seconds, the rest random; a valid W3C id too) and random
// span ids, except for a span started with fixed ids in its context
// (EndTurn's), which gets those.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if sc, ok := ctx.Value(fixedIDsKey{}).(trace.SpanContext); ok {
		return sc.TraceID(), sc.SpanID()
	}
	var tid trace.TraceID
	binary.BigEndian.PutUint32(tid[:4], uint32(time.Now().Unix()))
	_, _ = crand.Read(tid[4:])
	return tid, randomSpanID()
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if sc, ok := ctx.Value(fixedIDsKey{}).(trace.SpanContext); ok {
		return sc.SpanID()
	}
	return randomSpanID()
}

func randomSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		_, _ = crand.Read(sid[:])
	}
	return sid
}
