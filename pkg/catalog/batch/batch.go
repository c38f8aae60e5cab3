// Package batch is the call lifecycle of docs/design.md §3.3 and the tool results of
// docs/design.md §3.5: it turns the tool calls of one assistant message into pending
// calls (invalid, needs input, needs approval, ready), applies form answers
// and approval decisions, and builds the compact results the model reads.
// It lives beside package catalog, not in it, because package record
// imports catalog (FormField). It must not call specialists, Valkey or the
// LLM, and it never changes a call the user did not answer for.
package batch

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/schemaerr"
)

// Input sources (docs/design.md §3.5 input_sources).
const (
	SourceModel   = "model"
	SourceUser    = "user"
	SourceContext = "context"
)

// Pause kinds returned by NextPause.
const (
	PauseInput    = "input"
	PauseApproval = "approval"
)

// AnswersKey is the argument of an ask_user call that holds the user's
// answers once the form is answered (source "user").
const AnswersKey = "answers"

var (
	// ErrNotWaiting is returned for answers or a decision on a call that is
	// not waiting for them (the API answers 409).
	ErrNotWaiting = errors.New("call is not waiting for this input")
	// ErrInvalidAnswer wraps a form answer that does not validate; the call
	// keeps waiting with its form (the API answers 4xx).
	ErrInvalidAnswer = errors.New("invalid answer")
	// ErrApprovalStale is returned when a call's arguments no longer hash to
	// what was shown for approval (docs/design.md §8).
	ErrApprovalStale = errors.New("arguments changed since they were shown for approval")
	// ErrInvalidEdit wraps edited arguments that do not validate; nothing
	// changes (the API answers 400 with the reason).
	ErrInvalidEdit = errors.New("invalid arguments")
)

// Validate checks every call of one assistant message, in order, before
// anything runs (docs/design.md §3.3) and returns one pending call per tool call.
func Validate(c *catalog.Catalog, calls []llm.ToolCall, env catalog.Env) []record.PendingCall {
	out := make([]record.PendingCall, 0, len(calls))
	for _, tc := range calls {
		out = append(out, validateCall(c, tc, env))
	}
	return out
}

func validateCall(c *catalog.Catalog, tc llm.ToolCall, env catalog.Env) record.PendingCall {
	pc := record.PendingCall{CallID: tc.ID, Tool: tc.Name}
	e, ok := c.Lookup(tc.Name)
	if !ok {
		pc.Kind = record.KindInvalid
		pc.State = record.CallInvalid
		pc.Error = unknownTool(c, tc.Name)
		return pc
	}
	pc.Kind = kindOf(e.Kind)
	if tc.ArgumentsError != "" {
		return invalid(pc, "malformed JSON arguments: "+tc.ArgumentsError+". Send the arguments as one JSON object.")
	}
	args, err := parseArguments(tc.Arguments)
	if err != nil {
		return invalid(pc, "malformed JSON arguments: "+err.Error()+". Send the arguments as one JSON object.")
	}
	pc.Arguments = args
	pc.FromUser = env.UserCalls[tc.ID]
	source := SourceModel
	if pc.FromUser {
		source = SourceUser
	}
	pc.Sources = make(map[string]string, len(args))
	for k := range args {
		pc.Sources[k] = source
	}
	check(c, e, &pc, env)
	return pc
}

func invalid(pc record.PendingCall, msg string) record.PendingCall {
	pc.State = record.CallInvalid
	pc.Error = msg
	pc.Form = nil
	return pc
}

func kindOf(k catalog.EntryKind) record.CallKind {
	switch k {
	case catalog.EntryWorkflow:
		return record.KindWorkflow
	case catalog.EntryAskUser:
		return record.KindAskUser
	}
	return record.KindSkill
}

// parseArguments decodes the model's argument text; empty text is {}.
func parseArguments(s string) (map[string]any, error) {
	if strings.TrimSpace(s) == "" {
		return map[string]any{}, nil
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("arguments are %s, not a JSON object", jsonKind(v))
	}
	return m, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "an object"
}

