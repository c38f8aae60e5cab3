package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/clientagent/clientagent/pkg/llm"
)

// WorkflowToolName is the tool name of workflow template id (docs/design.md §3.2
// workflow_tool_name).
func WorkflowToolName(id string) string {
	return SanitizeToolName("workflow_" + SanitizeToolName(id))
}

// workflowEntry builds the tool of one workflow template: its inputs as
// flat properties keyed by dotted path (docs/design.md §3.2).
func workflowEntry(tool string, w Workflow, skills map[string]Entry) *Entry {
	props := map[string]any{}
	var required []string
	params := make([]Param, 0, len(w.RequiredInputPaths))
	for _, in := range w.RequiredInputPaths {
		ps := map[string]any{"type": inputType(in.Type)}
		desc := in.Description
		if in.ArtifactRef {
			desc = strings.TrimLeft(strings.TrimRight(desc, ". ")+". "+artifactRefDescription, ". ")
		}
		if desc != "" {
			ps["description"] = desc
		}
		if len(in.Enum) > 0 {
			enum := make([]any, len(in.Enum))
			for i, v := range in.Enum {
				enum[i] = v
			}
			ps["enum"] = enum
		}
		props[in.Path] = ps
		if !in.UserInput {
			required = append(required, in.Path)
		}
		params = append(params, Param{
			Name: in.Path, Type: inputType(in.Type), Description: in.Description,
			Enum: in.Enum, Required: true, UserInput: in.UserInput, ArtifactRef: in.ArtifactRef,
		})
	}
	schema := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		schema["required"] = required
	}

	e := &Entry{Kind: EntryWorkflow, Tool: tool, Workflow: w, Params: params}
	var steps []string
	for _, s := range w.Steps {
		steps = append(steps, s.Skill)
		// Compile saw every skill: here only whether it is reachable now.
		se := skills[s.Skill]
		e.Unavailable = e.Unavailable || se.Unavailable
		e.RequiresApproval = e.RequiresApproval || se.RequiresApproval
	}
	var desc []string
	if e.Unavailable {
		desc = append(desc, "(currently unavailable)")
	}
	head := strings.TrimSpace(w.Name)
	if d := strings.TrimSpace(w.Description); d != "" {
		if head != "" {
			head += ": "
		}
		head += d
	}
	if head != "" {
		desc = append(desc, head)
	}
	if len(steps) > 0 {
		desc = append(desc, "Workflow: runs "+strings.Join(steps, " → ")+" in one call.")
	}
	if e.RequiresApproval {
		desc = append(desc, approvalNote)
	}
	desc = append(desc, neverInvent(params)...)
	e.def = llm.ToolDefinition{Name: tool, Description: strings.Join(desc, "\n"), Parameters: mustJSON(schema)}
	e.schema = &lazySchema{url: "mem:///workflows/" + tool + ".json", raw: mustJSON(schema)}
	return e
}

func inputType(t string) string {
	switch t {
	case "integer", "number", "boolean":
		return t
	}
	return "string"
}

// ErrInvalidWorkflow is wrapped by LoadWorkflows and Compile for a template
// that does not make sense: no id, no steps, a binding that resolves to no
// input or earlier step, an unknown skill, an argument the skill does not
// take.
var ErrInvalidWorkflow = errors.New("invalid workflow template")

// MissingSkillError is Compile's error for a step whose skill no
// specialist offers: the template is sound, the deployment lacks the skill
// (a specialist down or not configured). It is an ErrInvalidWorkflow.
type MissingSkillError struct {
	Workflow, Skill string
	msg             string
}

func (e *MissingSkillError) Error() string { return e.msg }
func (e *MissingSkillError) Unwrap() error { return ErrInvalidWorkflow }

// LoadWorkflows reads every *.json file in dir of fsys, each one Workflow,
// in file-name order, and checks what can be checked without the skills:
// an id, unique ids, at least one step, known input types, and bindings
// that name a declared input or an earlier step. Compile (run by New)
// checks the rest against the skills.
func LoadWorkflows(fsys fs.FS, dir string) ([]Workflow, error) {
	files, err := fs.Glob(fsys, path.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("list workflow templates in %s: %w", dir, err)
	}
	slices.Sort(files)
	var out []Workflow
	seen := map[string]string{}
	for _, f := range files {
		b, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, fmt.Errorf("read workflow template %s: %w", f, err)
		}
		var w Workflow
		dec := json.NewDecoder(bytes.NewReader(b))
		// A misspelt key ("input", "args") would silently drop what it holds.
		dec.DisallowUnknownFields()
		if err := dec.Decode(&w); err != nil {
			return nil, fmt.Errorf("workflow template %s: %w: %v", f, ErrInvalidWorkflow, err)
		}
		if err := w.check(); err != nil {
			return nil, fmt.Errorf("workflow template %s: %w", f, err)
		}
		if other, ok := seen[w.ID]; ok {
			return nil, fmt.Errorf("workflow template %s: %w: id %q also in %s", f, ErrInvalidWorkflow, w.ID, other)
		}
		seen[w.ID] = f
		out = append(out, w)
	}
	return out, nil
}

