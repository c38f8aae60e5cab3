package otlphttp

import (
	"bytes"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The exporter's body is byte for byte what proto.Marshal makes of the
// generated OTLP types for the same spans: every attribute type (zero,
// empty and nested values too), events, links, remote and local parents,
// dropped counts, trace state, statuses, several resources and scopes.
func TestEncodeMatchesTheGeneratedTypes(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		spans := randomSpans(rng)
		got, err := Encode(spans)
		if err != nil {
			t.Fatal(err)
		}
		var want []byte
		for _, rs := range oracleResourceSpans(spans) {
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(rs)
			if err != nil {
				t.Fatal(err)
			}
			want = protowire.AppendTag(want, 1, protowire.BytesType)
			want = protowire.AppendBytes(want, b)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d: %d spans encode to %d bytes, proto.Marshal to %d:\ngot  %x\nwant %x", round, len(spans), len(got), len(want), got, want)
		}
	}
	if b, _ := Encode(nil); len(b) != 0 {
		t.Errorf("no spans encode to %x, want nothing", b)
	}
}

// randomSpans are up to 6 spans of up to 2 resources and 3 scopes, each
// field set or left zero at random.
func randomSpans(rng *rand.Rand) []sdktrace.ReadOnlySpan {
	pick := func(n int) bool { return rng.IntN(n) == 0 }
	str := func() string {
		return []string{"", "a", "turn", "chat gpt-test", "ünïcode ✓", string(make([]byte, 200))}[rng.IntN(6)]
	}
	var value func(depth int) attribute.Value
	value = func(depth int) attribute.Value {
		n := rng.IntN(4)
		switch k := rng.IntN(12); {
		case k == 0:
			return attribute.BoolValue(pick(2))
		case k == 1:
			return attribute.Int64Value([]int64{0, 1, -1, 812, math.MaxInt64, math.MinInt64}[rng.IntN(6)])
		case k == 2:
			return attribute.Float64Value([]float64{0, 0.5, -2, math.Inf(1), math.MaxFloat64}[rng.IntN(5)])
		case k == 3:
			return attribute.StringValue(str())
		case k == 4:
			return attribute.ByteSliceValue([]byte(str()))
		case k == 5:
			return attribute.BoolSliceValue(make([]bool, n))
		case k == 6:
			return attribute.Int64SliceValue([]int64{-5, 0, 7}[:min(n, 3)])
		case k == 7:
			return attribute.Float64SliceValue([]float64{0, 1.25, -3}[:min(n, 3)])
		case k == 8:
			return attribute.StringSliceValue([]string{"stop", "", "tool_calls"}[:min(n, 3)])
		case k == 9 && depth < 2:
			vs := make([]attribute.Value, n)
			for i := range vs {
				vs[i] = value(depth + 1)
			}
			return attribute.SliceValue(vs...)
		case k == 10 && depth < 2:
			return attribute.MapValue(attrs(rng, n, func() attribute.Value { return value(depth + 1) })...)
		default:
			return attribute.Value{} // EMPTY
		}
	}
	some := func() []attribute.KeyValue {
		return attrs(rng, rng.IntN(5), func() attribute.Value { return value(0) })
	}
	resources := []*resource.Resource{
		resource.NewSchemaless(attribute.String("service.name", "llmstep")),
		resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0", attribute.String("service.name", "invoke"), attribute.Int("n", 0)),
		resource.Empty(),
	}
	scopes := []instrumentation.Scope{
		{},
		{Name: "github.com/clientagent/clientagent", Version: "v1"},
		{Name: "x", SchemaURL: "https://opentelemetry.io/schemas/1.26.0", Attributes: attribute.NewSet(attribute.Bool("b", false))},
	}
	sc := func(remote bool) trace.SpanContext {
		var tid trace.TraceID
		var sid trace.SpanID
		for i := range tid {
			tid[i] = byte(rng.IntN(256))
		}
		for i := range sid {
			sid[i] = byte(rng.IntN(256)) | 1
		}
		cfg := trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(rng.IntN(2)), Remote: remote}
		if pick(3) {
			ts, _ := trace.ParseTraceState("vendor=value,other=x")
			cfg.TraceState = ts
		}
		return trace.NewSpanContext(cfg)
	}
	base := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	stubs := make(tracetest.SpanStubs, 1+rng.IntN(6))
	for i := range stubs {
		s := tracetest.SpanStub{
			Name:                 str(),
			SpanContext:          sc(false),
			SpanKind:             trace.SpanKind(rng.IntN(7)),
			Attributes:           some(),
			DroppedAttributes:    rng.IntN(3),
			DroppedEvents:        rng.IntN(3),
			DroppedLinks:         rng.IntN(3),
			Resource:             resources[rng.IntN(len(resources))],
			InstrumentationScope: scopes[rng.IntN(len(scopes))],
			ChildSpanCount:       rng.IntN(3),
			Status:               sdktrace.Status{Code: codes.Code(rng.IntN(3)), Description: str()},
		}
		if !pick(4) {
			s.StartTime = base.Add(time.Duration(rng.IntN(1e9)))
			s.EndTime = s.StartTime.Add(time.Duration(rng.IntN(1e6)))
		}
		if !pick(3) {
			s.Parent = sc(pick(2))
		}
		for range rng.IntN(3) {
			s.Events = append(s.Events, sdktrace.Event{Name: str(), Time: base.Add(time.Duration(rng.IntN(1e6))), Attributes: some(), DroppedAttributeCount: rng.IntN(2)})
		}
		for range rng.IntN(3) {
			s.Links = append(s.Links, sdktrace.Link{SpanContext: sc(pick(2)), Attributes: some(), DroppedAttributeCount: rng.IntN(2)})
		}
		stubs[i] = s
	}
	return stubs.Snapshots()
}