// check runs the rules after parsing on pc.Arguments/pc.Sources and sets
// pc's state: the first problem the model must fix wins, then forms, then
// approval (docs/design.md §3.3).
func check(c *catalog.Catalog, e catalog.Entry, pc *record.PendingCall, env catalog.Env) {
	pc.Error = ""
	pc.Form = nil
	pc.Plan = nil
	if e.Kind == catalog.EntryAskUser {
		checkAskUser(e, pc)
		return
	}
	args := pc.Arguments
	if args == nil {
		args = map[string]any{}
		pc.Arguments = args
	}
	if pc.Sources == nil {
		pc.Sources = map[string]string{}
	}

	// Values the platform owns: the model's guess never counts.
	for _, p := range e.Params {
		if p.Attached {
			delete(args, p.Name)
			delete(pc.Sources, p.Name)
			continue
		}
		if p.ContextKey == "" {
			continue
		}
		if v, ok := env.Context[p.ContextKey]; ok && v != nil {
			args[p.Name] = v
			pc.Sources[p.Name] = SourceContext
		} else if pc.Sources[p.Name] == SourceModel {
			delete(args, p.Name)
			delete(pc.Sources, p.Name)
		}
	}
	for _, p := range e.Params {
		if p.ContextKey != "" && p.Required && args[p.Name] == nil {
			*pc = invalid(*pc, fmt.Sprintf("missing runtime input %s: the platform could not supply %q for %s, so this call cannot run here. Do not retry it; tell the user.", p.Name, p.ContextKey, pc.Tool))
			return
		}
	}
	for _, p := range e.Params {
		if p.ArtifactRef && p.Required && isEmpty(args[p.Name]) {
			*pc = invalid(*pc, fmt.Sprintf("missing required artifact reference %s for %s: pass the artifact_id of an existing conversation artifact (known artifacts: %s), or first call the skill that produces one and use the artifact_id from its result.", p.Name, pc.Tool, knownArtifacts(env)))
			return
		}
	}
	if err := e.Validate(args); err != nil {
		// A call the user made asks for what it lacks (the form below).
		if msg := describe(err, pc.FromUser); msg != "" {
			*pc = invalid(*pc, fmt.Sprintf("invalid arguments for %s: %s. Correct the arguments and call %s again.", pc.Tool, msg, pc.Tool))
			return
		}
	}
	if e.Kind == catalog.EntryWorkflow {
		if msg := checkSteps(c, e, args, env); msg != "" {
			*pc = invalid(*pc, msg)
			return
		}
	}
	for _, p := range e.Params {
		if !p.ArtifactRef {
			continue
		}
		for _, id := range artifactIDs(args[p.Name]) {
			if _, ok := env.Artifacts[id]; !ok {
				*pc = invalid(*pc, fmt.Sprintf("unknown artifact id %s in %s; known artifacts: %s, or call the skill that produces one first.", id, p.Name, knownArtifacts(env)))
				return
			}
		}
	}

	var missing, optional []catalog.FormField
	for _, p := range e.Params {
		// docs/design.md §3.2: the user is never asked for an artifact reference.
		asked := p.UserInput || pc.FromUser && p.ContextKey == "" && !p.Attached && !p.ArtifactRef
		if !asked || !isEmpty(args[p.Name]) {
			continue
		}
		if p.Required {
			missing = append(missing, p.FormField())
		} else {
			optional = append(optional, p.FormField())
		}
	}
	if len(missing) > 0 {
		pc.State = record.CallNeedsInput
		pc.Form = append(missing, optional...)
		return
	}
	if e.RequiresApproval {
		h := catalog.ArgumentsHash(args)
		if pc.Approved && pc.ApprovalHash == h {
			pc.State = record.CallReady
			return
		}
		pc.Approved = false
		pc.ApprovalHash = h
		pc.State = record.CallNeedsApproval
		if e.Kind == catalog.EntryWorkflow {
			pc.Plan = e.Workflow.Plan(args)
		}
		return
	}
	pc.State = record.CallReady
}