// StepLabel names step i in reports: its 1-based number, its name and
// its skill (`step 2 "Convert to PNG" (convert_svg_to_png)`).
func (w Workflow) StepLabel(i int) string {
	if i < 0 || i >= len(w.Steps) {
		return fmt.Sprintf("step %d", i+1)
	}
	s := w.Steps[i]
	name := s.Name
	if name == "" {
		name = s.ID
	}
	if name == "" {
		return fmt.Sprintf("step %d (%s)", i+1, s.Skill)
	}
	return fmt.Sprintf("step %d %q (%s)", i+1, name, s.Skill)
}

// check reports what is wrong with w's structure, wrapping ErrInvalidWorkflow.
func (w Workflow) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidWorkflow, w.ID, fmt.Sprintf(format, args...))
	}
	if w.ID == "" {
		return fmt.Errorf("%w: no id", ErrInvalidWorkflow)
	}
	if len(w.Steps) == 0 {
		return bad("no steps")
	}
	inputs := map[string]bool{}
	for _, in := range w.Inputs {
		if in.Path == "" || inputs[in.Path] {
			return bad("empty or duplicate input path %q", in.Path)
		}
		switch in.Type {
		case "", "string", "integer", "number", "boolean":
		default:
			return bad("input %s has type %q (want string, integer, number or boolean)", in.Path, in.Type)
		}
		inputs[in.Path] = true
	}
	stepIDs := map[string]bool{}
	for i, s := range w.Steps {
		if s.ID == "" {
			continue
		}
		if _, err := strconv.Atoi(s.ID); err == nil || strings.ContainsAny(s.ID, ". {}") || stepIDs[s.ID] {
			return bad("%s: id %q must be unique, not a number, without dots, spaces or braces", w.StepLabel(i), s.ID)
		}
		stepIDs[s.ID] = true
	}
	used := map[string]bool{}
	for i, s := range w.Steps {
		if s.Skill == "" {
			return bad("%s names no skill", w.StepLabel(i))
		}
		var err error
		walkTemplates(s.Arguments, func(ref string) {
			if err != nil {
				return
			}
			switch {
			case strings.HasPrefix(ref, "inputs."):
				p := strings.TrimPrefix(ref, "inputs.")
				if !inputs[p] {
					err = bad("%s: unresolved binding {{%s}}: no input %q is declared (inputs: %s)", w.StepLabel(i), ref, p, w.inputList())
				}
				used[p] = true
			case strings.HasPrefix(ref, "steps."):
				r, perr := w.parseStepRef(ref)
				switch {
				case perr != nil:
					err = bad("%s: unresolved binding {{%s}}: %v", w.StepLabel(i), ref, perr)
				case r.step >= i:
					err = bad("%s: unresolved binding {{%s}}: it names %s, which is not an earlier step", w.StepLabel(i), ref, w.StepLabel(r.step))
				}
			default:
				err = bad("%s: unresolved binding {{%s}}: want {{inputs.<path>}} or {{steps.<id>.artifacts.<i>}}", w.StepLabel(i), ref)
			}
		})
		if err != nil {
			return err
		}
	}
	for _, in := range w.Inputs {
		if !used[in.Path] {
			return bad("input %s is bound to no step argument", in.Path)
		}
	}
	return nil
}

func (w Workflow) inputList() string {
	if len(w.Inputs) == 0 {
		return "none"
	}
	var ps []string
	for _, in := range w.Inputs {
		ps = append(ps, in.Path)
	}
	return strings.Join(ps, ", ")
}

