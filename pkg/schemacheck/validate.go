package schemacheck

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/clientagent/clientagent/pkg/schemaerr"
)

// violation is one leaf violation and the keyword that found it.
type violation struct {
	schemaerr.Violation
	at string // the keyword's place in the schema, a JSON pointer
}

// checker validates one value against one compiled schema.
type checker struct {
	tracks bool  // record what each schema evaluated (unevaluated* keywords)
	bad    error // the value holds something that is not JSON
}

// evaluated is what one schema, with the schemas it applies in place,
// evaluated of an object's properties or an array's items; the
// unevaluated* keywords apply to the rest.
type evaluated struct {
	allProps, allItems bool
	props              map[string]bool
	items              map[int]bool
}

func (e *evaluated) prop(name string) {
	if e == nil || e.allProps {
		return
	}
	if e.props == nil {
		e.props = map[string]bool{}
	}
	e.props[name] = true
}

func (e *evaluated) item(i int) {
	if e == nil || e.allItems {
		return
	}
	if e.items == nil {
		e.items = map[int]bool{}
	}
	e.items[i] = true
}

func (e *evaluated) hasProp(name string) bool { return e.allProps || e.props[name] }
func (e *evaluated) hasItem(i int) bool       { return e.allItems || e.items[i] }

// merge adds what a subschema applied in place, and passed, evaluated.
func (e *evaluated) merge(o *evaluated) {
	if e == nil || o == nil {
		return
	}
	e.allProps = e.allProps || o.allProps
	e.allItems = e.allItems || o.allItems
	for p := range o.props {
		e.prop(p)
	}
	for i := range o.items {
		e.item(i)
	}
}

// check validates v, at the instance pointer ptr, against n: its leaf
// violations (none when it is valid) and what it evaluated.
func (c *checker) check(n *node, v any, ptr string) (errs []violation, ev *evaluated) {
	if c.tracks {
		ev = &evaluated{}
	}
	if n.always {
		return nil, ev
	}
	leaf := func(kw, format string, args ...any) violation {
		return violation{schemaerr.Violation{Pointer: ptr, Message: fmt.Sprintf(format, args...)}, n.loc + "/" + kw}
	}
	if n.never {
		return []violation{{schemaerr.Violation{Pointer: ptr, Message: "not allowed"}, n.loc}}, ev
	}
	t := jsonType(v)
	if t == "" {
		c.bad = fmt.Errorf("jsonschema: invalid jsonType: %T", v)
		return nil, ev
	}
	if len(n.types) > 0 && !typeMatches(n.types, t, v) {
		return []violation{leaf("type", "expected %s, but got %s", strings.Join(n.types, " or "), t)}, ev
	}
	if n.hasConst && !equal(v, n.constant) {
		switch n.constant.(type) {
		case map[string]any, []any:
			errs = append(errs, leaf("const", "const failed"))
		default:
			errs = append(errs, leaf("const", "value must be %#v", n.constant))
		}
	}
	if len(n.enum) > 0 && !inEnum(n.enum, v) {
		errs = append(errs, leaf("enum", "%s", n.enumMsg))
	}
	if s, ok := v.(string); ok && n.formatOK != nil && !n.formatOK(s) {
		errs = append(errs, leaf("format", "%s is not valid %s", quote(s), quote(n.format)))
	}

	// inPlace applies s to v itself: its violations are v's, and what it
	// evaluated counts as n's when it passes.
	inPlace := func(s *node) []violation {
		sub, sev := c.check(s, v, ptr)
		if len(sub) == 0 {
			ev.merge(sev)
		}
		return sub
	}
	child := func(s *node, x any, tok string) []violation {
		sub, _ := c.check(s, x, ptr+"/"+escape(tok))
		return sub
	}

	switch v := v.(type) {
	case map[string]any:
		errs = c.checkObject(n, v, errs, ev, leaf, inPlace, child)
	case []any:
		errs = c.checkArray(n, v, errs, ev, leaf, child)
	case string:
		errs = c.checkString(n, v, ptr, errs, leaf)
	case bool, nil:
	default:
		errs = checkNumber(n, v, errs, leaf)
	}

	if n.ref != nil {
		errs = append(errs, inPlace(n.ref)...)
	}
	for _, r := range n.extraRefs {
		errs = append(errs, inPlace(r)...)
	}
	if n.not != nil && len(inPlace(n.not)) == 0 {
		errs = append(errs, leaf("not", "not failed"))
	}
	for _, s := range n.allOf {
		errs = append(errs, inPlace(s)...)
	}
	if len(n.anyOf) > 0 {
		var causes []violation
		matched := false
		for _, s := range n.anyOf {
			sub := inPlace(s)
			matched = matched || len(sub) == 0
			causes = append(causes, sub...)
		}
		if !matched {
			errs = append(errs, causes...)
		}
	}
	if len(n.oneOf) > 0 {
		var causes []violation
		matched := -1
		for i, s := range n.oneOf {
			sub := inPlace(s)
			if len(sub) > 0 {
				causes = append(causes, sub...)
				continue
			}
			if matched >= 0 {
				errs = append(errs, leaf("oneOf", "valid against schemas at indexes %d and %d", matched, i))
				break
			}
			matched = i
		}
		if matched < 0 {
			errs = append(errs, causes...)
		}
	}
	if n.ifNode != nil {
		if len(inPlace(n.ifNode)) == 0 {
			if n.thenNode != nil {
				errs = append(errs, inPlace(n.thenNode)...)
			}
		} else if n.elseNode != nil {
			errs = append(errs, inPlace(n.elseNode)...)
		}
	}

	switch v := v.(type) {
	case map[string]any:
		if n.unevaluatedProps != nil {
			for _, name := range sortedKeys(v) {
				if !ev.hasProp(name) {
					errs = append(errs, child(n.unevaluatedProps, v[name], name)...)
				}
			}
			ev.allProps = true
		}
	case []any:
		if n.unevaluatedItems != nil {
			for i, item := range v {
				if !ev.hasItem(i) {
					errs = append(errs, child(n.unevaluatedItems, item, strconv.Itoa(i))...)
				}
			}
			ev.allItems = true
		}
	}
	return errs, ev
}

