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
	schema *Schema
	tracks bool  // record what each schema evaluated (unevaluated* keywords)
	bad    error // the value holds something that is not JSON
	// scope is the dynamic scope: the URIs of the schema resources entered
	// on the way to the schema being applied, outermost first.
	scope []string
	// active are the schemas being applied, each at its instance pointer,
	// kept where a dynamic reference could loop back (the compiler checks
	// the static ones): the same pair twice is a loop.
	active map[activeKey]bool
}

type activeKey struct {
	n   *node
	ptr string
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
func (c *checker) check(n *node, v any, ptr string) ([]violation, *evaluated) {
	if c.bad != nil {
		return nil, nil
	}
	if c.active != nil {
		k := activeKey{n, ptr}
		if c.active[k] {
			c.bad = fmt.Errorf("jsonschema: %s#%s applies itself to %s without end", c.schema.url, n.loc, quote(ptr))
			return nil, nil
		}
		c.active[k] = true
		defer delete(c.active, k)
	}
	if len(c.scope) == 0 || c.scope[len(c.scope)-1] != n.resource {
		c.scope = append(c.scope, n.resource)
		defer func() { c.scope = c.scope[:len(c.scope)-1] }()
	}
	f := frame{c: c, n: n, v: v, ptr: ptr}
	if c.tracks {
		f.ev = &evaluated{}
	}
	f.run()
	return f.errs, f.ev
}

// frame is one schema applied to one value: the violations found so far
// and what the schema evaluated of the value.
type frame struct {
	c    *checker
	n    *node
	v    any
	ptr  string
	ev   *evaluated
	errs []violation
}

// fail records a leaf violation found by the keyword kw.
func (f *frame) fail(kw, format string, args ...any) {
	f.errs = append(f.errs, violation{schemaerr.Violation{Pointer: f.ptr, Message: fmt.Sprintf(format, args...)}, f.n.loc + "/" + kw})
}

// inPlace applies s to the value itself: its violations are the value's,
// and what it evaluated counts as f's when it passes.
func (f *frame) inPlace(s *node) []violation {
	sub, ev := f.c.check(s, f.v, f.ptr)
	if len(sub) == 0 {
		f.ev.merge(ev)
	}
	return sub
}

// child applies s to x, the member or item tok of the value.
func (f *frame) child(s *node, x any, tok string) {
	sub, _ := f.c.check(s, x, f.ptr+"/"+escape(tok))
	f.errs = append(f.errs, sub...)
}

func (f *frame) run() {
	n, v := f.n, f.v
	if n.always {
		return
	}
	if n.never {
		f.errs = []violation{{schemaerr.Violation{Pointer: f.ptr, Message: "not allowed"}, n.loc}}
		return
	}
	t := jsonType(v)
	if t == "" {
		f.c.bad = fmt.Errorf("jsonschema: invalid jsonType: %T", v)
		return
	}
	if len(n.types) > 0 && !typeMatches(n.types, t, v) {
		f.fail("type", "expected %s, but got %s", strings.Join(n.types, " or "), t)
		return // nothing else is said of a value of the wrong type
	}
	if n.hasConst && !equal(v, n.constant) {
		switch n.constant.(type) {
		case map[string]any, []any:
			f.fail("const", "const failed")
		default:
			f.fail("const", "value must be %#v", n.constant)
		}
	}
	if len(n.enum) > 0 && !inEnum(n.enum, v) {
		f.fail("enum", "%s", n.enumMsg)
	}
	if s, ok := v.(string); ok && n.formatOK != nil && !n.formatOK(s) {
		f.fail("format", "%s is not valid %s", quote(s), quote(n.format))
	}
	switch v := v.(type) {
	case map[string]any:
		f.object(v)
	case []any:
		f.array(v)
	case string:
		f.string(v)
	case bool, nil:
	default:
		f.number(v)
	}
	f.applicators()
	f.unevaluated()
}

// applicators applies the subschemas that check the value itself: $ref,
// not, allOf, anyOf, oneOf, if/then/else.
func (f *frame) applicators() {
	n := f.n
	if n.ref != nil {
		f.errs = append(f.errs, f.inPlace(n.ref)...)
	}
	if n.recursiveRef != nil {
		f.errs = append(f.errs, f.inPlace(f.c.recursiveTarget(n))...)
	}
	if n.dynamicRef != nil {
		f.errs = append(f.errs, f.inPlace(f.c.dynamicTarget(n))...)
	}
	if n.not != nil && len(f.inPlace(n.not)) == 0 {
		f.fail("not", "not failed")
	}
	for _, s := range n.allOf {
		f.errs = append(f.errs, f.inPlace(s)...)
	}
	if len(n.anyOf) > 0 {
		var causes []violation
		matched := false
		for _, s := range n.anyOf { // every one, for what each evaluates
			sub := f.inPlace(s)
			matched = matched || len(sub) == 0
			causes = append(causes, sub...)
		}
		if !matched {
			f.errs = append(f.errs, causes...)
		}
	}
	if len(n.oneOf) > 0 {
		var causes []violation
		matched := -1
		for i, s := range n.oneOf {
			sub := f.inPlace(s)
			if len(sub) > 0 {
				causes = append(causes, sub...)
				continue
			}
			if matched >= 0 {
				f.fail("oneOf", "valid against schemas at indexes %d and %d", matched, i)
				break
			}
			matched = i
		}
		if matched < 0 {
			f.errs = append(f.errs, causes...)
		}
	}
	if n.ifNode != nil {
		if len(f.inPlace(n.ifNode)) == 0 {
			if n.thenNode != nil {
				f.errs = append(f.errs, f.inPlace(n.thenNode)...)
			}
		} else if n.elseNode != nil {
			f.errs = append(f.errs, f.inPlace(n.elseNode)...)
		}
	}
}

// recursiveTarget is where n's $recursiveRef lands: when its target has
// $recursiveAnchor, the outermost resource of the dynamic scope whose root
// has it too.
func (c *checker) recursiveTarget(n *node) *node {
	if n.recursive {
		for _, res := range c.scope {
			if root, ok := c.schema.recursive[res]; ok {
				return root
			}
		}
	}
	return n.recursiveRef
}

// dynamicTarget is where n's $dynamicRef lands: when it names its target's
// $dynamicAnchor, the outermost resource of the dynamic scope with a
// $dynamicAnchor of that name.
func (c *checker) dynamicTarget(n *node) *node {
	if n.dynamicName != "" {
		for _, res := range c.scope {
			if target, ok := c.schema.dynamic[res][n.dynamicName]; ok {
				return target
			}
		}
	}
	return n.dynamicRef
}

// unevaluated applies unevaluatedProperties and unevaluatedItems to what
// neither this schema nor the ones it applied in place evaluated.
func (f *frame) unevaluated() {
	switch v := f.v.(type) {
	case map[string]any:
		if f.n.unevaluatedProps != nil {
			for _, name := range sortedKeys(v) {
				if !f.ev.hasProp(name) {
					f.child(f.n.unevaluatedProps, v[name], name)
				}
			}
			f.ev.allProps = true
		}
	case []any:
		if f.n.unevaluatedItems != nil {
			for i, item := range v {
				if !f.ev.hasItem(i) {
					f.child(f.n.unevaluatedItems, item, strconv.Itoa(i))
				}
			}
			f.ev.allItems = true
		}
	}
}

func (f *frame) object(v map[string]any) {
	n := f.n
	if n.minProps >= 0 && len(v) < n.minProps {
		f.fail("minProperties", "minimum %d properties allowed, but found %d properties", n.minProps, len(v))
	}
	if n.maxProps >= 0 && len(v) > n.maxProps {
		f.fail("maxProperties", "maximum %d properties allowed, but found %d properties", n.maxProps, len(v))
	}
	var missing []string
	for _, name := range n.required {
		if _, ok := v[name]; !ok {
			missing = append(missing, quote(name))
		}
	}
	if len(missing) > 0 {
		f.fail("required", "missing properties: %s", strings.Join(missing, ", "))
	}
	for _, p := range n.properties {
		if pv, ok := v[p.name]; ok {
			f.ev.prop(p.name)
			f.child(p.node, pv, p.name)
		}
	}
	var names []string // sorted, for a stable order of violations
	if n.propertyNames != nil || len(n.patternProps) > 0 || n.additionalNone || n.additionalProps != nil {
		names = sortedKeys(v)
	}
	if n.propertyNames != nil {
		for _, name := range names {
			f.child(n.propertyNames, name, name)
		}
	}
	for _, p := range n.patternProps {
		for _, name := range names {
			if p.re.MatchString(name) {
				f.ev.prop(name)
				f.child(p.node, v[name], name)
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
			f.fail("additionalProperties", "additionalProperties %s not allowed", strings.Join(quoted, ", "))
		}
		if n.additionalProps != nil {
			for _, name := range extra {
				f.child(n.additionalProps, v[name], name)
			}
		}
	}
	if (n.additionalNone || n.additionalAll || n.additionalProps != nil) && f.ev != nil {
		f.ev.allProps = true
	}
	for _, d := range n.depRequired {
		if _, ok := v[d.name]; !ok {
			continue
		}
		for i, req := range d.required {
			if _, ok := v[req]; !ok {
				f.fail(d.keyword+"/"+escape(d.name)+"/"+strconv.Itoa(i),
					"property %s is required, if %s property exists", quote(req), quote(d.name))
			}
		}
	}
	for _, d := range n.depSchemas {
		if _, ok := v[d.name]; ok {
			f.errs = append(f.errs, f.inPlace(d.node)...)
		}
	}
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

func (f *frame) array(v []any) {
	n := f.n
	if n.minItems >= 0 && len(v) < n.minItems {
		f.fail("minItems", "minimum %d items required, but found %d items", n.minItems, len(v))
	}
	if n.maxItems >= 0 && len(v) > n.maxItems {
		f.fail("maxItems", "maximum %d items required, but found %d items", n.maxItems, len(v))
	}
	if n.uniqueItems {
		if j, i, dup := firstDuplicate(v); dup {
			f.fail("uniqueItems", "items at index %d and %d are equal", j, i)
		}
	}
	for i, item := range v {
		switch {
		case i < len(n.prefixItems):
			f.ev.item(i)
			f.child(n.prefixItems[i], item, strconv.Itoa(i))
		case n.restItems != nil:
			f.ev.item(i)
			f.child(n.restItems, item, strconv.Itoa(i))
		}
	}
	if n.restAllowed && f.ev != nil {
		f.ev.allItems = true
	}
	if n.restForbidden && len(v) > len(n.prefixItems) {
		f.fail("additionalItems", "only %d items are allowed, but found %d items", len(n.prefixItems), len(v))
	}
	if n.contains == nil {
		return
	}
	var causes []violation
	matched := 0
	for i, item := range v {
		if sub, _ := f.c.check(n.contains, item, f.ptr+"/"+strconv.Itoa(i)); len(sub) > 0 {
			causes = append(causes, sub...)
			continue
		}
		matched++
		if n.containsEvaluates {
			f.ev.item(i)
		}
	}
	if matched < n.minContains {
		if len(causes) == 0 {
			f.fail("minContains", "valid must be >= %d, but got %d", n.minContains, matched)
		}
		f.errs = append(f.errs, causes...)
	}
	if n.maxContains >= 0 && matched > n.maxContains {
		f.fail("maxContains", "valid must be <= %d, but got %d", n.maxContains, matched)
	}
}

func (f *frame) string(v string) {
	n := f.n
	if n.minLength >= 0 || n.maxLength >= 0 {
		length := utf8.RuneCountInString(v)
		if n.minLength >= 0 && length < n.minLength {
			f.fail("minLength", "length must be >= %d, but got %d", n.minLength, length)
		}
		if n.maxLength >= 0 && length > n.maxLength {
			f.fail("maxLength", "length must be <= %d, but got %d", n.maxLength, length)
		}
	}
	if n.pattern != nil && !n.pattern.MatchString(v) {
		f.fail("pattern", "does not match pattern %s", quote(n.pattern.String()))
	}
	if n.decode == nil && n.mediaOK == nil {
		return
	}
	content, decoded := []byte(v), n.encoding == ""
	if n.decode != nil {
		b, err := n.decode(v)
		if err != nil {
			f.fail("contentEncoding", "value is not %s encoded", n.encoding)
		} else {
			content, decoded = b, true
		}
	}
	if decoded && n.mediaOK != nil && !n.mediaOK(content) {
		f.fail("contentMediaType", "value is not of mediatype %s", quote(n.mediaType))
	}
	if decoded && n.contentSchema != nil {
		doc, err := decodeJSON(content)
		if err != nil {
			f.fail("contentSchema", "value is not valid json")
			return
		}
		sub, _ := f.c.check(n.contentSchema, doc, f.ptr)
		f.errs = append(f.errs, sub...)
	}
}

func (f *frame) number(v any) {
	n := f.n
	if n.minimum == nil && n.maximum == nil && n.exclusiveMin == nil && n.exclusiveMax == nil && n.multipleOf == nil {
		return
	}
	r, _ := numberOf(v)
	if n.minimum != nil && r.Cmp(n.minimum) < 0 {
		f.fail("minimum", "must be >= %v but found %v", f64(n.minimum), v)
	}
	if n.exclusiveMin != nil && r.Cmp(n.exclusiveMin) <= 0 {
		f.fail("exclusiveMinimum", "must be > %v but found %v", f64(n.exclusiveMin), v)
	}
	if n.maximum != nil && r.Cmp(n.maximum) > 0 {
		f.fail("maximum", "must be <= %v but found %v", f64(n.maximum), v)
	}
	if n.exclusiveMax != nil && r.Cmp(n.exclusiveMax) >= 0 {
		f.fail("exclusiveMaximum", "must be < %v but found %v", f64(n.exclusiveMax), v)
	}
	if n.multipleOf != nil && !r.MultipleOf(n.multipleOf) {
		f.fail("multipleOf", "%v not multipleOf %v", v, f64(n.multipleOf))
	}
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
// million digits); ±Inf or 0 beyond a float's exponent.
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
	if err != nil { // an exponent beyond even a big.Float's: ±Inf, or 0
		g, _ := strconv.ParseFloat(fmt.Sprint(v), 64)
		f = new(big.Float).SetPrec(floatPrec).SetFloat64(g)
	}
	return number{f: f}, true
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
