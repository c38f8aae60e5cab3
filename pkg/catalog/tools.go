package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/clientagent/clientagent/pkg/llm"
)

// EntryKind says what a tool of the catalog invokes.
type EntryKind string

const (
	EntrySkill    EntryKind = "skill"
	EntryWorkflow EntryKind = "workflow"
	EntryAskUser  EntryKind = "ask_user"
)

// Artifact-reference description given to the model for x_artifact_ref
// fields (docs/design.md §3.2).
const artifactRefDescription = "artifact_id of an existing conversation artifact"

// approvalNote ends the description of a tool that needs approval.
const approvalNote = "Requires user approval before it runs."

// Param is one top-level parameter of a tool as validation sees it: what
// the original schema (or workflow template) says about it, including the
// vendor keywords that the model never sees.
type Param struct {
	Name        string
	Type        string // JSON Schema type ("" when the schema gives none or several)
	Description string
	Enum        []string
	// Required is true when the original schema requires it.
	Required bool
	// UserInput marks values only the user may supply (never invented).
	UserInput bool
	// ArtifactRef marks an x_artifact_ref field (an artifact id, or a list of them).
	ArtifactRef bool
	// ContextKey is the Env.Context key the platform fills it from
	// (x_context, or "conversation_id"); empty when the model supplies it.
	ContextKey string
	// Attached marks "artifacts": the orchestrator attaches them.
	Attached bool
}

// FormField returns the typed form field asking the user for p.
func (p Param) FormField() FormField {
	t := p.Type
	switch t {
	case "string", "integer", "number", "boolean":
	default:
		t = "string"
	}
	return FormField{Name: p.Name, Type: t, Description: p.Description, Required: p.Required, Enum: p.Enum}
}

// Entry is one tool of the catalog: what it invokes and how its arguments
// are checked.
type Entry struct {
	Kind       EntryKind
	Tool       string
	Capability Capability // set for EntrySkill
	Workflow   Workflow   // set for EntryWorkflow
	// Params are the top-level parameters in declaration order.
	Params []Param
	// RequiresApproval is true for a skill that needs approval, and for a
	// workflow with such a step.
	RequiresApproval bool
	// Unavailable is true when the skill (or a workflow step's skill) is
	// not reachable now.
	Unavailable bool

	def    llm.ToolDefinition
	schema *lazySchema
}