type leafFunc func(kw, format string, args ...any) violation

func (c *checker) checkObject(n *node, v map[string]any, errs []violation, ev *evaluated, leaf leafFunc,
	inPlace func(*node) []violation, child func(*node, any, string) []violation) []violation {
	if n.minProps >= 0 && len(v) < n.minProps {
		errs = append(errs, leaf("minProperties", "minimum %d properties allowed, but found %d properties", n.minProps, len(v)))
	}
	if n.maxProps >= 0 && len(v) > n.maxProps {
		errs = append(errs, leaf("maxProperties", "maximum %d properties allowed, but found %d properties", n.maxProps, len(v)))
	}
	var missing []string
	for _, name := range n.required {
		if _, ok := v[name]; !ok {
			missing = append(missing, quote(name))
		}
	}
	if len(missing) > 0 {
		errs = append(errs, leaf("required", "missing properties: %s", strings.Join(missing, ", ")))
	}
	for _, p := range n.properties {
		if pv, ok := v[p.name]; ok {
			ev.prop(p.name)
			errs = append(errs, child(p.node, pv, p.name)...)
		}
	}
	var names []string // sorted, for a stable order of violations
	if n.propertyNames != nil || len(n.patternProps) > 0 || n.additionalNone || n.additionalProps != nil {
		names = sortedKeys(v)
	}
	if n.propertyNames != nil {
		for _, name := range names {
			errs = append(errs, child(n.propertyNames, name, name)...)
		}
	}
	for _, p := range n.patternProps {
		for _, name := range names {
			if p.re.MatchString(name) {
				ev.prop(name)
				errs = append(errs, child(p.node, v[name], name)...)
			}
		}
	}
	if n.additionalNone || n.additionalProps != nil {
		var extra []string
		for _, name := range names {
			if !n.declares(name) {
				extra = append(extra, name)
			}
		}
		if n.additionalNone && len(extra) > 0 {
			quoted := make([]string, len(extra))
			for i, name := range extra {
				quoted[i] = quote(name)
			}
			errs = append(errs, leaf("additionalProperties", "additionalProperties %s not allowed", strings.Join(quoted, ", ")))
		}
		if n.additionalProps != nil {
			for _, name := range extra {
				errs = append(errs, child(n.additionalProps, v[name], name)...)
			}
		}
	}
	if (n.additionalNone || n.additionalAll || n.additionalProps != nil) && ev != nil {
		ev.allProps = true
	}
	for _, d := range n.depRequired {
		if _, ok := v[d.name]; !ok {
			continue
		}
		for i, req := range d.required {
			if _, ok := v[req]; !ok {
				errs = append(errs, leaf(d.keyword+"/"+escape(d.name)+"/"+strconv.Itoa(i),
					"property %s is required, if %s property exists", quote(req), quote(d.name)))
			}
		}
	}
	for _, d := range n.depSchemas {
		if _, ok := v[d.name]; ok {
			errs = append(errs, inPlace(d.node)...)
		}
	}
	return errs
}

