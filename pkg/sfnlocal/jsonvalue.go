package sfnlocal

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// The engine writes JSON of the values it passes between states (history
// details, Lambda payloads, an execution's output) on every state of
// every execution. Those values are decoded JSON: maps, slices, strings,
// float64s, booleans and nil. encodeValue writes them without
// encoding/json's reflection and its sorting of reflected keys, byte for
// byte as json.Marshal writes them (TestEncodeValueIsMarshal); any other
// type anywhere in the value goes through json.Marshal whole.

// encodeValue is json.Marshal(v) for the engine's values.
func encodeValue(v any) ([]byte, error) {
	if b, ok := appendValue(make([]byte, 0, 256), v); ok {
		return b, nil
	}
	return json.Marshal(v)
}

// appendValue appends v's JSON to b when v is decoded JSON (and the
// few plain types the engine builds itself); ok is false for anything
// else, and for a number JSON cannot hold.
func appendValue(b []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), true
	case bool:
		return strconv.AppendBool(b, v), true
	case string:
		return appendQuoted(b, v), true
	case float64:
		return appendNumber(b, v)
	case int:
		return strconv.AppendInt(b, int64(v), 10), true
	case int64:
		return strconv.AppendInt(b, v, 10), true
	case map[string]any:
		if v == nil {
			return append(b, "null"...), true
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(appendQuoted(b, k), ':')
			var ok bool
			if b, ok = appendValue(b, v[k]); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	case []any:
		if v == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendValue(b, e); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	}
	return b, false
}

// appendNumber writes f as encoding/json does (ES6 number to string: no
// exponent between 1e-6 and 1e21, and an exponent without leading zeros);
// NaN and the infinities are not JSON.
func appendNumber(b []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if n := len(b); format == 'e' && n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
		b[n-2] = b[n-1] // e-07 → e-7
		b = b[:n-1]
	}
	return b, true
}

const hexDigits = "0123456789abcdef"

// appendQuoted writes s as a JSON string the way encoding/json does:
// '"' and '\\' escaped, \b \f \n \r \t as such, other control characters
// and the HTML-sensitive <, > and & as \u00XX, invalid UTF-8 as \ufffd,
// and U+2028 and U+2029 escaped.
func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(append(b, s[start:i]...), `\ufffd`...)
		} else if r == '\u2028' || r == '\u2029' {
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		} else {
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(b, s[start:]...), '"')
}
