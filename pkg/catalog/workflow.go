package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/clientagent/clientagent/pkg/llm"
)

// WorkflowToolName is the tool name of workflow template id (spec §3.2
// workflow_tool_name).
func WorkflowToolName(id string) string {
	return SanitizeToolName("workflow_" + SanitizeToolName(id))
}

// workflowEntry builds the tool of one workflow template: its inputs as
// flat properties keyed by dotted path (spec §3.2).
func workflowEntry(tool string, w Workflow, skills map[string]Capability) *Entry {
	props := map[string]any{}
	var required []string
	params := make([]Param, 0, len(w.RequiredInputPaths))
	for _, in := range w.RequiredInputPaths {
		ps := map[string]any{"type": inputType(in.Type)}
		if in.Description != "" {
			ps["description"] = in.Description
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
			Enum: in.Enum, Required: true, UserInput: in.UserInput,
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
		cp, ok := skills[s.Skill]
		if !ok || cp.Unavailable {
			e.Unavailable = true
		}
		if ok && cp.RequiresApproval {
			e.RequiresApproval = true
		}
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

// ErrInvalidWorkflow is wrapped by LoadWorkflows for a template that does
// not make sense (no id, no steps, a template naming an unknown input).
var ErrInvalidWorkflow = errors.New("invalid workflow template")

// LoadWorkflows reads every *.json file in dir of fsys, each one Workflow,
// in file-name order, and checks them: an id, unique ids, at least one
// step, known input types and templates that name declared inputs and
// earlier steps.
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
		if err := json.Unmarshal(b, &w); err != nil {
			return nil, fmt.Errorf("decode workflow template %s: %w", f, err)
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

// check reports what is wrong with w, wrapping ErrInvalidWorkflow.
func (w Workflow) check() error {
	if w.ID == "" {
		return fmt.Errorf("%w: no id", ErrInvalidWorkflow)
	}
	if len(w.Steps) == 0 {
		return fmt.Errorf("%w: %s has no steps", ErrInvalidWorkflow, w.ID)
	}
	inputs := map[string]bool{}
	for _, in := range w.RequiredInputPaths {
		if in.Path == "" || inputs[in.Path] {
			return fmt.Errorf("%w: %s: empty or duplicate input path %q", ErrInvalidWorkflow, w.ID, in.Path)
		}
		switch in.Type {
		case "string", "integer", "number", "boolean":
		default:
			return fmt.Errorf("%w: %s: input %s has type %q (want string, integer, number or boolean)", ErrInvalidWorkflow, w.ID, in.Path, in.Type)
		}
		inputs[in.Path] = true
	}
	for i, s := range w.Steps {
		if s.Skill == "" {
			return fmt.Errorf("%w: %s: step %d names no skill", ErrInvalidWorkflow, w.ID, i)
		}
		var bad error
		walkTemplates(s.Arguments, func(ref string) {
			if bad != nil {
				return
			}
			switch {
			case strings.HasPrefix(ref, "inputs."):
				if !inputs[strings.TrimPrefix(ref, "inputs.")] {
					bad = fmt.Errorf("%w: %s: step %d uses undeclared input {{%s}}", ErrInvalidWorkflow, w.ID, i, ref)
				}
			case strings.HasPrefix(ref, "steps."):
				n, _, err := parseStepRef(ref)
				if err != nil || n >= i {
					bad = fmt.Errorf("%w: %s: step %d uses {{%s}}, which is not an earlier step's artifact", ErrInvalidWorkflow, w.ID, i, ref)
				}
			default:
				bad = fmt.Errorf("%w: %s: step %d uses unknown template {{%s}}", ErrInvalidWorkflow, w.ID, i, ref)
			}
		})
		if bad != nil {
			return bad
		}
	}
	return nil
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
		for _, x := range t {
			walkTemplates(x, f)
		}
	case []any:
		for _, x := range t {
			walkTemplates(x, f)
		}
	}
}

// parseStepRef parses "steps.<n>.artifacts.<i>".
func parseStepRef(ref string) (step, idx int, err error) {
	parts := strings.Split(ref, ".")
	if len(parts) != 4 || parts[0] != "steps" || parts[2] != "artifacts" {
		return 0, 0, fmt.Errorf("template {{%s}}: want steps.<n>.artifacts.<i>", ref)
	}
	step, err1 := strconv.Atoi(parts[1])
	idx, err2 := strconv.Atoi(parts[3])
	if err1 != nil || err2 != nil || step < 0 || idx < 0 {
		return 0, 0, fmt.Errorf("template {{%s}}: want steps.<n>.artifacts.<i> with numbers", ref)
	}
	return step, idx, nil
}

// errAbsent marks a whole-string template whose input was not given: the
// argument is left out, so an optional skill parameter stays unset.
var errAbsent = errors.New("absent input")

// StepArguments resolves step i's argument templates with the workflow's
// inputs (keyed by dotted path, as the workflow tool receives them; a
// nested map is read too) and the artifact ids each earlier step produced.
// A string that is one whole template takes the value with its JSON type
// ("{{inputs.drawing.holes}}" → 6); a template inside a longer string is
// formatted into it. A whole-string template of an input that was not
// given leaves the argument out.
func (w Workflow) StepArguments(i int, inputs map[string]any, stepArtifacts [][]string) (map[string]any, error) {
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
			n, idx, err := parseStepRef(ref)
			if err != nil {
				return nil, err
			}
			if n >= i || n >= len(stepArtifacts) || idx >= len(stepArtifacts[n]) {
				return nil, fmt.Errorf("template {{%s}}: step %d produced no such artifact", ref, n)
			}
			return stepArtifacts[n][idx], nil
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
			return nil, fmt.Errorf("workflow %s step %d argument %s: %w", w.ID, i, k, err)
		}
		out[k] = r
	}
	return out, nil
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
			if s, ok := r.(string); ok {
				return s
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