// declares: name is one of n's properties or matches one of its
// patternProperties (additionalProperties applies to the others).
func (n *node) declares(name string) bool {
	for _, p := range n.properties {
		if p.name == name {
			return true
		}
	}
	for _, p := range n.patternProps {
		if p.re.MatchString(name) {
			return true
		}
	}
	return false
}

func (c *checker) checkArray(n *node, v []any, errs []violation, ev *evaluated, leaf leafFunc,
	child func(*node, any, string) []violation) []violation {
	if n.minItems >= 0 && len(v) < n.minItems {
		errs = append(errs, leaf("minItems", "minimum %d items required, but found %d items", n.minItems, len(v)))
	}
	if n.maxItems >= 0 && len(v) > n.maxItems {
		errs = append(errs, leaf("maxItems", "maximum %d items required, but found %d items", n.maxItems, len(v)))
	}
	if n.uniqueItems {
		if j, i, dup := firstDuplicate(v); dup {
			errs = append(errs, leaf("uniqueItems", "items at index %d and %d are equal", j, i))
		}
	}
	for i, item := range v {
		switch {
		case i < len(n.prefixItems):
			ev.item(i)
			errs = append(errs, child(n.prefixItems[i], item, strconv.Itoa(i))...)
		case n.restItems != nil:
			ev.item(i)
			errs = append(errs, child(n.restItems, item, strconv.Itoa(i))...)
		}
	}
	if n.restAllowed && ev != nil {
		ev.allItems = true
	}
	if n.restForbidden && len(v) > len(n.prefixItems) {
		errs = append(errs, leaf("additionalItems", "only %d items are allowed, but found %d items", len(n.prefixItems), len(v)))
	}
	if n.contains != nil {
		var causes []violation
		matched := 0
		for i, item := range v {
			if sub := child(n.contains, item, strconv.Itoa(i)); len(sub) > 0 {
				causes = append(causes, sub...)
				continue
			}
			matched++
			if n.containsEvaluates {
				ev.item(i)
			}
		}
		if matched < n.minContains {
			if len(causes) == 0 {
				causes = []violation{leaf("minContains", "valid must be >= %d, but got %d", n.minContains, matched)}
			}
			errs = append(errs, causes...)
		}
		if n.maxContains >= 0 && matched > n.maxContains {
			errs = append(errs, leaf("maxContains", "valid must be <= %d, but got %d", n.maxContains, matched))
		}
	}
	return errs
}

