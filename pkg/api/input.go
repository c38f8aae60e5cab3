package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Input hygiene: what every request body and text field must be before
// anything reads it. One JSON rule for every body (checkBody, used by
// decode) and one character rule for every text (badRune).

// checkBody refuses a JSON value that encoding/json would take in silently
// changed or ambiguous: bytes that are not UTF-8 and \u escapes of lone
// UTF-16 surrogates (both would become U+FFFD), an object key given twice
// (the last one would win), and null where t (the route's body type) has
// no room for it (only values of type any may be null).
func checkBody(raw []byte, t reflect.Type) error {
	if !utf8.Valid(raw) {
		return invalidJSON("the body is not valid UTF-8")
	}
	if esc, ok := loneSurrogate(raw); ok {
		return invalidJSON(fmt.Sprintf("the body holds %s, half of a UTF-16 surrogate pair without its other half; send the character itself or both halves", esc))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return checkValue(dec, t, "")
}

func invalidJSON(msg string) *Error { return errorf(http.StatusBadRequest, "invalid_json", msg) }

// loneSurrogate finds a \uD800–\uDFFF escape inside a JSON string that is
// not a high surrogate directly followed by a low one.
func loneSurrogate(raw []byte) (string, bool) {
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\' && i+1 < len(raw):
			if raw[i+1] != 'u' {
				i++ // a one-character escape (\" \\ \n …)
				continue
			}
			r, ok := hex4(raw, i+2)
			if !ok {
				continue // the decoder reports the bad escape
			}
			esc := string(raw[i : i+6])
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return esc, true
			case r >= 0xD800 && r <= 0xDBFF:
				lo, ok := rune(0), false
				if i+7 < len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
					lo, ok = hex4(raw, i+8)
				}
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return esc, true
				}
				i += 6 // past the low half too
			}
			i += 5
		}
	}
	return "", false
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[at:at+4]), 16, 32)
	return rune(n), err == nil
}

// checkValue walks one JSON value from dec against Go type t (nil: any).
func checkValue(dec *json.Decoder, t reflect.Type, path string) error {
	tok, err := dec.Token()
	if err != nil {
		return jsonError(err)
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
		if tok == nil {
			return invalidJSON(fmt.Sprintf("%s must not be null; leave it out instead", fieldName(path)))
		}
	}
	if t != nil && t.Kind() == reflect.Interface {
		t = nil
	}
	switch tok {
	case nil:
		if t != nil {
			return invalidJSON(fmt.Sprintf("%s must not be null; leave it out instead", fieldName(path)))
		}
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return jsonError(err)
			}
			key, _ := kt.(string)
			if seen[key] {
				return invalidJSON(fmt.Sprintf("%s appears twice; send each field once", fieldName(join(path, key))))
			}
			seen[key] = true
			if err := checkValue(dec, fieldType(t, key), join(path, key)); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return jsonError(err)
		}
	case json.Delim('['):
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for n := 0; dec.More(); n++ {
			if err := checkValue(dec, elem, path+"["+strconv.Itoa(n)+"]"); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return jsonError(err)
		}
	}
	return nil
}

// fieldType is the type of key's value in t (nil: any or unknown; an
// unknown field is decodeStrict's to refuse).
func fieldType(t reflect.Type, key string) reflect.Type {
	switch {
	case t == nil:
		return nil
	case t.Kind() == reflect.Map:
		return t.Elem()
	case t.Kind() == reflect.Struct:
		if f, ok := fieldByJSONName(t, key); ok {
			return f.Type
		}
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func fieldName(path string) string {
	if path == "" {
		return "the body"
	}
	return strconv.Quote(path)
}

// jsonError is an encoding/json error in words for a person: the field
// and the JSON types involved, never Go's type names.
func jsonError(err error) *Error {
	var (
		syn *json.SyntaxError
		typ *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &syn):
		return invalidJSON(fmt.Sprintf("the body is not valid JSON (at byte %d): %s", syn.Offset, syn.Error()))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return invalidJSON("the body is not valid JSON: it ends in the middle of a value")
	case errors.As(err, &typ):
		want := jsonKind(typ.Type)
		if typ.Field == "" {
			return invalidJSON(fmt.Sprintf("the body must be %s, not %s", want, article(typ.Value)))
		}
		return invalidJSON(fmt.Sprintf("%s must be %s, not %s", strconv.Quote(typ.Field), want, article(typ.Value)))
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return unknownField(strings.Trim(name, `"`))
	}
	return invalidJSON("the body does not have the fields this route takes")
}

func unknownField(name string) *Error {
	return invalidJSON(fmt.Sprintf("the body has an unknown field %q (field names are case-sensitive)", name))
}

// jsonKind names the JSON value a Go type takes.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another kind of value"
}