// Compile checks w against the skills it calls (by tool name) and returns
// it with RequiredInputPaths set (docs/design.md §3.2): every step's skill exists,
// every argument is a parameter of the skill, every parameter the skill
// requires is bound (nobody could supply it halfway through), and an input
// bound to a parameter takes the parameter's type, enum, description,
// user-input and artifact-reference marks unless the template says
// otherwise; a declared type must fit the parameter's.
func Compile(w Workflow, skills map[string]Entry) (Workflow, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidWorkflow, w.ID, fmt.Sprintf(format, args...))
	}
	if err := w.check(); err != nil {
		return w, err
	}
	inputs := make([]WorkflowInput, len(w.Inputs))
	copy(inputs, w.Inputs)
	byPath := map[string]*WorkflowInput{}
	for i := range inputs {
		byPath[inputs[i].Path] = &inputs[i]
	}
	typed := map[string]bool{}
	for _, in := range w.Inputs {
		typed[in.Path] = in.Type != ""
	}
	for i, s := range w.Steps {
		e, ok := skills[s.Skill]
		if !ok {
			return w, &MissingSkillError{Workflow: w.ID, Skill: s.Skill,
				msg: bad("%s: unknown skill %q (skills: %s)", w.StepLabel(i), s.Skill, strings.Join(slices.Sorted(maps.Keys(skills)), ", ")).Error()}
		}
		for _, name := range slices.Sorted(maps.Keys(s.Arguments)) {
			p, ok := e.Param(name)
			if !ok || hiddenFromModel(p) {
				return w, bad("%s: argument %q is not a parameter of %s (parameters: %s)", w.StepLabel(i), name, s.Skill, modelParams(e))
			}
			str, isStr := s.Arguments[name].(string)
			m := wholeTemplateRe.FindStringSubmatch(str)
			if !isStr || m == nil || !strings.HasPrefix(m[1], "inputs.") {
				continue
			}
			in := byPath[strings.TrimPrefix(m[1], "inputs.")]
			if err := bindInput(in, p, typed[in.Path]); err != nil {
				return w, bad("%s: argument %s: %v", w.StepLabel(i), name, err)
			}
			typed[in.Path] = true
		}
		for _, p := range e.Params {
			if p.Required && !hiddenFromModel(p) && s.Arguments[p.Name] == nil {
				return w, bad("%s: %s requires %q, which is bound to nothing (add it to the step's arguments)", w.StepLabel(i), s.Skill, p.Name)
			}
		}
	}
	for i := range inputs {
		if inputs[i].Type == "" {
			inputs[i].Type = "string"
		}
	}
	w.RequiredInputPaths = inputs
	return w, nil
}

// bindInput completes in from the skill parameter p it is bound to as a
// whole value; typed says in's type is already fixed (declared, or by an
// earlier binding), and then it must fit p's.
func bindInput(in *WorkflowInput, p Param, typed bool) error {
	switch pt := p.Type; {
	case pt == "" || pt == in.Type || (pt == "number" && in.Type == "integer"):
	case !typed && slices.Contains([]string{"string", "integer", "number", "boolean"}, pt):
		in.Type = pt
	case !typed:
		return fmt.Errorf("input %s cannot be bound to %s, a parameter of type %s", in.Path, p.Name, pt)
	default:
		return fmt.Errorf("input %s is %s, but parameter %s is %s", in.Path, in.Type, p.Name, pt)
	}
	if in.Description == "" {
		in.Description = p.Description
	}
	if len(in.Enum) == 0 {
		in.Enum = p.Enum
	}
	in.UserInput = in.UserInput || p.UserInput
	in.ArtifactRef = in.ArtifactRef || p.ArtifactRef
	return nil
}

