package sfnlocal

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// The engine's JSON of a value is json.Marshal's, byte for byte: for
// random decoded JSON with every kind of string (escapes, HTML-sensitive
// characters, control characters, U+2028, invalid UTF-8), numbers of
// every magnitude, nesting and key order, and the plain types the engine
// builds itself.
func TestEncodeValueIsMarshal(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 29))
	for i := range 3000 {
		v := randomValue(r, 4)
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeValue(v)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("value %d: encodeValue = %s, %v; json.Marshal = %s", i, got, err, want)
		}
	}
	for _, v := range []any{nil, map[string]any(nil), []any(nil), map[string]string{"b": "<x>", "a": "\u2029"},
		int(-3), int64(1) << 60, 1e21, 1e-7, math.Copysign(0, -1), 123456789.125, 5e-324, math.MaxFloat64} {
		want, _ := json.Marshal(v)
		if got, err := encodeValue(v); err != nil || !bytes.Equal(got, want) {
			t.Errorf("encodeValue(%#v) = %s, %v; want %s", v, got, err, want)
		}
	}
	// Anything else goes through json.Marshal whole, with its errors.
	type other struct{ A int }
	v := map[string]any{"a": []any{1.5, other{A: 2}}, "b": json.RawMessage(`{"z": 1}`)}
	want, _ := json.Marshal(v)
	if got, err := encodeValue(v); err != nil || !bytes.Equal(got, want) {
		t.Errorf("encodeValue(%v) = %s, %v; want %s", v, got, err, want)
	}
	if _, err := encodeValue(map[string]any{"x": math.NaN()}); err == nil {
		t.Error("encodeValue(NaN) = nil error, want json.Marshal's")
	}
}

// FuzzEncodeValue: for any JSON document, the engine writes what
// json.Marshal writes of its decoding; for any string, the same quoting.
func FuzzEncodeValue(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e-9,"<&>"],"b":null}`, `"\u2028\ud800"`, "\xff\x00<", `[1e300,-0,true]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v any
		if json.Unmarshal(b, &v) == nil {
			want, werr := json.Marshal(v)
			got, gerr := encodeValue(v)
			if (werr == nil) != (gerr == nil) || !bytes.Equal(got, want) {
				t.Fatalf("encodeValue(%s) = %s, %v; json.Marshal = %s, %v", b, got, gerr, want, werr)
			}
		}
		want, _ := json.Marshal(string(b))
		if got := appendQuoted(nil, string(b)); !bytes.Equal(got, want) {
			t.Fatalf("appendQuoted(%q) = %s, want %s", b, got, want)
		}
	})
}

// randomValue is random decoded JSON, depth levels deep at most.
func randomValue(r *rand.Rand, depth int) any {
	switch k := r.IntN(8); {
	case k == 0:
		return nil
	case k == 1:
		return r.IntN(2) == 0
	case k == 2:
		return randomNumber(r)
	case k <= 4 || depth == 0:
		return randomString(r)
	case k == 5:
		a := make([]any, r.IntN(5))
		for i := range a {
			a[i] = randomValue(r, depth-1)
		}
		return a
	default:
		m := map[string]any{}
		for range r.IntN(6) {
			m[randomString(r)] = randomValue(r, depth-1)
		}
		return m
	}
}

func randomNumber(r *rand.Rand) float64 {
	switch r.IntN(5) {
	case 0:
		return float64(r.IntN(2000) - 1000)
	case 1:
		return r.NormFloat64() * math.Pow(10, float64(r.IntN(60)-30))
	case 2:
		return math.Float64frombits(r.Uint64() &^ (0x7ff << 52)) // subnormal and small
	case 3:
		return float64(r.Int64()) * 1e6
	default:
		return r.Float64()
	}
}

var stringPieces = []string{"a", "Popelnase", " ", "\"", "\\", "<", ">", "&", "\n", "\t", "\b", "\f", "\r", "\x00", "\x1f", "\x7f",
	"é", "€", "😀", "\u2028", "\u2029", "\xff", "\xc3", "\xed\xa0\x80", "{", "}", "[", ":", ","}

func randomString(r *rand.Rand) string {
	var sb strings.Builder
	for range r.IntN(8) {
		sb.WriteString(stringPieces[r.IntN(len(stringPieces))])
	}
	return sb.String()
}