func attrs(rng *rand.Rand, n int, value func() attribute.Value) []attribute.KeyValue {
	kvs := make([]attribute.KeyValue, n)
	for i := range kvs {
		kvs[i] = attribute.KeyValue{Key: attribute.Key([]string{"gen_ai.request.model", "k", "cached", "ratio"}[rng.IntN(4)] + string(rune('a'+i))), Value: value()}
	}
	return kvs
}

// The mapping of SDK spans onto the generated OTLP message types, field for
// field as OpenTelemetry's own OTLP exporters map them: the oracle of the
// hand-written encoding (wire.go), which TestEncodeMatchesTheGeneratedTypes
// holds byte for byte to proto.Marshal of what this builds.

// resourceSpans groups spans by resource, then by instrumentation scope,
// in the order they come.
func oracleResourceSpans(spans []sdktrace.ReadOnlySpan) []*tracepb.ResourceSpans {
	type scopeKey struct {
		res   attribute.Distinct
		scope instrumentation.Scope
	}
	var out []*tracepb.ResourceSpans
	byRes := map[attribute.Distinct]*tracepb.ResourceSpans{}
	byScope := map[scopeKey]*tracepb.ScopeSpans{}
	for _, s := range spans {
		if s == nil {
			continue
		}
		res := s.Resource()
		rk := res.Equivalent()
		rs, ok := byRes[rk]
		if !ok {
			rs = &tracepb.ResourceSpans{Resource: &resourcepb.Resource{Attributes: oracleIterValues(res.Iter())}, SchemaUrl: res.SchemaURL()}
			byRes[rk] = rs
			out = append(out, rs)
		}
		scope := s.InstrumentationScope()
		sk := scopeKey{rk, scope}
		ss, ok := byScope[sk]
		if !ok {
			ss = &tracepb.ScopeSpans{SchemaUrl: scope.SchemaURL}
			if scope != (instrumentation.Scope{}) {
				ss.Scope = &commonpb.InstrumentationScope{Name: scope.Name, Version: scope.Version, Attributes: oracleIterValues(scope.Attributes.Iter())}
			}
			byScope[sk] = ss
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, oracleSpan(s))
	}
	return out
}

func oracleSpan(s sdktrace.ReadOnlySpan) *tracepb.Span {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	st := s.Status()
	out := &tracepb.Span{
		TraceId:                tid[:],
		SpanId:                 sid[:],
		TraceState:             sc.TraceState().String(),
		Name:                   s.Name(),
		Kind:                   oracleSpanKind(s.SpanKind()),
		StartTimeUnixNano:      oracleUnixNano(s.StartTime().UnixNano()),
		EndTimeUnixNano:        oracleUnixNano(s.EndTime().UnixNano()),
		Attributes:             oracleKeyValues(s.Attributes()),
		DroppedAttributesCount: oracleCount(s.DroppedAttributes()),
		DroppedEventsCount:     oracleCount(s.DroppedEvents()),
		DroppedLinksCount:      oracleCount(s.DroppedLinks()),
		Status:                 &tracepb.Status{Code: oracleStatusCode(st.Code), Message: st.Description},
		Flags:                  oracleFlags(sc.TraceFlags(), s.Parent()),
	}
	if p := s.Parent().SpanID(); p.IsValid() {
		out.ParentSpanId = p[:]
	}
	for _, e := range s.Events() {
		out.Events = append(out.Events, &tracepb.Span_Event{
			Name: e.Name, TimeUnixNano: oracleUnixNano(e.Time.UnixNano()),
			Attributes: oracleKeyValues(e.Attributes), DroppedAttributesCount: oracleCount(e.DroppedAttributeCount),
		})
	}
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		out.Links = append(out.Links, &tracepb.Span_Link{
			TraceId: ltid[:], SpanId: lsid[:], TraceState: l.SpanContext.TraceState().String(),
			Attributes: oracleKeyValues(l.Attributes), DroppedAttributesCount: oracleCount(l.DroppedAttributeCount),
			Flags: oracleFlags(l.SpanContext.TraceFlags(), l.SpanContext),
		})
	}
	return out
}

