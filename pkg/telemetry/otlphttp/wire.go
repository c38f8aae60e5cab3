package otlphttp

import (
	"encoding/binary"
	"math"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The spans are written in the protobuf encoding by hand, field for field
// as OpenTelemetry's own OTLP exporters map them and in the order
// proto.Marshal writes them (by field number, zero scalars left out), so
// no function links the protobuf runtime and its generated message types
// for the traces alone: their initialisers were 1.3–1.9 ms of every cold
// start (docs/benchmarks.md). TestEncodeMatchesTheGeneratedTypes holds the
// bytes equal to proto.Marshal's of the generated OTLP types.

// The wire types of the protobuf encoding.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

// The values of the OTLP enums and flags written here
// (opentelemetry/proto/trace/v1/trace.proto).
const (
	flagsHasIsRemote = 0x100 // SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
	flagsIsRemote    = 0x200 // SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK

	statusUnset, statusOK, statusError = 0, 1, 2
)

func appendTag(b []byte, field, wire int) []byte {
	return binary.AppendUvarint(b, uint64(field)<<3|uint64(wire))
}

// appendVarint writes a varint field unless it is zero (a proto3 scalar's
// default is left out).
func appendVarint(b []byte, field int, v uint64) []byte {
	if v == 0 {
		return b
	}
	return binary.AppendUvarint(appendTag(b, field, wireVarint), v)
}

func appendFixed64(b []byte, field int, v uint64) []byte {
	if v == 0 {
		return b
	}
	return binary.LittleEndian.AppendUint64(appendTag(b, field, wireFixed64), v)
}

func appendFixed32(b []byte, field int, v uint32) []byte {
	if v == 0 {
		return b
	}
	return binary.LittleEndian.AppendUint32(appendTag(b, field, wireFixed32), v)
}

// appendString writes a string or bytes field unless it is empty.
func appendString[S string | []byte](b []byte, field int, s S) []byte {
	if len(s) == 0 {
		return b
	}
	b = binary.AppendUvarint(appendTag(b, field, wireBytes), uint64(len(s)))
	return append(b, s...)
}

// appendMessage writes a message field (present even when empty): its
// body is written after the tag, then moved up behind its length.
func appendMessage(b []byte, field int, body func([]byte) []byte) []byte {
	b = appendTag(b, field, wireBytes)
	at := len(b)
	b = body(b)
	n := len(b) - at
	var size [binary.MaxVarintLen64]byte
	ls := binary.PutUvarint(size[:], uint64(n))
	b = append(b, size[:ls]...)
	copy(b[at+ls:], b[at:at+n])
	copy(b[at:], size[:ls])
	return b
}

// Encode is the ExportTraceServiceRequest of spans, in the protobuf
// encoding: its one field, resource_spans = 1, repeated.
func Encode(spans []sdktrace.ReadOnlySpan) ([]byte, error) {
	var out []byte
	for _, rs := range group(spans) {
		out = appendMessage(out, 1, func(b []byte) []byte { return rs.append(b) })
	}
	return out, nil
}

// resourceSpans are the spans of one resource, by instrumentation scope, in
// the order they came.
type resourceSpans struct {
	first  sdktrace.ReadOnlySpan // whose Resource is the group's
	scopes []*scopeSpans
}

type scopeSpans struct {
	scope instrumentation.Scope
	spans []sdktrace.ReadOnlySpan
}

// group groups spans by resource, then by instrumentation scope.
func group(spans []sdktrace.ReadOnlySpan) []*resourceSpans {
	type scopeKey struct {
		res   attribute.Distinct
		scope instrumentation.Scope
	}
	var out []*resourceSpans
	byRes := map[attribute.Distinct]*resourceSpans{}
	byScope := map[scopeKey]*scopeSpans{}
	for _, s := range spans {
		if s == nil {
			continue
		}
		rk := s.Resource().Equivalent()
		rs, ok := byRes[rk]
		if !ok {
			rs = &resourceSpans{first: s}
			byRes[rk] = rs
			out = append(out, rs)
		}
		sk := scopeKey{rk, s.InstrumentationScope()}
		ss, ok := byScope[sk]
		if !ok {
			ss = &scopeSpans{scope: sk.scope}
			byScope[sk] = ss
			rs.scopes = append(rs.scopes, ss)
		}
		ss.spans = append(ss.spans, s)
	}
	return out
}

// append writes a ResourceSpans: resource = 1, scope_spans = 2,
// schema_url = 3.
func (rs *resourceSpans) append(b []byte) []byte {
	res := rs.first.Resource()
	b = appendMessage(b, 1, func(b []byte) []byte { return appendIter(b, 1, res.Iter()) })
	for _, ss := range rs.scopes {
		b = appendMessage(b, 2, func(b []byte) []byte { return ss.append(b) })
	}
	return appendString(b, 3, res.SchemaURL())
}

// append writes a ScopeSpans: scope = 1 (left out for the zero scope),
// spans = 2, schema_url = 3.
func (ss *scopeSpans) append(b []byte) []byte {
	if sc := ss.scope; sc != (instrumentation.Scope{}) {
		b = appendMessage(b, 1, func(b []byte) []byte {
			b = appendString(b, 1, sc.Name)
			b = appendString(b, 2, sc.Version)
			return appendIter(b, 3, sc.Attributes.Iter())
		})
	}
	for _, s := range ss.spans {
		b = appendMessage(b, 2, func(b []byte) []byte { return appendSpan(b, s) })
	}
	return appendString(b, 3, ss.scope.SchemaURL)
}

// appendSpan writes a Span, its fields by number.
func appendSpan(b []byte, s sdktrace.ReadOnlySpan) []byte {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = appendString(b, 1, tid[:])
	b = appendString(b, 2, sid[:])
	b = appendString(b, 3, sc.TraceState().String())
	if p := s.Parent().SpanID(); p.IsValid() {
		b = appendString(b, 4, p[:])
	}
	b = appendString(b, 5, s.Name())
	b = appendVarint(b, 6, spanKind(s.SpanKind()))
	b = appendFixed64(b, 7, unixNano(s.StartTime().UnixNano()))
	b = appendFixed64(b, 8, unixNano(s.EndTime().UnixNano()))
	b = appendKeyValues(b, 9, s.Attributes())
	b = appendVarint(b, 10, count(s.DroppedAttributes()))
	for _, e := range s.Events() {
		b = appendMessage(b, 11, func(b []byte) []byte {
			b = appendFixed64(b, 1, unixNano(e.Time.UnixNano()))
			b = appendString(b, 2, e.Name)
			b = appendKeyValues(b, 3, e.Attributes)
			return appendVarint(b, 4, count(e.DroppedAttributeCount))
		})
	}
	b = appendVarint(b, 12, count(s.DroppedEvents()))
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		b = appendMessage(b, 13, func(b []byte) []byte {
			b = appendString(b, 1, ltid[:])
			b = appendString(b, 2, lsid[:])
			b = appendString(b, 3, l.SpanContext.TraceState().String())
			b = appendKeyValues(b, 4, l.Attributes)
			b = appendVarint(b, 5, count(l.DroppedAttributeCount))
			return appendFixed32(b, 6, flags(l.SpanContext.TraceFlags(), l.SpanContext))
		})
	}
	b = appendVarint(b, 14, count(s.DroppedLinks()))
	st := s.Status()
	b = appendMessage(b, 15, func(b []byte) []byte {
		b = appendString(b, 2, st.Description)
		return appendVarint(b, 3, statusCode(st.Code))
	})
	return appendFixed32(b, 16, flags(sc.TraceFlags(), s.Parent()))
}