func (c *checker) checkString(n *node, v, ptr string, errs []violation, leaf leafFunc) []violation {
	if n.minLength >= 0 || n.maxLength >= 0 {
		length := utf8.RuneCountInString(v)
		if n.minLength >= 0 && length < n.minLength {
			errs = append(errs, leaf("minLength", "length must be >= %d, but got %d", n.minLength, length))
		}
		if n.maxLength >= 0 && length > n.maxLength {
			errs = append(errs, leaf("maxLength", "length must be <= %d, but got %d", n.maxLength, length))
		}
	}
	if n.pattern != nil && !n.pattern.MatchString(v) {
		errs = append(errs, leaf("pattern", "does not match pattern %s", quote(n.pattern.String())))
	}
	if n.decode == nil && n.mediaOK == nil {
		return errs
	}
	content, decoded := []byte(v), n.encoding == ""
	if n.decode != nil {
		b, err := n.decode(v)
		if err != nil {
			errs = append(errs, leaf("contentEncoding", "value is not %s encoded", n.encoding))
		} else {
			content, decoded = b, true
		}
	}
	if decoded && n.mediaOK != nil && !n.mediaOK(content) {
		errs = append(errs, leaf("contentMediaType", "value is not of mediatype %s", quote(n.mediaType)))
	}
	if decoded && n.contentSchema != nil {
		doc, err := decodeJSON(content)
		if err != nil {
			return append(errs, leaf("contentSchema", "value is not valid json"))
		}
		sub, _ := c.check(n.contentSchema, doc, ptr)
		errs = append(errs, sub...)
	}
	return errs
}

func checkNumber(n *node, v any, errs []violation, leaf leafFunc) []violation {
	if n.minimum == nil && n.maximum == nil && n.exclusiveMin == nil && n.exclusiveMax == nil && n.multipleOf == nil {
		return errs
	}
	r, _ := numberOf(v)
	if n.minimum != nil && r.Cmp(n.minimum) < 0 {
		errs = append(errs, leaf("minimum", "must be >= %v but found %v", f64(n.minimum), v))
	}
	if n.exclusiveMin != nil && r.Cmp(n.exclusiveMin) <= 0 {
		errs = append(errs, leaf("exclusiveMinimum", "must be > %v but found %v", f64(n.exclusiveMin), v))
	}
	if n.maximum != nil && r.Cmp(n.maximum) > 0 {
		errs = append(errs, leaf("maximum", "must be <= %v but found %v", f64(n.maximum), v))
	}
	if n.exclusiveMax != nil && r.Cmp(n.exclusiveMax) >= 0 {
		errs = append(errs, leaf("exclusiveMaximum", "must be < %v but found %v", f64(n.exclusiveMax), v))
	}
	if n.multipleOf != nil && !r.MultipleOf(n.multipleOf) {
		errs = append(errs, leaf("multipleOf", "%v not multipleOf %v", v, f64(n.multipleOf)))
	}
	return errs
}

func f64(r *big.Rat) float64 {
	f, _ := r.Float64()
	return f
}

// jsonType is the JSON type of a decoded value; "" when v is none.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float32, float64, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return ""
}

func typeMatches(types []string, t string, v any) bool {
	for _, want := range types {
		if want == t {
			return true
		}
		if want == "integer" && t == "number" {
			if r, ok := numberOf(v); ok && r.IsInt() {
				return true
			}
		}
	}
	return false
}

// ratOf is a JSON number's exact value; a float64 is read as the shortest
// decimal that prints it, so 0.1 is one tenth.
func ratOf(v any) (*big.Rat, bool) {
	var s string
	switch x := v.(type) {
	case json.Number:
		s = string(x)
	case float64:
		s = strconv.FormatFloat(x, 'g', -1, 64)
	case float32:
		s = strconv.FormatFloat(float64(x), 'g', -1, 32)
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		s = fmt.Sprint(x)
	default:
		return nil, false
	}
	return new(big.Rat).SetString(s)
}

// number is a JSON number's value: exact, a rational, when it can be;
// a 4,096-bit float for the few a rational cannot hold (an exponent of a
// million digits).
type number struct {
	r *big.Rat
	f *big.Float
}

const floatPrec = 4096

func numberOf(v any) (number, bool) {
	if r, ok := ratOf(v); ok {
		return number{r: r}, true
	}
	if jsonType(v) != "number" {
		return number{}, false
	}
	f, _, err := big.ParseFloat(fmt.Sprint(v), 10, floatPrec, big.ToNearestEven)
	return number{f: f}, err == nil
}