// flags are the W3C trace flags, and whether the parent is remote (always
// said to be known).
func oracleFlags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK)
	if parent.IsRemote() {
		f |= uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK)
	}
	return f
}

func oracleUnixNano(n int64) uint64 { return uint64(max(0, n)) }

func oracleCount(n int) uint32 { return uint32(min(max(0, int64(n)), math.MaxUint32)) }

func oracleStatusCode(c codes.Code) tracepb.Status_StatusCode {
	switch c {
	case codes.Ok:
		return tracepb.Status_STATUS_CODE_OK
	case codes.Error:
		return tracepb.Status_STATUS_CODE_ERROR
	default:
		return tracepb.Status_STATUS_CODE_UNSET
	}
}

func oracleSpanKind(k trace.SpanKind) tracepb.Span_SpanKind {
	switch k {
	case trace.SpanKindInternal:
		return tracepb.Span_SPAN_KIND_INTERNAL
	case trace.SpanKindServer:
		return tracepb.Span_SPAN_KIND_SERVER
	case trace.SpanKindClient:
		return tracepb.Span_SPAN_KIND_CLIENT
	case trace.SpanKindProducer:
		return tracepb.Span_SPAN_KIND_PRODUCER
	case trace.SpanKindConsumer:
		return tracepb.Span_SPAN_KIND_CONSUMER
	default:
		return tracepb.Span_SPAN_KIND_UNSPECIFIED
	}
}

func oracleIterValues(it attribute.Iterator) []*commonpb.KeyValue {
	var out []*commonpb.KeyValue
	for it.Next() {
		kv := it.Attribute()
		out = append(out, &commonpb.KeyValue{Key: string(kv.Key), Value: oracleValue(kv.Value)})
	}
	return out
}

func oracleKeyValues(kvs []attribute.KeyValue) []*commonpb.KeyValue {
	var out []*commonpb.KeyValue
	for _, kv := range kvs {
		out = append(out, &commonpb.KeyValue{Key: string(kv.Key), Value: oracleValue(kv.Value)})
	}
	return out
}

func oracleValue(v attribute.Value) *commonpb.AnyValue {
	array := func(n int, at func(int) *commonpb.AnyValue) *commonpb.AnyValue {
		vs := make([]*commonpb.AnyValue, n)
		for i := range vs {
			vs[i] = at(i)
		}
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
	}
	switch v.Type() {
	case attribute.BOOL:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	case attribute.STRING:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.AsString()}}
	case attribute.BYTESLICE:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: v.AsByteSlice()}}
	case attribute.BOOLSLICE:
		s := v.AsBoolSlice()
		return array(len(s), func(i int) *commonpb.AnyValue { return oracleValue(attribute.BoolValue(s[i])) })
	case attribute.INT64SLICE:
		s := v.AsInt64Slice()
		return array(len(s), func(i int) *commonpb.AnyValue { return oracleValue(attribute.Int64Value(s[i])) })
	case attribute.FLOAT64SLICE:
		s := v.AsFloat64Slice()
		return array(len(s), func(i int) *commonpb.AnyValue { return oracleValue(attribute.Float64Value(s[i])) })
	case attribute.STRINGSLICE:
		s := v.AsStringSlice()
		return array(len(s), func(i int) *commonpb.AnyValue { return oracleValue(attribute.StringValue(s[i])) })
	case attribute.SLICE:
		s := v.AsSlice()
		return array(len(s), func(i int) *commonpb.AnyValue { return oracleValue(s[i]) })
	case attribute.MAP:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: oracleKeyValues(v.AsMap())}}}
	case attribute.EMPTY:
		return &commonpb.AnyValue{}
	default:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: "INVALID"}}
	}
}