// checkSteps checks what a workflow's inputs become in each step against
// that step's skill schema, so a value the skill would refuse (holes: 2) is
// an error for the model now rather than a failure halfway through the
// workflow. What earlier steps will produce is not known yet, so arguments
// bound to it are not checked, and values still missing (user input,
// context) are not reported here.
func checkSteps(c *catalog.Catalog, e catalog.Entry, inputs map[string]any, env catalog.Env) string {
	pending := catalog.PendingOutputs(len(e.Workflow.Steps))
	for i, st := range e.Workflow.Steps {
		se, ok := c.Lookup(st.Skill)
		if !ok || se.Kind != catalog.EntrySkill {
			return fmt.Sprintf("workflow %s cannot run: its %s uses skill %s, which is not available. Use the skills directly instead.", e.Tool, e.Workflow.StepLabel(i), st.Skill)
		}
		args, err := e.Workflow.StepArguments(i, inputs, pending)
		if err != nil {
			continue
		}
		for k, v := range args {
			if _, later := v.(catalog.Placeholder); later {
				delete(args, k)
			}
		}
		for _, p := range se.Params {
			if v, ok := env.Context[p.ContextKey]; ok && p.ContextKey != "" {
				args[p.Name] = v
			}
		}
		if err := se.Validate(args); err != nil {
			if msg := describe(err, true); msg != "" {
				return fmt.Sprintf("invalid inputs for %s: %s would get %s. Correct the inputs and call %s again.", e.Tool, e.Workflow.StepLabel(i), msg, e.Tool)
			}
		}
		// docs/design.md §3.3: an artifact id the workflow passes on must exist now
		// (an earlier step's output is left out above).
		for _, p := range se.Params {
			id, ok := args[p.Name].(string)
			if !p.ArtifactRef || !ok || id == "" {
				continue
			}
			if _, known := env.Artifacts[id]; !known {
				return fmt.Sprintf("unknown artifact id %s in the inputs of %s (%s): known artifacts: %s. Pass the artifact_id of an existing conversation artifact.", id, e.Tool, e.Workflow.StepLabel(i), knownArtifacts(env))
			}
		}
	}
	return ""
}

// checkAskUser validates an ask_user call and opens its questions as the form.
func checkAskUser(e catalog.Entry, pc *record.PendingCall) {
	if err := e.Validate(pc.Arguments); err != nil {
		*pc = invalid(*pc, fmt.Sprintf("invalid arguments for %s: %s. Correct the arguments and call %s again.", pc.Tool, DescribeValidation(err), pc.Tool))
		return
	}
	var q struct {
		Questions []catalog.FormField `json:"questions"`
	}
	b, _ := json.Marshal(pc.Arguments)
	if err := json.Unmarshal(b, &q); err != nil {
		*pc = invalid(*pc, "invalid arguments for ask_user: "+err.Error())
		return
	}
	seen := map[string]bool{}
	for _, f := range q.Questions {
		if strings.TrimSpace(f.Name) == "" || seen[f.Name] {
			*pc = invalid(*pc, fmt.Sprintf("invalid arguments for ask_user: question names must be unique and not empty (got %q).", f.Name))
			return
		}
		seen[f.Name] = true
	}
	pc.State = record.CallNeedsInput
	pc.Form = q.Questions
}

func isEmpty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case string:
		return strings.TrimSpace(t) == ""
	}
	return false
}

