package schemacheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// draft is a JSON Schema version, by the year or number it is known by.
type draft int

const (
	draft4    draft = 4
	draft6    draft = 6
	draft7    draft = 7
	draft2019 draft = 2019
	draft2020 draft = 2020
)

// draftOf is the draft a "$schema" names (http or https, with or without
// an empty fragment), and whether it names one.
func draftOf(s string) (draft, bool) {
	s = strings.TrimSuffix(strings.TrimSuffix(s, "/"), "#")
	s = strings.TrimPrefix(strings.TrimPrefix(s, "https://"), "http://")
	switch s {
	case "json-schema.org/draft-04/schema":
		return draft4, true
	case "json-schema.org/draft-06/schema":
		return draft6, true
	case "json-schema.org/draft-07/schema":
		return draft7, true
	case "json-schema.org/draft/2019-09/schema":
		return draft2019, true
	case "json-schema.org/draft/2020-12/schema", "json-schema.org/schema":
		return draft2020, true
	}
	return 0, false
}

// node is one compiled schema: a boolean schema, or the keywords of an
// object schema that validate (annotations are not kept).
type node struct {
	loc string // JSON pointer of the schema in its document, for messages

	always, never bool // the schemas true and false

	types              []string
	enum               []any
	enumMsg            string
	constant           any
	hasConst           bool
	format             string
	formatOK           func(string) bool
	encoding           string
	decode             func(string) ([]byte, error)
	mediaType          string
	mediaOK            func([]byte) bool
	contentSchema      *node
	minimum, maximum   *big.Rat
	exclusiveMin       *big.Rat
	exclusiveMax       *big.Rat
	multipleOf         *big.Rat
	minLength          int
	maxLength          int
	pattern            *regexp.Regexp
	minItems, maxItems int
	uniqueItems        bool
	prefixItems        []*node // the array form of items before 2020-12, prefixItems since
	restItems          *node   // items after prefixItems (items, or additionalItems after an items array)
	restAllowed        bool    // additionalItems true after an items array: every item evaluated
	restForbidden      bool    // additionalItems false after an items array
	contains           *node
	minContains        int
	maxContains        int
	containsEvaluates  bool // 2020-12: items valid against contains are evaluated
	minProps, maxProps int
	required           []string
	properties         []namedNode // by name
	patternProps       []patternNode
	additionalProps    *node
	additionalAll      bool // additionalProperties true
	additionalNone     bool // additionalProperties false
	propertyNames      *node
	depRequired        []dependency // dependencies (array form) and dependentRequired, by name
	depSchemas         []dependentNode
	resource           string // the URI of the schema resource n is in (its dynamic scope)
	ref                *node  // $ref
	recursiveRef       *node  // $recursiveRef, as written
	recursive          bool   // its target has $recursiveAnchor: the dynamic scope may override it
	dynamicRef         *node  // $dynamicRef, as written
	dynamicName        string // the $dynamicAnchor its target has: the dynamic scope may override it
	not                *node
	allOf, anyOf       []*node
	oneOf              []*node
	ifNode             *node
	thenNode, elseNode *node
	unevaluatedProps   *node
	unevaluatedItems   *node
}

type namedNode struct {
	name string
	node *node
}

type patternNode struct {
	re   *regexp.Regexp
	node *node
}

type dependency struct {
	name     string
	required []string
	keyword  string // dependencies or dependentRequired
}

type dependentNode struct {
	name    string
	node    *node
	keyword string // dependencies or dependentSchemas
}

