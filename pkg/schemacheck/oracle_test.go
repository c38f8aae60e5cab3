package schemacheck_test

// This file checks our validator against a reference implementation.
//
// The reference (the oracle) is github.com/santhosh-tekuri/jsonschema/v5,
// the library this package wrapped before it had a validator of its own;
// only this test imports it. Every schema of testdata/oracle.json is
// compiled by both, with the same URL ("mem:///<name>.json") and the same
// rule that a schema may not load anything from outside itself. The test
// shows that:
//
//   - a schema compiles with ours exactly when it compiles with the
//     reference (the corpus holds some deliberately broken schemas too);
//   - every instance of the corpus, decoded both ways a caller decodes
//     JSON (numbers as json.Number and as float64), is valid for ours
//     exactly when it is valid for the reference;
//   - when it is invalid, ours reports the same leaf violations: the same
//     multiset of (instance pointer, message) pairs. A leaf of the
//     reference is a ValidationError without causes; the order of the
//     leaves is not compared (the reference walks Go maps), nor the order
//     of the property names listed in one "additionalProperties ... not
//     allowed" message, for the same reason;
//   - ours never panics. Where the reference itself panics (a json.Number
//     such as 1e1000001, too big for it), that is all that is asked.
//
// Where ours differs on purpose, the corpus holds no case (the unit tests
// in schemacheck_test.go show ours): an instance pointer is a plain JSON
// pointer ("/sp ace", where the reference percent-encodes "/sp%20ace";
// the empty key is "/", where the reference names the object itself); a
// $ref to a draft's meta-schema does not compile; a time whose hh:mm:ss
// holds a sign ("00:00:+0Z") is not a valid "time" or "date-time"; a
// string of JSON holding a number beyond float64 ("1E700") is
// application/json.
//
// FuzzSchemacheckAgreesWithV5 asserts the same agreement for arbitrary
// JSON instances against the corpus schemas; its seeds are the corpus
// instances, so a plain `go test` runs them too. Every case runs in its own
// subtest and a mismatch does not stop the others, so one run lists every
// disagreement.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/clientagent/clientagent/pkg/schemacheck"
	"github.com/clientagent/clientagent/pkg/schemaerr"
)

// oracleCase is one schema of the corpus with the instances to check.
type oracleCase struct {
	Name string `json:"name"`
	// Schema is the schema; SchemaText, when set, is used instead, as
	// bytes that need not be JSON at all.
	Schema     json.RawMessage `json:"schema"`
	SchemaText *string         `json:"schemaText"`
	// Invalid marks a schema meant not to compile; the test checks that
	// the reference agrees, so the corpus says what it means.
	Invalid   bool              `json:"invalid"`
	Instances []json.RawMessage `json:"instances"`
}

func (c oracleCase) raw() []byte {
	if c.SchemaText != nil {
		return []byte(*c.SchemaText)
	}
	return c.Schema
}

func (c oracleCase) url() string { return "mem:///" + c.Name + ".json" }