// modelParams lists the parameters of e a step may bind.
func modelParams(e Entry) string {
	var out []string
	for _, p := range e.Params {
		if !hiddenFromModel(p) {
			out = append(out, p.Name)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// templateRe finds {{ ref }} templates; wholeTemplateRe matches a string
// that is exactly one template.
var (
	templateRe      = regexp.MustCompile(`\{\{\s*([^{}]+?)\s*\}\}`)
	wholeTemplateRe = regexp.MustCompile(`^\{\{\s*([^{}]+?)\s*\}\}$`)
)

func walkTemplates(v any, f func(ref string)) {
	switch t := v.(type) {
	case string:
		for _, m := range templateRe.FindAllStringSubmatch(t, -1) {
			f(m[1])
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			walkTemplates(t[k], f)
		}
	case []any:
		for _, x := range t {
			walkTemplates(x, f)
		}
	}
}

// stepRef is a parsed binding to an earlier step's output.
type stepRef struct {
	step  int    // the step's 0-based index
	field string // "artifact", "summary" or "result"
	idx   int    // artifact index
	path  string // dotted path into the result ("" for all of it)
}

// parseStepRef parses a binding to an earlier step's output:
// "steps.<id>.artifacts.<i>", "steps.<id>.artifact" (the first),
// "steps.<id>.summary", "steps.<id>.result" or "steps.<id>.result.<path>";
// <id> is a step ID or a 0-based index.
func (w Workflow) parseStepRef(ref string) (stepRef, error) {
	parts := strings.Split(ref, ".")
	if len(parts) < 3 {
		return stepRef{}, errors.New(stepRefForms)
	}
	var r stepRef
	switch parts[2] {
	case "artifact":
		if len(parts) != 3 {
			return stepRef{}, errors.New(stepRefForms)
		}
		r.field = "artifact"
	case "artifacts":
		if len(parts) != 4 {
			return stepRef{}, errors.New(stepRefForms)
		}
		idx, err := strconv.Atoi(parts[3])
		if err != nil || idx < 0 {
			return stepRef{}, fmt.Errorf("artifact index %q is not a number", parts[3])
		}
		r.field, r.idx = "artifact", idx
	case "summary":
		if len(parts) != 3 {
			return stepRef{}, errors.New(stepRefForms)
		}
		r.field = "summary"
	case "result":
		r.field, r.path = "result", strings.Join(parts[3:], ".")
	default:
		return stepRef{}, errors.New(stepRefForms)
	}
	for i, s := range w.Steps {
		if s.ID != "" && s.ID == parts[1] {
			r.step = i
			return r, nil
		}
	}
	if n, err := strconv.Atoi(parts[1]); err == nil && n >= 0 && n < len(w.Steps) {
		r.step = n
		return r, nil
	}
	return stepRef{}, fmt.Errorf("no step %q", parts[1])
}

const stepRefForms = "want steps.<id>.artifact, steps.<id>.artifacts.<i>, steps.<id>.summary or steps.<id>.result[.<path>]"

// StepOutput is what a finished step gives the bindings of later steps.
type StepOutput struct {
	Artifacts []string // the ids of the artifacts it produced, in order
	Summary   string
	Result    any // its structured result (decoded JSON), nil when none
	// Pending marks a step that has not run yet (a plan, or a check
	// before running): a binding to it resolves to a Placeholder.
	Pending bool
}

// Placeholder stands for a value a step has not produced yet, as in
// "<artifact 1 of step 2>".
type Placeholder string

// PendingOutputs are the outputs of n steps none of which has run.
func PendingOutputs(n int) []StepOutput {
	out := make([]StepOutput, n)
	for i := range out {
		out[i].Pending = true
	}
	return out
}

// Plan returns the steps a call of w with inputs will run, with each
// step's arguments resolved; what earlier steps will produce is named, not
// known yet. A step whose arguments do not resolve shows its template.
func (w Workflow) Plan(inputs map[string]any) []PlanStep {
	pending := PendingOutputs(len(w.Steps))
	out := make([]PlanStep, 0, len(w.Steps))
	for i, s := range w.Steps {
		args, err := w.StepArguments(i, inputs, pending)
		if err != nil {
			args = s.Arguments
		}
		name := s.Name
		if name == "" {
			name = s.ID
		}
		out = append(out, PlanStep{Name: name, Skill: s.Skill, Arguments: args})
	}
	return out
}

// errAbsent marks a whole-string template whose input was not given: the
// argument is left out, so an optional skill parameter stays unset.
var errAbsent = errors.New("absent input")

// StepArguments resolves step i's argument templates with the workflow's
// inputs (keyed by dotted path, as the workflow tool receives them; a
// nested map is read too) and the outputs of the steps before it. A string
// that is one whole template takes the value with its JSON type
// ("{{inputs.drawing.holes}}" → 6); a template inside a longer string is
// formatted into it. A whole-string template of an input that was not
// given leaves the argument out. A binding to a pending step resolves to a
// Placeholder.
func (w Workflow) StepArguments(i int, inputs map[string]any, outputs []StepOutput) (map[string]any, error) {
	if i < 0 || i >= len(w.Steps) {
		return nil, fmt.Errorf("workflow %s: no step %d", w.ID, i)
	}
	resolve := func(ref string) (any, error) {
		switch {
		case strings.HasPrefix(ref, "inputs."):
			v, ok := lookupInput(inputs, strings.TrimPrefix(ref, "inputs."))
			if !ok {
				return nil, errAbsent
			}
			return v, nil
		case strings.HasPrefix(ref, "steps."):
			r, err := w.parseStepRef(ref)
			if err != nil {
				return nil, fmt.Errorf("template {{%s}}: %w", ref, err)
			}
			if r.step >= i || r.step >= len(outputs) {
				return nil, fmt.Errorf("template {{%s}}: %s has not run before this step", ref, w.StepLabel(r.step))
			}
			return outputs[r.step].value(r, ref)
		}
		return nil, fmt.Errorf("unknown template {{%s}}", ref)
	}
	out := map[string]any{}
	for k, v := range w.Steps[i].Arguments {
		r, err := resolveValue(v, resolve)
		if errors.Is(err, errAbsent) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("workflow %s %s argument %s: %w", w.ID, w.StepLabel(i), k, err)
		}
		out[k] = r
	}
	return out, nil
}

// StepSources names where each of step i's arguments comes from (docs/design.md
// §3.5 input_sources), for the specialist: an argument that is one
// workflow input has that input's source in callSources (model when it
// has none); anything the template writes or computes (a literal, an
// earlier step's output, a formatted string) is "context", supplied by the
// platform.
func (w Workflow) StepSources(i int, callSources map[string]string) map[string]string {
	if i < 0 || i >= len(w.Steps) {
		return nil
	}
	out := make(map[string]string, len(w.Steps[i].Arguments))
	for k, v := range w.Steps[i].Arguments {
		out[k] = "context"
		str, ok := v.(string)
		if !ok {
			continue
		}
		if m := wholeTemplateRe.FindStringSubmatch(str); m != nil && strings.HasPrefix(m[1], "inputs.") {
			out[k] = "model"
			if src := callSources[strings.TrimPrefix(m[1], "inputs.")]; src != "" {
				out[k] = src
			}
		}
	}
	return out
}

// value is what binding r (written as ref) takes from o.
func (o StepOutput) value(r stepRef, ref string) (any, error) {
	if o.Pending {
		what := r.field
		switch {
		case r.field == "artifact":
			what = fmt.Sprintf("artifact %d", r.idx+1)
		case r.field == "result" && r.path != "":
			what = "result." + r.path
		}
		return Placeholder(fmt.Sprintf("<%s of step %d>", what, r.step+1)), nil
	}
	switch r.field {
	case "artifact":
		if r.idx >= len(o.Artifacts) {
			return nil, fmt.Errorf("template {{%s}}: step %d produced %d artifacts", ref, r.step+1, len(o.Artifacts))
		}
		return o.Artifacts[r.idx], nil
	case "summary":
		return o.Summary, nil
	}
	if r.path == "" {
		if o.Result == nil {
			return nil, fmt.Errorf("template {{%s}}: step %d returned no structured result", ref, r.step+1)
		}
		return o.Result, nil
	}
	m, ok := o.Result.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("template {{%s}}: step %d returned no structured result", ref, r.step+1)
	}
	v, ok := lookupInput(m, r.path)
	if !ok {
		return nil, fmt.Errorf("template {{%s}}: step %d's result has no %s", ref, r.step+1, r.path)
	}
	return v, nil
}

func resolveValue(v any, resolve func(string) (any, error)) (any, error) {
	switch t := v.(type) {
	case string:
		if m := wholeTemplateRe.FindStringSubmatch(t); m != nil {
			return resolve(m[1])
		}
		var firstErr error
		s := templateRe.ReplaceAllStringFunc(t, func(tpl string) string {
			ref := templateRe.FindStringSubmatch(tpl)[1]
			r, err := resolve(ref)
			if err != nil {
				if firstErr == nil {
					if errors.Is(err, errAbsent) {
						err = fmt.Errorf("template {{%s}}: input not given", ref)
					}
					firstErr = err
				}
				return ""
			}
			switch x := r.(type) {
			case string:
				return x
			case Placeholder:
				return string(x)
			}
			return string(mustJSON(r))
		})
		return s, firstErr
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			r, err := resolveValue(x, resolve)
			if errors.Is(err, errAbsent) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, 0, len(t))
		for _, x := range t {
			r, err := resolveValue(x, resolve)
			if errors.Is(err, errAbsent) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, nil
	}
	return v, nil
}

// lookupInput finds a dotted path as a flat key first, then as nested maps.
func lookupInput(inputs map[string]any, p string) (any, bool) {
	if v, ok := inputs[p]; ok {
		return v, true
	}
	var cur any = inputs
	for _, part := range strings.Split(p, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}