// article puts "a"/"an" before encoding/json's name of a JSON value
// ("number", "string", "array", "object", "bool", "number 1.5").
func article(v string) string {
	switch {
	case v == "bool":
		return "true or false"
	case strings.HasPrefix(v, "a") || strings.HasPrefix(v, "o"):
		return "an " + v
	}
	return "a " + v
}

// badRune is the one character rule of the API's texts: the first
// character s must not hold, if any. No text holds a control character
// (C0, DEL, C1) other than tab, line feed and carriage return, nor a
// bidirectional embedding, override or isolate (U+202A–U+202E,
// U+2066–U+2069), which make text display in another order than it reads.
// A file name (name) holds no control character at all, nor any format
// character (Unicode Cf): it reaches headers, saved files and prompts.
func badRune(s string, name bool) (rune, bool) {
	for _, c := range s {
		switch {
		case unicode.IsControl(c) && (name || c != '\t' && c != '\n' && c != '\r'):
			return c, true
		case c >= 0x202A && c <= 0x202E, c >= 0x2066 && c <= 0x2069:
			return c, true
		case name && unicode.Is(unicode.Cf, c):
			return c, true
		}
	}
	return 0, false
}

// runeName says which character c is, for an error message.
func runeName(c rune) string {
	names := map[rune]string{0: "NUL", 7: "BEL", 8: "backspace", 0x1B: "ESC", 0x7F: "DEL", '\n': "a line break", '\t': "a tab", '\r': "a carriage return",
		0x202A: "a left-to-right embedding", 0x202B: "a right-to-left embedding", 0x202C: "a directional formatting pop",
		0x202D: "a left-to-right override", 0x202E: "a right-to-left override", 0x2066: "a left-to-right isolate",
		0x2067: "a right-to-left isolate", 0x2068: "a first-strong isolate", 0x2069: "a directional isolate pop"}
	if n, ok := names[c]; ok {
		return fmt.Sprintf("%s (%U)", n, c)
	}
	if unicode.IsControl(c) {
		return fmt.Sprintf("the control character %U", c)
	}
	return fmt.Sprintf("the invisible format character %U", c)
}

// checkText refuses a title, message or note (field names it) holding a
// character badRune refuses.
func checkText(field, s string) error {
	if c, bad := badRune(s, false); bad {
		return errorf(http.StatusBadRequest, "invalid_text", fmt.Sprintf("%s must not hold %s; send plain text (line breaks and tabs are fine)", field, runeName(c)))
	}
	return nil
}

// mediaType is an upload's Content-Type, checked and normalised: absent is
// application/octet-stream; otherwise a type/subtype of RFC 2045 tokens
// with well-formed parameters, written back in canonical form (lower-case
// type, quoted parameters as needed). Anything else is 400
// invalid_media_type: the value is stored and served back as the file's
// type.
func mediaType(header string) (string, error) {
	if strings.TrimSpace(header) == "" {
		return "application/octet-stream", nil
	}
	mt, params, err := mime.ParseMediaType(header)
	if err == nil && (!strings.Contains(mt, "/") || strings.Contains(mt, "*")) {
		err = errors.New("no type/subtype")
	}
	norm := ""
	if err == nil {
		norm = mime.FormatMediaType(mt, params)
	}
	if norm == "" {
		return "", errorf(http.StatusBadRequest, "invalid_media_type",
			"the Content-Type header must be a media type such as image/png or text/plain; charset=utf-8 (or left out for application/octet-stream)")
	}
	return norm, nil
}