// flags are the W3C trace flags, and whether the parent is remote (always
// said to be known).
func flags(tf trace.TraceFlags, parent trace.SpanContext) uint32 {
	f := uint32(tf) | flagsHasIsRemote
	if parent.IsRemote() {
		f |= flagsIsRemote
	}
	return f
}

func unixNano(n int64) uint64 { return uint64(max(0, n)) }

func count(n int) uint64 { return uint64(min(max(0, int64(n)), math.MaxUint32)) }

func statusCode(c codes.Code) uint64 {
	switch c {
	case codes.Ok:
		return statusOK
	case codes.Error:
		return statusError
	default:
		return statusUnset
	}
}

// spanKind is the OTLP SpanKind: the API's kinds, one up, unspecified 0.
func spanKind(k trace.SpanKind) uint64 {
	switch k {
	case trace.SpanKindInternal, trace.SpanKindServer, trace.SpanKindClient, trace.SpanKindProducer, trace.SpanKindConsumer:
		return uint64(k)
	default:
		return 0
	}
}

// appendIter writes each attribute of it as a KeyValue in field.
func appendIter(b []byte, field int, it attribute.Iterator) []byte {
	for it.Next() {
		b = appendKeyValue(b, field, it.Attribute())
	}
	return b
}

func appendKeyValues(b []byte, field int, kvs []attribute.KeyValue) []byte {
	for _, kv := range kvs {
		b = appendKeyValue(b, field, kv)
	}
	return b
}