func (x number) float() *big.Float {
	if x.f != nil {
		return x.f
	}
	return new(big.Float).SetPrec(floatPrec).SetRat(x.r)
}

// Cmp compares x with the bound b (-1, 0, +1).
func (x number) Cmp(b *big.Rat) int {
	if x.r != nil {
		return x.r.Cmp(b)
	}
	return x.f.Cmp(new(big.Float).SetPrec(floatPrec).SetRat(b))
}

func (x number) IsInt() bool {
	if x.r != nil {
		return x.r.IsInt()
	}
	return x.f.IsInt()
}

func (x number) MultipleOf(m *big.Rat) bool {
	if x.r != nil {
		return new(big.Rat).Quo(x.r, m).IsInt()
	}
	return new(big.Float).SetPrec(floatPrec).Quo(x.f, new(big.Float).SetPrec(floatPrec).SetRat(m)).IsInt()
}

func (x number) Equal(y number) bool {
	if x.r != nil && y.r != nil {
		return x.r.Cmp(y.r) == 0
	}
	return x.float().Cmp(y.float()) == 0
}

func (x number) String() string {
	if x.r != nil {
		return x.r.RatString()
	}
	return x.f.Text('g', -1)
}

// equal is JSON equality: numbers by value, objects by their members.
func equal(a, b any) bool {
	ta, tb := jsonType(a), jsonType(b)
	if ta != tb {
		return false
	}
	switch ta {
	case "number":
		x, okA := numberOf(a)
		y, okB := numberOf(b)
		return okA && okB && x.Equal(y)
	case "array":
		x, y := a.([]any), b.([]any)
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case "object":
		x, y := a.(map[string]any), b.(map[string]any)
		if len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !equal(xv, yv) {
				return false
			}
		}
		return true
	}
	return a == b
}

func inEnum(enum []any, v any) bool {
	for _, e := range enum {
		if equal(v, e) {
			return true
		}
	}
	return false
}

// firstDuplicate is the first pair of equal items: the smallest i that
// equals an earlier item, and the first such j.
func firstDuplicate(v []any) (j, i int, found bool) {
	if len(v) <= 20 {
		for i := 1; i < len(v); i++ {
			for j := 0; j < i; j++ {
				if equal(v[i], v[j]) {
					return j, i, true
				}
			}
		}
		return 0, 0, false
	}
	first := make(map[string]int, len(v))
	var b strings.Builder
	for i, item := range v {
		b.Reset()
		canonical(&b, item)
		if j, ok := first[b.String()]; ok {
			return j, i, true
		}
		first[b.String()] = i
	}
	return 0, 0, false
}

// canonical writes a text that two values share exactly when they are
// equal JSON.
func canonical(b *strings.Builder, v any) {
	switch x := v.(type) {
	case map[string]any:
		b.WriteByte('{')
		for _, k := range sortedKeys(x) {
			b.WriteString(strconv.Quote(k))
			b.WriteByte(':')
			canonical(b, x[k])
			b.WriteByte(',')
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for _, item := range x {
			canonical(b, item)
			b.WriteByte(',')
		}
		b.WriteByte(']')
	case string:
		b.WriteString(strconv.Quote(x))
	default:
		if r, ok := numberOf(x); ok {
			b.WriteString("#" + r.String())
			return
		}
		fmt.Fprint(b, x)
	}
}

// quote puts s in single quotes, escaped as Go would (and as the
// reference implementation's messages are, to the letter).
func quote(s string) string {
	q := strings.ReplaceAll(strconv.Quote(s), `\"`, `"`)
	q = strings.ReplaceAll(q, `'`, `\'`)
	return "'" + q[1:len(q)-1] + "'"
}

// validationError is the error of a failed validation; its text names the
// first violation, where it is in the value and which keyword found it.
type validationError struct {
	url   string
	first violation
}

func (e *validationError) Error() string {
	return fmt.Sprintf("jsonschema: %s does not validate with %s#%s: %s", quote(e.first.Pointer), e.url, e.first.at, e.first.Message)
}