// Compile compiles the schema raw, named url. The schema is
// self-contained: a $ref may point only into it, never to a file, another
// URL or a draft's meta-schema (a schema may come from an agent card).
func Compile(url string, raw []byte) (*Schema, error) {
	doc, err := decodeJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("load schema %s: %w", url, err)
	}
	c := &compiler{doc: doc, nodes: map[string]*node{}, bases: map[string]string{},
		resources: map[string]string{}, anchors: map[string]string{},
		dynamicAnchors: map[string]map[string]string{}, recursiveAnchors: map[string]bool{}}
	root, err := c.compileRoot(url)
	if err != nil {
		return nil, fmt.Errorf("compile schema %s: %w", url, err)
	}
	s := &Schema{url: url, root: root, tracks: c.tracks, dynamic: map[string]map[string]*node{}, recursive: map[string]*node{}}
	for res, names := range c.dynamicAnchors {
		s.dynamic[res] = map[string]*node{}
		for name, ptr := range names {
			s.dynamic[res][name] = c.nodes[ptr]
		}
	}
	for res := range c.recursiveAnchors {
		s.recursive[res] = c.nodes[c.resources[res]]
	}
	return s, nil
}

// decodeJSON decodes one JSON value, numbers as json.Number.
func decodeJSON(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("invalid character after the top-level value")
	}
	return v, nil
}

// compiler compiles one document. Schemas are compiled once each, by
// their JSON pointer in the document, so a $ref cycle is a cycle of nodes.
type compiler struct {
	doc       any
	draft     draft
	declared  bool              // the schema names its draft ("$schema")
	nodes     map[string]*node  // by pointer
	bases     map[string]string // base URI of each indexed schema, by pointer
	resources map[string]string // pointer of each resource's root, by its URI
	anchors   map[string]string // pointer of each anchor, by URI#name
	// dynamicAnchors are the pointers of each resource's $dynamicAnchors by
	// name, by the resource's URI; recursiveAnchors the resources whose root
	// has $recursiveAnchor: true.
	dynamicAnchors   map[string]map[string]string
	recursiveAnchors map[string]bool
	tracks           bool // some schema has unevaluatedProperties or unevaluatedItems
}

// compileRoot compiles the document, named name: its draft, the index of
// its resources and anchors, then its schemas from the root, refusing
// one that loops.
func (c *compiler) compileRoot(name string) (*node, error) {
	c.draft = draft2020
	if m, ok := c.doc.(map[string]any); ok {
		if s, ok := m["$schema"]; ok {
			str, ok := s.(string)
			if !ok {
				return nil, errors.New("$schema must be a string")
			}
			d, known := draftOf(str)
			if !known {
				return nil, fmt.Errorf("$schema %q names no draft this validator knows (4, 6, 7, 2019-09, 2020-12)", str)
			}
			c.draft, c.declared = d, true
		}
	}
	base, err := url.Parse(name)
	if err != nil {
		return nil, fmt.Errorf("schema name %q: %w", name, err)
	}
	base.Fragment, base.RawFragment = "", ""
	c.resources[base.String()] = ""
	if err := c.index(c.doc, "", base); err != nil {
		return nil, err
	}
	root, err := c.compile("")
	if err != nil {
		return nil, err
	}
	// What a dynamic reference may land on, compiled whether or not a
	// static one reaches it.
	for _, names := range c.dynamicAnchors {
		for _, ptr := range names {
			if _, err := c.compile(ptr); err != nil {
				return nil, err
			}
		}
	}
	for res := range c.recursiveAnchors {
		if _, err := c.compile(c.resources[res]); err != nil {
			return nil, err
		}
	}
	if err := c.checkLoops(); err != nil {
		return nil, err
	}
	return root, nil
}

// idKeyword is the keyword that gives a schema its URI.
func (c *compiler) idKeyword() string {
	if c.draft == draft4 {
		return "id"
	}
	return "$id"
}