// appendKeyValue writes a KeyValue: key = 1, value = 2.
func appendKeyValue(b []byte, field int, kv attribute.KeyValue) []byte {
	return appendMessage(b, field, func(b []byte) []byte {
		b = appendString(b, 1, string(kv.Key))
		return appendMessage(b, 2, func(b []byte) []byte { return appendValue(b, kv.Value) })
	})
}

// appendValue writes an AnyValue's body. Its value is a oneof, which is
// written even when it is its type's zero: string = 1, bool = 2, int = 3,
// double = 4, array = 5, kvlist = 6, bytes = 7.
func appendValue(b []byte, v attribute.Value) []byte {
	array := func(n int, at func(int) attribute.Value) []byte {
		return appendMessage(b, 5, func(b []byte) []byte {
			for i := range n {
				b = appendMessage(b, 1, func(b []byte) []byte { return appendValue(b, at(i)) })
			}
			return b
		})
	}
	str := func(field int, s string) []byte {
		b = binary.AppendUvarint(appendTag(b, field, wireBytes), uint64(len(s)))
		return append(b, s...)
	}
	switch v.Type() {
	case attribute.BOOL:
		var x uint64
		if v.AsBool() {
			x = 1
		}
		return binary.AppendUvarint(appendTag(b, 2, wireVarint), x)
	case attribute.INT64:
		return binary.AppendUvarint(appendTag(b, 3, wireVarint), uint64(v.AsInt64()))
	case attribute.FLOAT64:
		return binary.LittleEndian.AppendUint64(appendTag(b, 4, wireFixed64), math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		return str(1, v.AsString())
	case attribute.BYTESLICE:
		return str(7, string(v.AsByteSlice()))
	case attribute.BOOLSLICE:
		s := v.AsBoolSlice()
		return array(len(s), func(i int) attribute.Value { return attribute.BoolValue(s[i]) })
	case attribute.INT64SLICE:
		s := v.AsInt64Slice()
		return array(len(s), func(i int) attribute.Value { return attribute.Int64Value(s[i]) })
	case attribute.FLOAT64SLICE:
		s := v.AsFloat64Slice()
		return array(len(s), func(i int) attribute.Value { return attribute.Float64Value(s[i]) })
	case attribute.STRINGSLICE:
		s := v.AsStringSlice()
		return array(len(s), func(i int) attribute.Value { return attribute.StringValue(s[i]) })
	case attribute.SLICE:
		s := v.AsSlice()
		return array(len(s), func(i int) attribute.Value { return s[i] })
	case attribute.MAP:
		return appendMessage(b, 6, func(b []byte) []byte { return appendKeyValues(b, 1, v.AsMap()) })
	case attribute.EMPTY:
		return b
	default:
		return str(1, "INVALID")
	}
}