// Param returns the parameter called name.
func (e Entry) Param(name string) (Param, bool) {
	for _, p := range e.Params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// Validate checks args against the entry's schema: the original schema
// (vendor keywords are ignored by the validator) with user-input fields and
// attached artifacts no longer required, because those are asked for or
// attached later (docs/design.md §3.3). The error is a *schemaerr.Error
// for a violation (batch.DescribeValidation makes it readable), or
// ErrNoValidator in a program that checks no arguments.
func (e Entry) Validate(args map[string]any) error {
	s, err := e.schema.get()
	if err != nil {
		return err
	}
	return s.Validate(normalizeJSON(args))
}

// Validator checks a value against one compiled JSON Schema: nil when it
// is valid, a *schemaerr.Error for what is wrong.
type Validator interface{ Validate(v any) error }

// SchemaCompiler compiles one tool's argument schema, named url.
type SchemaCompiler func(url string, schema []byte) (Validator, error)

var schemaCompiler atomic.Pointer[SchemaCompiler]

// UseSchemas makes Entry.Validate compile each tool's schema with c. The
// binaries that check arguments (the validate and api functions, the local
// stack) set it through pkg/schemacheck; the others link no JSON Schema
// validator, and their Validate fails with ErrNoValidator.
func UseSchemas(c SchemaCompiler) { schemaCompiler.Store(&c) }

// ChecksArguments reports whether this program checks tool arguments
// (UseSchemas was called).
func ChecksArguments() bool { return schemaCompiler.Load() != nil }

// ErrNoValidator is Entry.Validate's error in a binary that has no JSON
// Schema validator (UseSchemas was not called).
var ErrNoValidator = errors.New("catalog: this program checks no tool arguments (no JSON Schema validator: see catalog.UseSchemas)")

// lazySchema compiles a validation schema once, on first use.
type lazySchema struct {
	url  string
	raw  []byte
	once sync.Once
	v    Validator
	err  error
}

func (l *lazySchema) get() (Validator, error) {
	compile := schemaCompiler.Load()
	if compile == nil {
		return nil, ErrNoValidator
	}
	l.once.Do(func() { l.v, l.err = (*compile)(l.url, l.raw) })
	return l.v, l.err
}

// Catalog is the set of tools the model sees for one LLM call: one per
// capability, one per workflow template, and ask_user (docs/design.md §3.2). It is
// immutable after New and safe for concurrent use.
type Catalog struct {
	entries []*Entry // skills by tool name, workflows by tool name, ask_user
	byTool  map[string]*Entry
	// rejected holds the compile error of each workflow left out.
	rejected []error
}

// WorkflowErrors returns why each workflow template left out of the
// catalog did not compile against its skills (Compile), in template order.
func (c *Catalog) WorkflowErrors() []error { return slices.Clone(c.rejected) }

// SkillInfo is one skill as GET /v1/catalog lists it (docs/api/openapi.yaml).
type SkillInfo struct {
	Name             string          `json:"name"`
	Description      string          `json:"description"`
	RequiresApproval bool            `json:"requires_approval"`
	InputSchema      json.RawMessage `json:"input_schema"`
	Unavailable      bool            `json:"unavailable,omitempty"`
}

// WorkflowInfo is one workflow as GET /v1/catalog lists it (docs/api/openapi.yaml).
type WorkflowInfo struct {
	ID          string          `json:"id"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Inputs      []WorkflowInput `json:"inputs"`
	// Steps, RequiresApproval and Unavailable go beyond docs/api/openapi.yaml: what a
	// client shows before starting one.
	Steps            []WorkflowStepInfo `json:"steps"`
	RequiresApproval bool               `json:"requires_approval,omitempty"`
	Unavailable      bool               `json:"unavailable,omitempty"`
}

// WorkflowStepInfo is one step of a workflow as the catalog lists it.
type WorkflowStepInfo struct {
	Name  string `json:"name"`
	Skill string `json:"skill"`
}

// New builds the catalog of caps and workflows. Tool names are made unique
// defensively (a later duplicate gets a numeric suffix) so one bad card
// cannot hide another skill.
func New(caps []Capability, workflows []Workflow) *Catalog {
	c := &Catalog{byTool: map[string]*Entry{}}
	taken := map[string]bool{AskUserTool: true}

	sorted := slices.Clone(caps)
	for i := range sorted {
		if sorted[i].Tool == "" || SanitizeToolName(sorted[i].Tool) != sorted[i].Tool {
			id := sorted[i].Tool
			if id == "" {
				id = sorted[i].SkillID
			}
			sorted[i].Tool = SanitizeToolName(id)
		}
	}
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.Tool != b.Tool {
			return a.Tool < b.Tool
		}
		if a.Agent != b.Agent {
			return a.Agent < b.Agent
		}
		return a.SkillID < b.SkillID
	})
	skillsByTool := map[string]Entry{}
	var skills []*Entry
	for _, cp := range sorted {
		cp.Tool = uniqueName(cp.Tool, taken)
		e := skillEntry(cp)
		skills = append(skills, e)
		skillsByTool[cp.Tool] = *e
	}
	sort.SliceStable(skills, func(i, j int) bool { return skills[i].Tool < skills[j].Tool })

	var wfs []*Entry
	for _, w := range workflows {
		compiled, err := Compile(w, skillsByTool)
		if err != nil {
			c.rejected = append(c.rejected, err)
			continue
		}
		name := uniqueName(WorkflowToolName(w.ID), taken)
		wfs = append(wfs, workflowEntry(name, compiled, skillsByTool))
	}
	sort.SliceStable(wfs, func(i, j int) bool { return wfs[i].Tool < wfs[j].Tool })

	c.entries = append(append(skills, wfs...), askUserEntry())
	for _, e := range c.entries {
		c.byTool[e.Tool] = e
	}
	return c
}

// uniqueName returns name, or name with the smallest free suffix _2, _3 …
// (kept within 64 characters), and marks it taken.
func uniqueName(name string, taken map[string]bool) string {
	out := name
	for n := 2; taken[out]; n++ {
		suffix := "_" + strconv.Itoa(n)
		base := name
		if len(base)+len(suffix) > 64 {
			base = base[:64-len(suffix)]
		}
		out = base + suffix
	}
	taken[out] = true
	return out
}

// Tools returns the tool definitions in a deterministic order: skills by
// tool name, workflows by tool name, ask_user.
func (c *Catalog) Tools() []llm.ToolDefinition {
	out := make([]llm.ToolDefinition, 0, len(c.entries))
	for _, e := range c.entries {
		out = append(out, e.def)
	}
	return out
}

// Lookup returns the entry of a tool name.
func (c *Catalog) Lookup(tool string) (Entry, bool) {
	e, ok := c.byTool[tool]
	if !ok {
		return Entry{}, false
	}
	return *e, true
}

// Names returns every tool name in Tools order.
func (c *Catalog) Names() []string {
	out := make([]string, 0, len(c.entries))
	for _, e := range c.entries {
		out = append(out, e.Tool)
	}
	return out
}

// Skills lists the skills for GET /v1/catalog; InputSchema is the plain
// schema the model sees.
func (c *Catalog) Skills() []SkillInfo {
	out := []SkillInfo{}
	for _, e := range c.entries {
		if e.Kind != EntrySkill {
			continue
		}
		out = append(out, SkillInfo{
			Name:             e.Tool,
			Description:      e.Capability.Description,
			RequiresApproval: e.RequiresApproval,
			InputSchema:      e.def.Parameters,
			Unavailable:      e.Unavailable,
		})
	}
	return out
}

// Workflows lists the workflow templates for GET /v1/catalog.
func (c *Catalog) Workflows() []WorkflowInfo {
	out := []WorkflowInfo{}
	for _, e := range c.entries {
		if e.Kind != EntryWorkflow {
			continue
		}
		inputs := e.Workflow.RequiredInputPaths
		if inputs == nil {
			inputs = []WorkflowInput{}
		}
		steps := make([]WorkflowStepInfo, 0, len(e.Workflow.Steps))
		for _, s := range e.Workflow.Steps {
			name := s.Name
			if name == "" {
				name = s.ID
			}
			steps = append(steps, WorkflowStepInfo{Name: name, Skill: s.Skill})
		}
		out = append(out, WorkflowInfo{ID: e.Workflow.ID, Name: e.Workflow.Name, Description: e.Workflow.Description, Inputs: inputs,
			Steps: steps, RequiresApproval: e.RequiresApproval, Unavailable: e.Unavailable})
	}
	return out
}

// plainSchema is the schema of a skill without our extension (docs/design.md §5).
var plainSchema = json.RawMessage(`{"type":"object","properties":{"input":{"type":"string","description":"What to ask the agent, in plain text."}},"required":["input"]}`)

// skillEntry builds the tool of one capability (docs/design.md §3.2).
func skillEntry(cp Capability) *Entry {
	raw := cp.InputSchema
	if cp.Plain || len(bytes.TrimSpace(raw)) == 0 {
		raw = plainSchema
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil || schema == nil {
		// A broken schema must not break the catalog: the skill keeps the
		// plain text input and the error shows when it is validated.
		schema = map[string]any{}
		_ = json.Unmarshal(plainSchema, &schema)
	}
	params := schemaParams(schema, raw, cp.UserInput)

	e := &Entry{
		Kind:             EntrySkill,
		Tool:             cp.Tool,
		Capability:       cp,
		Params:           params,
		RequiresApproval: cp.RequiresApproval,
		Unavailable:      cp.Unavailable,
	}

	var desc []string
	if cp.Unavailable {
		desc = append(desc, "(currently unavailable)")
	}
	if d := strings.TrimSpace(cp.Description); d != "" {
		desc = append(desc, d)
	}
	if n := strings.TrimSpace(cp.UsageNotes); n != "" {
		desc = append(desc, n)
	}
	if cp.RequiresApproval {
		desc = append(desc, approvalNote)
	}
	desc = append(desc, neverInvent(params)...)

	e.def = llm.ToolDefinition{
		Name:        cp.Tool,
		Description: strings.Join(desc, "\n"),
		Parameters:  mustJSON(toolParameters(schema, params)),
	}
	e.schema = &lazySchema{url: "mem:///skills/" + cp.Tool + ".json", raw: mustJSON(validationSchema(schema, params))}
	return e
}

// neverInvent is the sentence per user-input field that tells the model to
// leave it out rather than guess (docs/design.md §3.3).
func neverInvent(params []Param) []string {
	var out []string
	for _, p := range params {
		if p.UserInput {
			out = append(out, fmt.Sprintf("Never invent %s: leave it out if the user has not given it; the user will be asked.", p.Name))
		}
	}
	return out
}

// schemaParams reads the top-level properties of schema in declaration order.
func schemaParams(schema map[string]any, raw json.RawMessage, userInput []string) []Param {
	props, _ := schema["properties"].(map[string]any)
	required := map[string]bool{}
	for _, r := range asStrings(schema["required"]) {
		required[r] = true
	}
	var params []Param
	for _, name := range PropertyOrder(raw, props) {
		ps, _ := props[name].(map[string]any)
		p := Param{
			Name:        name,
			Type:        schemaType(ps),
			Description: str(ps["description"]),
			Enum:        enumStrings(ps["enum"]),
			Required:    required[name],
			UserInput:   slices.Contains(userInput, name) || truthy(vendor(ps, "user_input")),
			ArtifactRef: truthy(vendor(ps, "artifact_ref")),
			Attached:    name == "artifacts",
		}
		if k := str(vendor(ps, "context")); k != "" {
			p.ContextKey = k
		} else if truthy(vendor(ps, "context")) || name == "conversation_id" {
			p.ContextKey = name
		}
		params = append(params, p)
	}
	return params
}

// hiddenFromModel reports whether the model never sees p: the platform
// fills it (context) or attaches it (artifacts).
func hiddenFromModel(p Param) bool { return p.ContextKey != "" || p.Attached }

// toolParameters is the plain JSON Schema the provider sees (docs/design.md §3.2).
func toolParameters(schema map[string]any, params []Param) map[string]any {
	out := stripVendor(schema).(map[string]any)
	out["type"] = "object"
	props, _ := out["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	var required []string
	for _, p := range params {
		if hiddenFromModel(p) {
			delete(props, p.Name)
			continue
		}
		if p.ArtifactRef {
			ps, _ := props[p.Name].(map[string]any)
			if ps == nil {
				ps = map[string]any{}
			}
			if d := str(ps["description"]); d != "" {
				ps["description"] = strings.TrimRight(d, ". ") + ". " + artifactRefDescription
			} else {
				ps["description"] = artifactRefDescription
			}
			props[p.Name] = ps
		}
		if p.Required && !p.UserInput {
			required = append(required, p.Name)
		}
	}
	out["properties"] = props
	if len(required) > 0 {
		out["required"] = required
	} else {
		delete(out, "required")
	}
	return out
}

// validationSchema is the original schema with user-input and attached
// fields dropped from required: a missing one is asked for or attached,
// never a schema violation (docs/design.md §3.3).
func validationSchema(schema map[string]any, params []Param) map[string]any {
	out := make(map[string]any, len(schema))
	for k, v := range schema {
		out[k] = v
	}
	// $schema pointing at an unknown draft would make compilation fetch it.
	delete(out, "$schema")
	var required []string
	for _, p := range params {
		if p.Required && !p.UserInput && !p.Attached {
			required = append(required, p.Name)
		}
	}
	// Required names without a property stay required.
	for _, r := range asStrings(schema["required"]) {
		if !slices.ContainsFunc(params, func(p Param) bool { return p.Name == r }) {
			required = append(required, r)
		}
	}
	if len(required) > 0 {
		out["required"] = required
	} else {
		delete(out, "required")
	}
	return out
}

// Keywords whose value is a map of names to schemas, one schema, or a list
// of schemas; stripVendor walks them so property names that merely start
// with x_ are kept.
var (
	schemaMapKeywords  = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
	schemaOneKeywords  = []string{"items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames", "additionalItems", "unevaluatedProperties", "unevaluatedItems"}
	schemaListKeywords = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
)

// isVendorKeyword reports whether k is a vendor keyword (x_*, x-*).
func isVendorKeyword(k string) bool { return strings.HasPrefix(k, "x_") || strings.HasPrefix(k, "x-") }

// stripVendor returns a deep copy of a schema without vendor keywords.
func stripVendor(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		if l, ok := v.([]any); ok {
			out := make([]any, len(l))
			for i, s := range l {
				out[i] = stripVendor(s)
			}
			return out
		}
		return v
	}
	out := make(map[string]any, len(m))
	for k, val := range m {
		switch {
		case isVendorKeyword(k):
			continue
		case slices.Contains(schemaMapKeywords, k):
			if sub, ok := val.(map[string]any); ok {
				cp := make(map[string]any, len(sub))
				for name, s := range sub {
					cp[name] = stripVendor(s)
				}
				out[k] = cp
				continue
			}
		case slices.Contains(schemaOneKeywords, k), slices.Contains(schemaListKeywords, k):
			out[k] = stripVendor(val)
			continue
		}
		out[k] = val
	}
	return out
}

// vendor reads a vendor keyword in either spelling (x_name, x-name).
func vendor(ps map[string]any, name string) any {
	if v, ok := ps["x_"+name]; ok {
		return v
	}
	return ps["x-"+strings.ReplaceAll(name, "_", "-")]
}

// PropertyOrder returns the names of props in the order the raw schema
// declares them, so forms follow the author's order (sorted when that
// cannot be read). MCP elicitation forms use it too.
func PropertyOrder[V any](raw json.RawMessage, props map[string]V) []string {
	var top map[string]json.RawMessage
	var names []string
	if json.Unmarshal(raw, &top) == nil {
		dec := json.NewDecoder(bytes.NewReader(top["properties"]))
		if t, err := dec.Token(); err == nil && t == json.Delim('{') {
			for dec.More() {
				t, err := dec.Token()
				if err != nil {
					break
				}
				k, _ := t.(string)
				var skip json.RawMessage
				if err := dec.Decode(&skip); err != nil {
					break
				}
				if _, ok := props[k]; ok && !slices.Contains(names, k) {
					names = append(names, k)
				}
			}
		}
	}
	if len(names) != len(props) {
		names = names[:0]
		for k := range props {
			names = append(names, k)
		}
		sort.Strings(names)
	}
	return names
}

// schemaType returns a property's single JSON type, "" when none or several.
func schemaType(ps map[string]any) string {
	switch t := ps["type"].(type) {
	case string:
		return t
	case []any:
		var types []string
		for _, x := range t {
			if s, ok := x.(string); ok && s != "null" {
				types = append(types, s)
			}
		}
		if len(types) == 1 {
			return types[0]
		}
	}
	return ""
}

func enumStrings(v any) []string {
	l, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(l))
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		} else {
			out = append(out, string(mustJSON(x)))
		}
	}
	return out
}

func asStrings(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func truthy(v any) bool {
	switch t := v.(type) {
	case bool:
		return t
	case string:
		return t != "" && t != "false"
	}
	return false
}

// mustJSON marshals v without HTML escaping; v is built from JSON values,
// so it cannot fail.
func mustJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("catalog: marshal %T: %v", v, err))
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// normalizeJSON turns v into the plain JSON value tree the validator
// expects (maps, slices, float64, string, bool, nil).
func normalizeJSON(v any) any {
	var out any
	if err := json.Unmarshal(mustJSON(v), &out); err != nil {
		return v
	}
	return out
}

// ArgumentsHash is the sha256 (hex) of the canonical JSON of args: keys
// sorted, no HTML escaping, numbers as JSON writes them. An approval is
// bound to the hash of the arguments shown (docs/design.md §8).
func ArgumentsHash(args map[string]any) string {
	if args == nil {
		args = map[string]any{}
	}
	// Round-tripping makes 12, int64(12) and 12.0 hash alike.
	sum := sha256.Sum256(mustJSON(normalizeJSON(args)))
	return hex.EncodeToString(sum[:])
}

// askUserEntry is the clarification tool (docs/design.md §3.2).
func askUserEntry() *Entry {
	params := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"questions": map[string]any{
				"type":        "array",
				"minItems":    1,
				"description": "The questions, each a typed form field the user fills in.",
				"items": map[string]any{
					"type": "object",
					"properties": map[string]any{
						"name":        map[string]any{"type": "string", "description": "Short identifier of the answer, e.g. \"deadline\"."},
						"type":        map[string]any{"type": "string", "enum": []any{"string", "integer", "number", "boolean"}},
						"description": map[string]any{"type": "string", "description": "The question as the user sees it."},
						"required":    map[string]any{"type": "boolean"},
						"enum":        map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Allowed answers, when the answer is a choice."},
					},
					"required": []any{"name", "type", "description"},
				},
			},
		},
		"required": []any{"questions"},
	}
	return &Entry{
		Kind: EntryAskUser,
		Tool: AskUserTool,
		Params: []Param{{
			Name: "questions", Type: "array", Required: true,
			Description: "The questions, each a typed form field the user fills in.",
		}},
		def: llm.ToolDefinition{
			Name: AskUserTool,
			Description: "Ask the user open clarification questions, shown as a form of typed fields. " +
				"Use it only for open questions no tool can answer. Do not use it for a parameter that a tool " +
				"marks as user input: call that tool without the parameter and the platform asks the user.",
			Parameters: mustJSON(params),
		},
		schema: &lazySchema{url: "mem:///ask_user.json", raw: mustJSON(params)},
	}
}