// index records the base URI of every schema in the document, the
// resources its $ids start and the anchors it names, walking the
// keywords that hold schemas.
func (c *compiler) index(v any, ptr string, base *url.URL) error {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	if id, ok := m[c.idKeyword()].(string); ok {
		u, err := base.Parse(id)
		if err != nil {
			return fmt.Errorf("%s: %s %q: %w", at(ptr), c.idKeyword(), id, err)
		}
		if c.draft < draft2019 && strings.HasPrefix(id, "#") {
			c.anchors[base.String()+"#"+u.Fragment] = ptr // a plain-name fragment is an anchor
		} else {
			frag := u.Fragment
			u.Fragment, u.RawFragment = "", ""
			base = u
			if _, dup := c.resources[base.String()]; !dup || ptr == "" {
				c.resources[base.String()] = ptr
			}
			if frag != "" {
				c.anchors[base.String()+"#"+frag] = ptr
			}
		}
	}
	if c.draft >= draft2019 {
		for _, kw := range []string{"$anchor", "$dynamicAnchor"} {
			if a, ok := m[kw].(string); ok {
				c.anchors[base.String()+"#"+a] = ptr
			}
		}
		if a, ok := m["$dynamicAnchor"].(string); ok && c.draft >= draft2020 {
			if c.dynamicAnchors[base.String()] == nil {
				c.dynamicAnchors[base.String()] = map[string]string{}
			}
			c.dynamicAnchors[base.String()][a] = ptr
		}
		if r, _ := m["$recursiveAnchor"].(bool); r && c.resources[base.String()] == ptr {
			c.recursiveAnchors[base.String()] = true
		}
	}
	c.bases[ptr] = base.String()
	for kw, sub := range m {
		switch kw {
		case "not", "additionalProperties", "propertyNames", "contains", "if", "then", "else",
			"additionalItems", "unevaluatedProperties", "unevaluatedItems", "contentSchema":
			if err := c.index(sub, ptr+"/"+escape(kw), base); err != nil {
				return err
			}
		case "items", "allOf", "anyOf", "oneOf", "prefixItems":
			if a, ok := sub.([]any); ok {
				for i, s := range a {
					if err := c.index(s, ptr+"/"+escape(kw)+"/"+strconv.Itoa(i), base); err != nil {
						return err
					}
				}
			} else if err := c.index(sub, ptr+"/"+escape(kw), base); err != nil {
				return err
			}
		case "properties", "patternProperties", "definitions", "$defs", "dependentSchemas", "dependencies":
			if o, ok := sub.(map[string]any); ok {
				for name, s := range o {
					if err := c.index(s, ptr+"/"+escape(kw)+"/"+escape(name), base); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// resolve is the pointer of the schema a $ref names, from the schema at
// ptr.
func (c *compiler) resolve(ptr, ref string) (string, error) {
	base, err := url.Parse(c.baseOf(ptr))
	if err != nil {
		return "", err
	}
	u, err := base.Parse(ref)
	if err != nil {
		return "", fmt.Errorf("%s: $ref %q: %w", at(ptr), ref, err)
	}
	frag := u.Fragment
	u.Fragment, u.RawFragment = "", ""
	root, ok := c.resources[u.String()]
	if !ok {
		return "", fmt.Errorf("%s: external $ref %q is not allowed in a schema here", at(ptr), ref)
	}
	if frag == "" {
		return root, nil
	}
	if !strings.HasPrefix(frag, "/") {
		target, ok := c.anchors[u.String()+"#"+frag]
		if !ok {
			return "", fmt.Errorf("%s: $ref %q: no anchor %q in this schema", at(ptr), ref, frag)
		}
		return target, nil
	}
	target := root + frag
	if v, ok := c.lookup(target); !ok || !isSchema(v) {
		return "", fmt.Errorf("%s: $ref %q points at no schema", at(ptr), ref)
	}
	return target, nil
}

// baseOf is the base URI of the schema at ptr: its own when indexed, else
// that of the nearest indexed schema above it.
func (c *compiler) baseOf(ptr string) string {
	for {
		if b, ok := c.bases[ptr]; ok {
			return b
		}
		i := strings.LastIndexByte(ptr, '/')
		if i < 0 {
			return c.bases[""]
		}
		ptr = ptr[:i]
	}
}

// lookup is the value at a JSON pointer of the document.
func (c *compiler) lookup(ptr string) (any, bool) {
	v := c.doc
	if ptr == "" {
		return v, true
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) || (len(tok) > 1 && tok[0] == '0') {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

func isSchema(v any) bool {
	switch v.(type) {
	case map[string]any, bool:
		return true
	}
	return false
}

// compile is the node of the schema at ptr, compiled once.
func (c *compiler) compile(ptr string) (*node, error) {
	if n, ok := c.nodes[ptr]; ok {
		return n, nil
	}
	v, ok := c.lookup(ptr)
	if !ok {
		return nil, fmt.Errorf("%s: no schema here", at(ptr))
	}
	n := &node{loc: ptr, resource: c.baseOf(ptr)}
	c.nodes[ptr] = n
	switch v := v.(type) {
	case bool:
		if c.draft == draft4 { // draft 4 has boolean additionalProperties and additionalItems only
			return nil, fmt.Errorf("%s: a draft-04 schema must be an object", at(ptr))
		}
		n.always, n.never = v, !v
		return n, nil
	case map[string]any:
		return n, c.keywords(n, v)
	}
	return nil, fmt.Errorf("%s: a schema must be an object or a boolean, not %s", at(ptr), jsonType(v))
}

// keywords compiles the keywords of the object schema m into n.
func (c *compiler) keywords(n *node, m map[string]any) error {
	k := keywordReader{c: c, n: n, m: m}
	n.minLength, n.maxLength, n.minItems, n.maxItems, n.minProps, n.maxProps = -1, -1, -1, -1, -1, -1
	n.minContains, n.maxContains = 1, -1
	if ref, ok := m["$ref"]; ok {
		n.ref = k.ref("$ref", ref)
		if c.draft < draft2019 { // the other keywords beside a $ref are ignored
			return k.err
		}
	}
	if c.draft >= draft2019 {
		if ref, ok := m["$recursiveRef"]; ok {
			if n.recursiveRef = k.ref("$recursiveRef", ref); n.recursiveRef != nil {
				n.recursive = c.recursiveAnchors[n.recursiveRef.resource] && c.resources[n.recursiveRef.resource] == n.recursiveRef.loc
			}
		}
	}
	if c.draft >= draft2020 {
		if ref, ok := m["$dynamicRef"]; ok {
			if n.dynamicRef = k.ref("$dynamicRef", ref); n.dynamicRef != nil {
				// Only a plain-name fragment naming the target's own
				// $dynamicAnchor lets the dynamic scope override it.
				if _, frag, _ := strings.Cut(ref.(string), "#"); frag != "" && !strings.HasPrefix(frag, "/") &&
					c.dynamicAnchors[n.dynamicRef.resource][frag] == n.dynamicRef.loc {
					n.dynamicName = frag
				}
			}
		}
	}

	// Validation.
	if t, ok := m["type"]; ok {
		n.types = k.types(t)
	}
	if e, ok := m["enum"]; ok {
		n.enum = k.array("enum", e)
		n.enumMsg = enumMessage(n.enum)
		if len(n.enum) == 0 && c.draft == draft4 {
			k.fail("enum", "must not be empty")
		}
	}
	if c.draft >= draft6 {
		n.constant, n.hasConst = m["const"]
	}
	n.minimum, n.maximum = k.number("minimum"), k.number("maximum")
	n.exclusiveMin = k.exclusive("exclusiveMinimum", &n.minimum)
	n.exclusiveMax = k.exclusive("exclusiveMaximum", &n.maximum)
	if n.multipleOf = k.number("multipleOf"); n.multipleOf != nil && n.multipleOf.Sign() <= 0 {
		k.fail("multipleOf", "must be greater than 0")
	}
	n.minLength, n.maxLength = k.count("minLength"), k.count("maxLength")
	if p, ok := m["pattern"]; ok {
		n.pattern = k.regexp("pattern", p)
	}
	n.minItems, n.maxItems = k.count("minItems"), k.count("maxItems")
	n.uniqueItems = k.boolean("uniqueItems")
	n.minProps, n.maxProps = k.count("minProperties"), k.count("maxProperties")
	if r, ok := m["required"]; ok {
		n.required = k.strings("required", r)
		if len(slices.Compact(slices.Sorted(slices.Values(n.required)))) != len(n.required) {
			k.fail("required", "names a property twice")
		}
	}
	if c.draft >= draft2019 {
		if v := k.count("minContains"); v >= 0 {
			n.minContains = v
		}
		n.maxContains = k.count("maxContains")
		if d, ok := m["dependentRequired"]; ok {
			for _, name := range sortedKeys(k.object("dependentRequired", d)) {
				n.depRequired = append(n.depRequired, dependency{name: name, keyword: "dependentRequired",
					required: k.strings("dependentRequired/"+escape(name), d.(map[string]any)[name])})
			}
		}
	}

	// Applicators.
	n.not = k.schema("not")
	n.allOf, n.anyOf, n.oneOf = k.schemas("allOf"), k.schemas("anyOf"), k.schemas("oneOf")
	if p, ok := m["properties"]; ok {
		props := k.object("properties", p)
		for _, name := range sortedKeys(props) {
			n.properties = append(n.properties, namedNode{name, k.schema("properties/" + escape(name))})
		}
	}
	if p, ok := m["patternProperties"]; ok {
		props := k.object("patternProperties", p)
		for _, pat := range sortedKeys(props) {
			n.patternProps = append(n.patternProps, patternNode{k.regexp("patternProperties", pat),
				k.schema("patternProperties/" + escape(pat))})
		}
	}
	switch a := m["additionalProperties"].(type) {
	case bool:
		n.additionalAll, n.additionalNone = a, !a
	default:
		n.additionalProps = k.schema("additionalProperties")
	}
	if d, ok := m["dependencies"]; ok {
		deps := k.object("dependencies", d)
		for _, name := range sortedKeys(deps) {
			kw := "dependencies/" + escape(name)
			if list, ok := deps[name].([]any); ok {
				n.depRequired = append(n.depRequired, dependency{name: name, keyword: "dependencies",
					required: k.strings(kw, list)})
			} else {
				n.depSchemas = append(n.depSchemas, dependentNode{name, k.schema(kw), "dependencies"})
			}
		}
	}
	if c.draft >= draft6 {
		n.propertyNames, n.contains = k.schema("propertyNames"), k.schema("contains")
	}
	if c.draft >= draft7 && m["if"] != nil {
		n.ifNode, n.thenNode, n.elseNode = k.schema("if"), k.schema("then"), k.schema("else")
	}
	if c.draft >= draft2019 {
		if d, ok := m["dependentSchemas"]; ok {
			for _, name := range sortedKeys(k.object("dependentSchemas", d)) {
				n.depSchemas = append(n.depSchemas, dependentNode{name, k.schema("dependentSchemas/" + escape(name)), "dependentSchemas"})
			}
		}
	}
	if c.draft >= draft2020 {
		n.prefixItems, n.restItems = k.schemas("prefixItems"), k.schema("items")
	} else if _, ok := m["items"].([]any); ok {
		n.prefixItems = k.schemas("items")
		switch a := m["additionalItems"].(type) {
		case bool:
			n.restAllowed, n.restForbidden = a, !a
		default:
			n.restItems = k.schema("additionalItems")
		}
	} else {
		n.restItems = k.schema("items")
	}
	if c.draft >= draft2019 {
		n.unevaluatedProps, n.unevaluatedItems = k.schema("unevaluatedProperties"), k.schema("unevaluatedItems")
		if n.unevaluatedProps != nil || n.unevaluatedItems != nil {
			c.tracks = true
		}
		n.containsEvaluates = c.draft >= draft2020
	}

	// Format: an assertion in drafts 4 to 7 and in a schema that names no
	// draft (the reference implementation's default, which tool schemas
	// were written against); content: an assertion in draft 7 only.
	if f, ok := m["format"]; ok {
		n.format = k.str("format", f)
		if c.draft < draft2019 || !c.declared {
			n.formatOK = formats[n.format]
		}
	}
	if c.draft >= draft7 && c.draft < draft2019 {
		if e, ok := m["contentEncoding"]; ok {
			n.encoding = k.str("contentEncoding", e)
			n.decode = decoders[n.encoding]
		}
		if t, ok := m["contentMediaType"]; ok {
			n.mediaType = k.str("contentMediaType", t)
			n.mediaOK = mediaTypes[n.mediaType]
			n.contentSchema = k.schema("contentSchema")
		}
	}
	return k.err
}

// keywordReader reads the keywords of one object schema, keeping the
// first malformed one as its error.
type keywordReader struct {
	c   *compiler
	n   *node
	m   map[string]any
	err error
}

func (k *keywordReader) fail(kw, format string, args ...any) {
	if k.err == nil {
		k.err = fmt.Errorf("%s: %s", at(k.n.loc+"/"+kw), fmt.Sprintf(format, args...))
	}
}

// schema compiles the subschema at rel, a keyword ("not") or a pointer
// below one ("properties/a"); nil for a keyword the schema does not have.
func (k *keywordReader) schema(rel string) *node {
	if k.err != nil {
		return nil
	}
	if !strings.Contains(rel, "/") {
		if _, ok := k.m[rel]; !ok {
			return nil
		}
	}
	n, err := k.c.compile(k.n.loc + "/" + rel)
	if err != nil {
		k.err = err
	}
	return n
}

func (k *keywordReader) schemas(kw string) []*node {
	v, ok := k.m[kw]
	if !ok {
		return nil
	}
	a := k.array(kw, v)
	out := make([]*node, len(a))
	for i := range a {
		out[i] = k.schema(kw + "/" + strconv.Itoa(i))
	}
	return out
}

func (k *keywordReader) ref(kw string, v any) *node {
	s := k.str(kw, v)
	if k.err != nil {
		return nil
	}
	target, err := k.c.resolve(k.n.loc, s)
	if err != nil {
		k.err = err
		return nil
	}
	n, err := k.c.compile(target)
	if err != nil {
		k.err = err
	}
	return n
}

func (k *keywordReader) str(kw string, v any) string {
	s, ok := v.(string)
	if !ok {
		k.fail(kw, "must be a string, not %s", jsonType(v))
	}
	return s
}

func (k *keywordReader) boolean(kw string) bool {
	v, ok := k.m[kw]
	if !ok {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		k.fail(kw, "must be a boolean, not %s", jsonType(v))
	}
	return b
}

func (k *keywordReader) array(kw string, v any) []any {
	a, ok := v.([]any)
	if !ok {
		k.fail(kw, "must be an array, not %s", jsonType(v))
	}
	return a
}

func (k *keywordReader) object(kw string, v any) map[string]any {
	o, ok := v.(map[string]any)
	if !ok {
		k.fail(kw, "must be an object, not %s", jsonType(v))
	}
	return o
}

func (k *keywordReader) strings(kw string, v any) []string {
	a := k.array(kw, v)
	out := make([]string, 0, len(a))
	for _, x := range a {
		s, ok := x.(string)
		if !ok {
			k.fail(kw, "must hold strings only, not %s", jsonType(x))
			return nil
		}
		out = append(out, s)
	}
	return out
}

var typeNames = []string{"array", "boolean", "integer", "null", "number", "object", "string"}

func (k *keywordReader) types(v any) []string {
	var out []string
	if s, ok := v.(string); ok {
		out = []string{s}
	} else {
		out = k.strings("type", v)
	}
	for _, t := range out {
		if !slices.Contains(typeNames, t) {
			k.fail("type", "%q is not a JSON type (%s)", t, strings.Join(typeNames, ", "))
		}
	}
	return out
}

// number is the keyword kw's value, or nil when it is absent.
func (k *keywordReader) number(kw string) *big.Rat {
	v, ok := k.m[kw]
	if !ok {
		return nil
	}
	r, ok := ratOf(v)
	if !ok {
		k.fail(kw, "must be a number, not %s", jsonType(v))
	}
	return r
}

// exclusive reads exclusiveMinimum or exclusiveMaximum: a number, or in
// draft 4 a boolean that makes the bound beside it exclusive.
func (k *keywordReader) exclusive(kw string, bound **big.Rat) *big.Rat {
	if b, ok := k.m[kw].(bool); ok && k.c.draft == draft4 {
		if !b {
			return nil
		}
		r := *bound
		*bound = nil
		return r
	}
	return k.number(kw)
}

// count is the keyword kw's non-negative integer, or -1 when it is absent.
func (k *keywordReader) count(kw string) int {
	v, ok := k.m[kw]
	if !ok {
		return -1
	}
	r, ok := ratOf(v)
	if !ok || !r.IsInt() || r.Sign() < 0 {
		k.fail(kw, "must be a non-negative integer, not %v", v)
		return -1
	}
	if !r.Num().IsInt64() || r.Num().Int64() > 1<<31 {
		return 1 << 31
	}
	return int(r.Num().Int64())
}

func (k *keywordReader) regexp(kw string, v any) *regexp.Regexp {
	s := k.str(kw, v)
	if k.err != nil {
		return nil
	}
	re, err := regexp.Compile(s)
	if err != nil {
		k.fail(kw, "%q is not a regular expression: %v", s, err)
	}
	return re
}

// enumMessage is what a value outside enum is told: the values when they
// are all primitives.
func enumMessage(enum []any) string {
	strs := make([]string, len(enum))
	for i, e := range enum {
		switch e.(type) {
		case map[string]any, []any:
			return "enum failed"
		}
		strs[i] = fmt.Sprintf("%#v", e)
	}
	if len(strs) == 1 {
		return "value must be " + strs[0]
	}
	return "value must be one of " + strings.Join(strs, ", ")
}

// checkLoops fails for a schema that applies itself to the same value
// without end: a cycle of $refs and in-place applicators (allOf, not,
// if, ...) that never reaches a property or an item.
func (c *compiler) checkLoops() error {
	const (
		unvisited = iota
		visiting
		done
	)
	state := map[*node]int{}
	var visit func(n *node) error
	visit = func(n *node) error {
		switch state[n] {
		case visiting:
			return fmt.Errorf("%s: $ref loops back to this schema without reading the value", at(n.loc))
		case done:
			return nil
		}
		state[n] = visiting
		for _, s := range n.inPlace() {
			if s == nil {
				continue
			}
			if err := visit(s); err != nil {
				return err
			}
		}
		state[n] = done
		return nil
	}
	for _, n := range c.nodes {
		if err := visit(n); err != nil {
			return err
		}
	}
	return nil
}

// inPlace is the subschemas that n applies to the very value it checks.
func (n *node) inPlace() []*node {
	out := []*node{n.ref, n.recursiveRef, n.dynamicRef, n.not, n.ifNode, n.thenNode, n.elseNode}
	out = append(out, n.allOf...)
	out = append(out, n.anyOf...)
	out = append(out, n.oneOf...)
	for _, d := range n.depSchemas {
		out = append(out, d.node)
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// escape escapes one JSON pointer token.
func escape(tok string) string {
	if !strings.ContainsAny(tok, "~/") {
		return tok
	}
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}

// at names a place in the schema for a compile error.
func at(ptr string) string { return "#" + ptr }