// artifactIDs reads an artifact reference: one id or a list of ids.
func artifactIDs(v any) []string {
	switch t := v.(type) {
	case string:
		if t != "" {
			return []string{t}
		}
	case []any:
		var out []string
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// knownArtifacts lists the catalog for an error the model can act on.
func knownArtifacts(env catalog.Env) string {
	if len(env.Artifacts) == 0 {
		return "none yet"
	}
	list := make([]artifact.Artifact, 0, len(env.Artifacts))
	for _, a := range env.Artifacts {
		list = append(list, a)
	}
	sort.Slice(list, func(i, j int) bool {
		if !list[i].CreatedAt.Equal(list[j].CreatedAt) {
			return list[i].CreatedAt.Before(list[j].CreatedAt)
		}
		return list[i].ID < list[j].ID
	})
	parts := make([]string, 0, len(list))
	for _, a := range list {
		parts = append(parts, fmt.Sprintf("%s (%s, %s)", a.ID, a.Name, a.MimeType))
	}
	return strings.Join(parts, ", ")
}

// unknownTool names the tool and the tools that exist, closest first.
func unknownTool(c *catalog.Catalog, name string) string {
	names := c.Names()
	var close []string
	for _, n := range names {
		if similar(name, n) {
			close = append(close, n)
		}
	}
	msg := fmt.Sprintf("unknown tool %q.", name)
	if len(close) > 0 {
		msg += " Did you mean " + strings.Join(close, ", ") + "?"
	}
	return msg + " Available tools: " + strings.Join(names, ", ") + "."
}

func similar(a, b string) bool {
	la, lb := strings.ToLower(a), strings.ToLower(b)
	if la == "" || lb == "" {
		return false
	}
	if strings.Contains(la, lb) || strings.Contains(lb, la) {
		return true
	}
	return levenshtein(la, lb) <= max(2, min(len(la), len(lb))/4)
}

func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// DescribeValidation turns a jsonschema error into "field: reason" parts
// the model can act on.
func DescribeValidation(err error) string { return describe(err, false) }

// describe lists the leaf errors; skipMissing leaves out missing properties.
func describe(err error, skipMissing bool) string {
	vs := schemaerr.Violations(err)
	if vs == nil {
		return err.Error()
	}
	var parts []string
	seen := map[string]bool{}
	for _, v := range vs {
		if skipMissing && strings.HasPrefix(v.Message, "missing propert") {
			continue
		}
		s := fieldPath(v.Pointer) + ": " + v.Message
		if !seen[s] {
			seen[s] = true
			parts = append(parts, s)
		}
	}
	// The validator walks properties in map order; sort for stable text.
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// fieldPath turns a JSON pointer (/a/0/b) into a.[0].b style text; the
// root is "arguments", and a property named "" is "" in quotes (its
// pointer is "/").
func fieldPath(ptr string) string {
	if ptr == "" {
		return "arguments"
	}
	var b strings.Builder
	for i, part := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		if _, err := strconv.Atoi(part); err == nil {
			fmt.Fprintf(&b, "[%s]", part)
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		if part == "" {
			part = `""`
		}
		b.WriteString(part)
	}
	return b.String()
}

// NextPause says what the batch waits for: every call needing input
// ("input") first, and only when no form is open every call needing
// approval ("approval"), so approval is never shown while a form is open.
// It returns "" when the batch is ready to run.
func NextPause(calls []record.PendingCall) (kind string, idx []int) {
	for i, pc := range calls {
		if pc.State == record.CallNeedsInput {
			idx = append(idx, i)
		}
	}
	if len(idx) > 0 {
		return PauseInput, idx
	}
	for i, pc := range calls {
		if pc.State == record.CallNeedsApproval {
			idx = append(idx, i)
		}
	}
	if len(idx) > 0 {
		return PauseApproval, idx
	}
	return "", nil
}

// ApplyAnswers merges form answers into pc's arguments with source "user"
// (strings are coerced to the field's type: "12" → 12, "true" → true) and
// validates the call again (docs/design.md §3.3). An answer that does not validate
// returns an error wrapping ErrInvalidAnswer and leaves pc unchanged, still
// waiting with its form. On success pc moves on: to CallNeedsApproval when
// the skill needs approval, CallAnswered for ask_user, else CallReady.
//
// A form opened by a specialist's input-required (pc.A2A set) is checked
// against its own fields only: the call was validated and approved before
// it ran, and the answer continues the same task.
func ApplyAnswers(c *catalog.Catalog, pc *record.PendingCall, answers map[string]any, env catalog.Env) error {
	if pc.State != record.CallNeedsInput {
		return fmt.Errorf("answers for call %s (%s): %w", pc.CallID, pc.State, ErrNotWaiting)
	}
	got, err := coerceAnswers(pc.Form, answers)
	if err != nil {
		return fmt.Errorf("answers for %s: %w: %w", pc.Tool, ErrInvalidAnswer, err)
	}
	next := *pc
	next.Arguments = maps.Clone(pc.Arguments)
	if next.Arguments == nil {
		next.Arguments = map[string]any{}
	}
	next.Sources = maps.Clone(pc.Sources)
	if next.Sources == nil {
		next.Sources = map[string]string{}
	}

	if pc.Kind == record.KindAskUser {
		next.Arguments[AnswersKey] = got
		next.Sources[AnswersKey] = SourceUser
		next.State = record.CallAnswered
		next.Form = nil
		*pc = next
		return nil
	}
	for k, v := range got {
		next.Arguments[k] = v
		next.Sources[k] = SourceUser
	}
	if pc.A2A != nil {
		next.State = record.CallReady
		next.Form = nil
		next.FormNote = ""
		*pc = next
		return nil
	}
	e, ok := c.Lookup(pc.Tool)
	if !ok {
		return fmt.Errorf("answers for %s: %w: the tool is no longer in the catalog", pc.Tool, ErrInvalidAnswer)
	}
	check(c, e, &next, env)
	switch next.State {
	case record.CallInvalid:
		return fmt.Errorf("answers for %s: %w: %s", pc.Tool, ErrInvalidAnswer, next.Error)
	case record.CallNeedsInput:
		return fmt.Errorf("answers for %s: %w: still missing %s", pc.Tool, ErrInvalidAnswer, requiredNames(next.Form))
	}
	next.FormNote = ""
	*pc = next
	return nil
}

// coerceAnswers checks answers against the form: known fields, required
// ones present, types (with string coercion) and enums. An empty optional
// answer is left out.
func coerceAnswers(form []catalog.FormField, answers map[string]any) (map[string]any, error) {
	byName := make(map[string]catalog.FormField, len(form))
	for _, f := range form {
		byName[f.Name] = f
	}
	var unknown []string
	for k := range answers {
		if _, ok := byName[k]; !ok {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("unknown field %s (the form asks for %s)", strings.Join(unknown, ", "), formNames(form))
	}
	out := map[string]any{}
	var problems []string
	for _, f := range form {
		v, ok := answers[f.Name]
		if !ok || isEmpty(v) {
			if f.Required {
				problems = append(problems, f.Name+": required")
			}
			continue
		}
		cv, err := coerce(f, v)
		if err != nil {
			problems = append(problems, f.Name+": "+err.Error())
			continue
		}
		out[f.Name] = cv
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return out, nil
}

// requiredNames lists the form's required fields.
func requiredNames(form []catalog.FormField) string {
	names := make([]string, 0, len(form))
	for _, f := range form {
		if f.Required {
			names = append(names, f.Name)
		}
	}
	return strings.Join(names, ", ")
}

func formNames(form []catalog.FormField) string {
	names := make([]string, 0, len(form))
	for _, f := range form {
		names = append(names, f.Name)
	}
	return strings.Join(names, ", ")
}

// coerce converts one answer to its field's type; numbers come out as
// float64, as they would after a JSON round trip.
func coerce(f catalog.FormField, v any) (any, error) {
	var out any
	switch f.Type {
	case "integer", "number":
		var n float64
		switch t := v.(type) {
		case float64:
			n = t
		case int:
			n = float64(t)
		case int64:
			n = float64(t)
		case json.Number:
			x, err := t.Float64()
			if err != nil {
				return nil, fmt.Errorf("%q is not a number", t)
			}
			n = x
		case string:
			x, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
			if err != nil {
				return nil, fmt.Errorf("%q is not a number", t)
			}
			n = x
		default:
			return nil, fmt.Errorf("expected a %s, got %s", f.Type, jsonKind(v))
		}
		if f.Type == "integer" && n != float64(int64(n)) {
			return nil, fmt.Errorf("%v is not a whole number", n)
		}
		out = n
	case "boolean":
		switch t := v.(type) {
		case bool:
			out = t
		case string:
			switch strings.ToLower(strings.TrimSpace(t)) {
			case "true", "yes", "y", "1", "on":
				out = true
			case "false", "no", "n", "0", "off":
				out = false
			default:
				return nil, fmt.Errorf("%q is not yes or no", t)
			}
		default:
			return nil, fmt.Errorf("expected a boolean, got %s", jsonKind(v))
		}
	default:
		switch t := v.(type) {
		case string:
			out = strings.TrimSpace(t)
		case float64, bool, json.Number, int, int64:
			out = fmt.Sprint(t)
		default:
			return nil, fmt.Errorf("expected text, got %s", jsonKind(v))
		}
	}
	if len(f.Enum) > 0 {
		s, ok := out.(string)
		if !ok {
			b, _ := json.Marshal(out)
			s = string(b)
		}
		found := false
		for _, e := range f.Enum {
			if e == s {
				found = true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("%q is not one of %s", s, strings.Join(f.Enum, ", "))
		}
	}
	return out, nil
}

// ApplyDecision records the user's approval decision on pc. Approval holds
// only for the exact arguments shown: if they no longer hash to
// pc.ApprovalHash it returns ErrApprovalStale and pc stays waiting.
func ApplyDecision(pc *record.PendingCall, approve bool, note string) error {
	if pc.State != record.CallNeedsApproval {
		return fmt.Errorf("decision for call %s (%s): %w", pc.CallID, pc.State, ErrNotWaiting)
	}
	if !approve {
		pc.State = record.CallRejected
		pc.Note = note
		pc.Approved = false
		return nil
	}
	if catalog.ArgumentsHash(pc.Arguments) != pc.ApprovalHash {
		return fmt.Errorf("approve call %s: %w", pc.CallID, ErrApprovalStale)
	}
	pc.State = record.CallReady
	pc.Approved = true
	pc.Note = note
	return nil
}

// ApprovalID names the open approval of a batch: the calls waiting for
// approval with the exact arguments shown (their approval hashes). An
// approval answer must carry it, so a decision covers only what the user
// saw: once the open approval changes (an input-required answer, an edit)
// an answer to the old one is stale. "" when no approval is open.
func ApprovalID(calls []record.PendingCall) string {
	kind, idx := NextPause(calls)
	if kind != PauseApproval {
		return ""
	}
	h := sha256.New()
	for _, i := range idx {
		pc := calls[i]
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00", pc.CallID, pc.Tool, pc.ApprovalHash)
	}
	return "ap_" + hex.EncodeToString(h.Sum(nil))[:24]
}

// forPerson words a call's error result, which tells the model what to
// do next, for the person who edited the call: without the model's
// instructions ("call … again"), saying what is wrong.
func forPerson(msg, tool string) string {
	for _, p := range []string{"invalid arguments for " + tool + ": ", "invalid inputs for " + tool + ": "} {
		msg = strings.TrimPrefix(msg, p)
	}
	for _, s := range []string{" Correct the arguments and call " + tool + " again.", " Correct the inputs and call " + tool + " again."} {
		msg = strings.TrimSuffix(msg, s)
	}
	msg = strings.Replace(msg, ", or call the skill that produces one first.", ".", 1)
	msg = strings.Replace(msg, " Pass the artifact_id of an existing conversation artifact.", "", 1)
	return msg
}

// ApplyEdit replaces the arguments of pc, a call waiting for approval,
// with the user's edit (docs/design.md §9 "modify") and validates them like the
// model's arguments (docs/design.md §3.3): values the platform owns are filled from
// context again, whatever the edit says. Every argument the edit changed
// or added gets source "user"; the rest keep theirs. On success pc still
// waits for approval, of the edited arguments (EditedFrom keeps the hash
// of what was shown); an edit that does not validate, or leaves a required
// input missing, returns an error wrapping ErrInvalidEdit and leaves pc
// unchanged.
func ApplyEdit(c *catalog.Catalog, pc *record.PendingCall, args map[string]any, env catalog.Env) error {
	if pc.State != record.CallNeedsApproval {
		return fmt.Errorf("edit call %s (%s): %w", pc.CallID, pc.State, ErrNotWaiting)
	}
	e, ok := c.Lookup(pc.Tool)
	if !ok {
		return fmt.Errorf("edit %s: %w: the tool is no longer in the catalog", pc.Tool, ErrInvalidEdit)
	}
	next := *pc
	next.Arguments = map[string]any{}
	next.Sources = map[string]string{}
	for k, v := range args {
		next.Arguments[k] = v
		src := pc.Sources[k]
		if old, had := pc.Arguments[k]; !had || src == "" || catalog.ArgumentsHash(map[string]any{"v": old}) != catalog.ArgumentsHash(map[string]any{"v": v}) {
			src = SourceUser
		}
		next.Sources[k] = src
	}
	next.Approved = false
	check(c, e, &next, env)
	switch next.State {
	case record.CallInvalid:
		return fmt.Errorf("edit %s: %w: %s", pc.Tool, ErrInvalidEdit, forPerson(next.Error, pc.Tool))
	case record.CallNeedsInput:
		return fmt.Errorf("edit %s: %w: missing %s", pc.Tool, ErrInvalidEdit, requiredNames(next.Form))
	case record.CallNeedsApproval:
	default:
		return fmt.Errorf("edit %s: %w: the call no longer needs approval", pc.Tool, ErrInvalidEdit)
	}
	if next.ApprovalHash != pc.ApprovalHash {
		next.EditedFrom = pc.ApprovalHash
	}
	*pc = next
	return nil
}