var caseName = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]*$`)

func loadOracleCorpus(tb testing.TB) []oracleCase {
	tb.Helper()
	b, err := os.ReadFile("testdata/oracle.json")
	if err != nil {
		tb.Fatal(err)
	}
	var cases []oracleCase
	if err := json.Unmarshal(b, &cases); err != nil {
		tb.Fatalf("testdata/oracle.json: %v", err)
	}
	seen := map[string]bool{}
	for _, c := range cases {
		if !caseName.MatchString(c.Name) || seen[c.Name] {
			tb.Fatalf("testdata/oracle.json: case name %q is empty, not URL-safe or not unique", c.Name)
		}
		seen[c.Name] = true
		if c.SchemaText == nil && len(c.Schema) == 0 {
			tb.Fatalf("testdata/oracle.json: case %s has no schema", c.Name)
		}
	}
	return cases
}

// compileV5 compiles raw the way the old implementation of this package
// did: no loading of any URL, the schema added as an in-memory resource.
func compileV5(url string, raw []byte) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.LoadURL = func(u string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("external $ref %q is not allowed in a schema here", u)
	}
	if err := c.AddResource(url, bytes.NewReader(raw)); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// compileOurs is schemacheck.Compile with a panic turned into an error, so
// one broken case does not hide the others.
func compileOurs(url string, raw []byte) (s *schemacheck.Schema, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("Compile panicked: %v", r)
		}
	}()
	s, err = schemacheck.Compile(url, raw)
	if err == nil && s == nil {
		err = errors.New("Compile returned a nil *Schema and a nil error")
	}
	return s, err
}

// outcome is what a validator said of one instance.
type outcome struct {
	valid bool
	// leaves are the sorted "pointer<TAB>message" leaf violations.
	leaves []string
	// other is set when the error was not a validation error (the
	// reference's InfiniteLoopError, or our foreign error), or when the
	// validator panicked.
	other    string
	panicked bool
}

func (o outcome) String() string {
	switch {
	case o.valid:
		return "valid"
	case o.other != "":
		return "error: " + o.other
	}
	return "invalid:\n\t\t" + strings.Join(o.leaves, "\n\t\t")
}

func leafKey(pointer, message string) string {
	return pointer + "\t" + normalizeMessage(message)
}

// normalizeMessage sorts the quoted property names of an
// "additionalProperties 'x', 'y' not allowed" message: the reference lists
// them in Go map order.
func normalizeMessage(m string) string {
	const pre, suf = "additionalProperties ", " not allowed"
	if !strings.HasPrefix(m, pre) || !strings.HasSuffix(m, suf) || len(m) < len(pre)+len(suf) {
		return m
	}
	names, ok := splitQuoted(m[len(pre) : len(m)-len(suf)])
	if !ok {
		return m
	}
	slices.Sort(names)
	return pre + strings.Join(names, ", ") + suf
}

// splitQuoted splits "'a', 'b\'c'" into its single-quoted items; false
// when s is not such a list.
func splitQuoted(s string) ([]string, bool) {
	var out []string
	for i := 0; i < len(s); {
		if len(out) > 0 {
			if !strings.HasPrefix(s[i:], ", ") {
				return nil, false
			}
			i += 2
		}
		if i >= len(s) || s[i] != '\'' {
			return nil, false
		}
		j := i + 1
		for ; j < len(s) && s[j] != '\''; j++ {
			if s[j] == '\\' {
				j++
			}
		}
		if j >= len(s) {
			return nil, false
		}
		out = append(out, s[i:j+1])
		i = j + 1
	}
	return out, len(out) > 0
}

func validateV5(s *jsonschema.Schema, v any) (o outcome) {
	defer func() {
		// The reference panics on a json.Number whose exponent big.Rat
		// cannot hold (1e1000001).
		if r := recover(); r != nil {
			o = outcome{other: fmt.Sprintf("the reference panicked: %v", r), panicked: true}
		}
	}()
	err := s.Validate(v)
	if err == nil {
		return outcome{valid: true}
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return outcome{other: fmt.Sprintf("%T: %v", err, err)}
	}
	var leaves []string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, leafKey(plainPointer(e.InstanceLocation), e.Message))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	slices.Sort(leaves)
	return outcome{leaves: leaves}
}

// plainPointer undoes the reference's percent-encoding of an instance
// pointer's tokens ("/sp%20ace"): ours reports plain JSON pointers.
func plainPointer(p string) string {
	toks := strings.Split(p, "/")
	for i, t := range toks {
		if u, err := url.PathUnescape(t); err == nil {
			toks[i] = u
		}
	}
	return strings.Join(toks, "/")
}

func validateOurs(s *schemacheck.Schema, v any) (o outcome) {
	defer func() {
		if r := recover(); r != nil {
			o = outcome{other: fmt.Sprintf("Validate panicked: %v", r), panicked: true}
		}
	}()
	err := s.Validate(v)
	if err == nil {
		return outcome{valid: true}
	}
	var se *schemaerr.Error
	if !errors.As(err, &se) {
		return outcome{other: fmt.Sprintf("not a *schemaerr.Error: %T: %v", err, err)}
	}
	if len(se.Violations) == 0 {
		return outcome{other: fmt.Sprintf("a *schemaerr.Error without violations: %v", err)}
	}
	leaves := make([]string, 0, len(se.Violations))
	for _, v := range se.Violations {
		leaves = append(leaves, leafKey(v.Pointer, v.Message))
	}
	slices.Sort(leaves)
	return outcome{leaves: leaves}
}

// agree reports whether ours said what the reference said. When the
// reference failed with something other than a validation error (an
// infinite loop it detected while validating), any error of ours agrees;
// when the reference panicked, anything but a panic of ours does.
func agree(ref, ours outcome) bool {
	switch {
	case ours.panicked:
		return false
	case ref.panicked:
		return true
	case ref.valid || ours.valid:
		return ref.valid == ours.valid
	case ref.other != "":
		return true
	case ours.other != "":
		return false
	}
	return slices.Equal(ref.leaves, ours.leaves)
}

// signedTimeField: v is a string whose time's hh:mm:ss (alone or after a
// date's "T") holds a sign, which RFC 3339 does not allow there and the
// reference does (it reads each field with strconv.Atoi).
func signedTimeField(v any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	if i := strings.IndexAny(s, "Tt"); i >= 0 {
		s = s[i+1:]
	}
	return strings.ContainsAny(s[:min(len(s), 8)], "+-")
}

// hugeJSONNumber: v is a string of JSON that holds a number beyond
// float64 ("1E700"). It is JSON, which ours says of a contentMediaType
// application/json; the reference decodes it to float64 and says it is not.
func hugeJSONNumber(v any) bool {
	s, ok := v.(string)
	var x any
	return ok && json.Valid([]byte(s)) && json.Unmarshal([]byte(s), &x) != nil
}

// hasEmptyKey: some object of v has a member named "".
func hasEmptyKey(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for k, m := range x {
			if k == "" || hasEmptyKey(m) {
				return true
			}
		}
	case []any:
		return slices.ContainsFunc(x, hasEmptyKey)
	}
	return false
}

// decodings are the two ways an instance reaches Validate.
var decodings = []struct {
	name      string
	useNumber bool
}{{"json.Number", true}, {"float64", false}}

// decodeInstance decodes b, one JSON value and nothing after it.
func decodeInstance(b []byte, useNumber bool) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	if useNumber {
		d.UseNumber()
	}
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

// compiledCase is a corpus case compiled by both validators.
type compiledCase struct {
	oracleCase
	ref     *jsonschema.Schema
	ours    *schemacheck.Schema
	refErr  error
	oursErr error
}

func compileCase(c oracleCase) compiledCase {
	cc := compiledCase{oracleCase: c}
	cc.ref, cc.refErr = compileV5(c.url(), c.raw())
	cc.ours, cc.oursErr = compileOurs(c.url(), c.raw())
	return cc
}

// checkInstance compares the two validators on the instance b, decoded
// both ways, reporting each disagreement.
func checkInstance(t *testing.T, cc compiledCase, b []byte, mustDecode bool) {
	t.Helper()
	for _, d := range decodings {
		v, err := decodeInstance(b, d.useNumber)
		if err != nil {
			// 1e400 is no float64: only that decoding is skipped.
			if mustDecode && d.useNumber {
				t.Errorf("case %s: instance %s is not JSON: %v", cc.Name, b, err)
			}
			continue
		}
		ref, ours := validateV5(cc.ref, v), validateOurs(cc.ours, v)
		if hasEmptyKey(v) { // the reference names the object for its "" member; ours says "/"
			ref.leaves, ours.leaves = nil, nil
		}
		if signedTimeField(v) || hugeJSONNumber(v) {
			continue
		}
		if !agree(ref, ours) {
			t.Errorf("case %s, instance %s (numbers as %s):\n\treference: %v\n\tours:      %v",
				cc.Name, b, d.name, ref, ours)
		}
	}
}

func TestSchemacheckAgreesWithV5(t *testing.T) {
	cases := loadOracleCorpus(t)
	if len(cases) < 80 {
		t.Errorf("the corpus has %d cases, want at least 80", len(cases))
	}
	var instances int
	for _, c := range cases {
		instances += len(c.Instances)
		t.Run(c.Name, func(t *testing.T) {
			cc := compileCase(c)
			if c.Invalid && cc.refErr == nil {
				t.Errorf("case %s is marked invalid but the reference compiles it", c.Name)
			}
			if !c.Invalid && cc.refErr != nil {
				t.Errorf("case %s is not marked invalid but the reference does not compile it: %v", c.Name, cc.refErr)
			}
			if (cc.refErr == nil) != (cc.oursErr == nil) {
				t.Fatalf("case %s: compile disagrees:\n\treference: %v\n\tours:      %v", c.Name, cc.refErr, cc.oursErr)
			}
			if cc.refErr != nil {
				return
			}
			for _, b := range c.Instances {
				checkInstance(t, cc, b, true)
			}
		})
	}
	t.Logf("%d schemas, %d instances, each decoded two ways", len(cases), instances)
}

func FuzzSchemacheckAgreesWithV5(f *testing.F) {
	cases := loadOracleCorpus(f)
	var compiled []compiledCase
	for _, c := range cases {
		cc := compileCase(c)
		if cc.refErr != nil {
			continue // a broken schema: nothing to validate
		}
		for _, b := range c.Instances {
			f.Add(uint(len(compiled)), []byte(b))
		}
		compiled = append(compiled, cc)
	}
	if len(compiled) == 0 {
		f.Fatal("no schema of the corpus compiles")
	}
	f.Fuzz(func(t *testing.T, caseIndex uint, instance []byte) {
		cc := compiled[caseIndex%uint(len(compiled))]
		if cc.oursErr != nil {
			t.Fatalf("case %s: the reference compiles it, ours does not: %v", cc.Name, cc.oursErr)
		}
		if _, err := decodeInstance(instance, true); err != nil {
			t.Skip("not JSON")
		}
		checkInstance(t, cc, instance, false)
	})
}
