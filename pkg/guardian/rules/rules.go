// Package rules is the built-in guardian: a rule set from a JSON or YAML
// file (CLIENTAGENT_GUARDIAN=rules:<file>), checked in process with no
// outbound call. A rule is a deny pattern (a case-insensitive substring,
// optionally matched across spacing, or an RE2 regular expression) or a PII detector (email, phone, card — card
// numbers are checked with Luhn, spaces and dashes allowed), applies to some
// or all kinds, and either blocks or redacts:
//
//	rules:
//	  - id: no-injection
//	    kinds: [tool_result]
//	    pattern: '(?i)ignore (all )?previous instructions'
//	    action: block
//	    reason: the result tries to give the model instructions
//	  - id: cards
//	    detector: card
//	    action: redact
//
// A block rule that matches decides (the first in file order). Otherwise
// every redact rule that matches is applied: each match becomes
// "[redacted:<detector or rule id>]". Text that is a JSON object or array
// (a tool call's arguments, a tool result) is checked value by value and
// redacted inside its string and number values only, so it stays valid
// JSON; a redacted number becomes a string. Keys are checked by block rules
// but never redacted.
//
// Rules match the text as a reader sees it: substrings and patterns are
// also matched against its normal form (Normalize: compatibility forms,
// invisible characters and combining marks removed, confusable letters of
// other scripts mapped to Latin, case-folded), so "fоrbidden" with a
// Cyrillic о, fullwidth letters or a zero-width space inside still match.
// A redaction maps the match back and replaces the original characters.
//
// Reasons name the rule and what it found, never the matched text.
package rules

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v4"

	"github.com/clientagent/clientagent/pkg/guardian"
)

// File is a rule file.
type File struct {
	Rules []Rule `json:"rules" yaml:"rules"`
}

// Rule is one rule. Exactly one of Contains, Pattern and Detector is set.
type Rule struct {
	// ID names the rule in decisions and the audit log (unique in a file).
	ID string `json:"id" yaml:"id"`
	// Kinds are the kinds the rule applies to (empty: all).
	Kinds []guardian.Kind `json:"kinds,omitempty" yaml:"kinds,omitempty"`
	// Action is block or redact.
	Action guardian.Action `json:"action" yaml:"action"`
	// Contains is a substring, matched without regard to case in the
	// text's normal form (Normalize): disguised spellings match too.
	Contains string `json:"contains,omitempty" yaml:"contains,omitempty"`
	// Spaced makes a Contains rule also match the substring spelt with
	// spaces or punctuation between its letters ("f o r b i d", "f-o-r").
	Spaced bool `json:"spaced,omitempty" yaml:"spaced,omitempty"`
	// Pattern is an RE2 regular expression (Go's regexp syntax), matched
	// against the text and against its normal form (Normalize).
	Pattern string `json:"pattern,omitempty" yaml:"pattern,omitempty"`
	// Detector is a built-in PII detector: email, phone or card.
	Detector string `json:"detector,omitempty" yaml:"detector,omitempty"`
	// Reason is the decision's reason (default: what the rule found).
	Reason string `json:"reason,omitempty" yaml:"reason,omitempty"`
}

// Set is a compiled rule set; it is a guardian.Guardian, safe for
// concurrent use.
type Set struct {
	rules []compiled
}

var _ guardian.Guardian = (*Set)(nil)

type compiled struct {
	Rule
	find  finder
	label string // the redaction's [redacted:<label>]
}

// Load reads and compiles the rule file at path: JSON when its name ends
// in .json, YAML when in .yaml or .yml, else by its first character.
// Unknown fields are errors, so a misspelt setting does not silently
// weaken a rule.
func Load(path string) (*Set, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("guardian rules: %w", err)
	}
	var f File
	switch ext := strings.ToLower(filepath.Ext(path)); {
	case ext == ".json", ext != ".yaml" && ext != ".yml" && bytes.HasPrefix(bytes.TrimSpace(b), []byte("{")):
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		err = dec.Decode(&f)
	default:
		err = yaml.Load(b, &f, yaml.WithKnownFields())
	}
	if err != nil {
		return nil, fmt.Errorf("guardian rules %s: %w", path, err)
	}
	s, err := New(f)
	if err != nil {
		return nil, fmt.Errorf("guardian rules %s: %w", path, err)
	}
	return s, nil
}

// New compiles f. A file without rules is an error: it would allow
// everything while looking configured.
func New(f File) (*Set, error) {
	if len(f.Rules) == 0 {
		return nil, errors.New("no rules")
	}
	s := &Set{}
	seen := map[string]bool{}
	for i, r := range f.Rules {
		c, err := compile(r)
		if err != nil {
			return nil, fmt.Errorf("rule %d (%s): %w", i+1, r.ID, err)
		}
		if seen[r.ID] {
			return nil, fmt.Errorf("rule %d: duplicate id %q", i+1, r.ID)
		}
		seen[r.ID] = true
		s.rules = append(s.rules, c)
	}
	return s, nil
}

func compile(r Rule) (compiled, error) {
	c := compiled{Rule: r, label: r.ID}
	if strings.TrimSpace(r.ID) == "" {
		return c, errors.New("id is required")
	}
	if r.Action != guardian.Block && r.Action != guardian.Redact {
		return c, fmt.Errorf("action %q: want block or redact", r.Action)
	}
	for _, k := range r.Kinds {
		if _, err := guardian.ParseKind(string(k)); err != nil {
			return c, err
		}
	}
	set := 0
	for _, v := range []string{r.Contains, r.Pattern, r.Detector} {
		if v != "" {
			set++
		}
	}
	if set != 1 {
		return c, errors.New("want exactly one of contains, pattern and detector")
	}
	if r.Spaced && r.Contains == "" {
		return c, errors.New("spaced applies to a contains rule only")
	}
	if r.Contains != "" && Normalize(r.Contains) == "" {
		return c, errors.New("contains has nothing left once normalised")
	}
	switch {
	case r.Contains != "":
		c.find = regexpFinder(containsRE(r.Contains, r.Spaced))
	case r.Pattern != "":
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			return c, fmt.Errorf("pattern: %w", err)
		}
		c.find = regexpFinder(re)
	default:
		f, ok := detectors[r.Detector]
		if !ok {
			return c, fmt.Errorf("detector %q: want email, phone or card", r.Detector)
		}
		c.find, c.label = f, r.Detector
	}
	if c.Reason == "" {
		c.Reason = defaultReason(r)
	}
	return c, nil
}

func defaultReason(r Rule) string {
	verb := map[guardian.Action]string{guardian.Block: "contains", guardian.Redact: "contained"}[r.Action]
	switch r.Detector {
	case DetectEmail:
		return verb + " an email address"
	case DetectPhone:
		return verb + " a phone number"
	case DetectCard:
		return verb + " a payment card number"
	}
	return "matches the rule " + r.ID
}

// containsRE matches s's normal form, and with spaced also its letters
// separated by anything that is not a letter or a digit.
func containsRE(s string, spaced bool) *regexp.Regexp {
	n := Normalize(s)
	if !spaced {
		return regexp.MustCompile(`(?i)` + regexp.QuoteMeta(n))
	}
	var b strings.Builder
	b.WriteString(`(?i)`)
	first := true
	for _, r := range n {
		if !unicode.IsLetter(r) && !unicode.IsNumber(r) {
			continue // the rule's own spacing is optional too
		}
		if !first {
			b.WriteString(`[^\pL\pN]*`)
		}
		first = false
		b.WriteString(regexp.QuoteMeta(string(r)))
	}
	if first { // no letter at all: the plain substring
		return regexp.MustCompile(`(?i)` + regexp.QuoteMeta(n))
	}
	return regexp.MustCompile(b.String())
}

// match finds r's matches in text and in its normal form n (mapped back to
// text's bytes), sorted by start.
func (r compiled) match(text string, n normalized) []span {
	out := r.find(text)
	for _, sp := range r.find(n.text) {
		out = append(out, n.span(sp))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].start != out[j].start {
			return out[i].start < out[j].start
		}
		return out[i].end > out[j].end
	})
	return out
}

func regexpFinder(re *regexp.Regexp) finder {
	return func(text string) []span {
		var out []span
		for _, m := range re.FindAllStringIndex(text, -1) {
			if m[1] > m[0] {
				out = append(out, span{m[0], m[1]})
			}
		}
		return out
	}
}

func (r compiled) applies(k guardian.Kind) bool {
	return len(r.Kinds) == 0 || slices.Contains(r.Kinds, k)
}

// Check applies the rules to in.Checked(): the first matching block rule
// blocks; else the matching redact rules redact (Decision.Text is the
// redacted text, Decision.Rule their ids joined by commas); else allow.
func (s *Set) Check(ctx context.Context, in guardian.Input) (guardian.Decision, error) {
	if err := ctx.Err(); err != nil {
		return guardian.Decision{}, err
	}
	text := in.Checked()
	doc, structured := parseJSON(text)
	var segments []string
	if structured {
		segments = leaves(doc, nil)
	} else {
		segments = []string{text}
	}
	norms := make([]normalized, len(segments))
	for i, seg := range segments {
		norms[i] = normalize(seg)
	}
	var redactors []compiled
	for _, r := range s.rules {
		if !r.applies(in.Kind) {
			continue
		}
		hit := false
		for i, seg := range segments {
			if len(r.match(seg, norms[i])) > 0 {
				hit = true
				break
			}
		}
		switch {
		case !hit:
		case r.Action == guardian.Block:
			return guardian.Decision{Action: guardian.Block, Rule: r.ID, Reason: r.Reason}, nil
		default:
			redactors = append(redactors, r)
		}
	}
	if len(redactors) == 0 {
		return guardian.Decision{Action: guardian.Allow}, nil
	}
	ids := make([]string, 0, len(redactors))
	reasons := make([]string, 0, len(redactors))
	for _, r := range redactors {
		ids = append(ids, r.ID)
		if !slices.Contains(reasons, r.Reason) {
			reasons = append(reasons, r.Reason)
		}
	}
	var out string
	if structured {
		out = encode(redactValue(doc, redactors))
	} else {
		out = redact(text, redactors)
	}
	return guardian.Decision{Action: guardian.Redact, Rule: strings.Join(ids, ","), Reason: strings.Join(reasons, "; "), Text: out}, nil
}

// redact replaces every match of the rules in text by its label. Where
// matches overlap, the one starting first (then the longest) wins.
func redact(text string, rules []compiled) string {
	type match struct {
		span
		label string
	}
	var ms []match
	n := normalize(text)
	for _, r := range rules {
		for _, sp := range r.match(text, n) {
			ms = append(ms, match{sp, r.label})
		}
	}
	if len(ms) == 0 {
		return text
	}
	sort.SliceStable(ms, func(i, j int) bool {
		if ms[i].start != ms[j].start {
			return ms[i].start < ms[j].start
		}
		return ms[i].end > ms[j].end
	})
	var b strings.Builder
	pos := 0
	for _, m := range ms {
		if m.start < pos {
			continue
		}
		b.WriteString(text[pos:m.start])
		b.WriteString("[redacted:" + m.label + "]")
		pos = m.end
	}
	b.WriteString(text[pos:])
	return b.String()
}

// parseJSON decodes text when it is a JSON object or array, keeping
// numbers as written.
func parseJSON(text string) (any, bool) {
	t := strings.TrimSpace(text)
	if !strings.HasPrefix(t, "{") && !strings.HasPrefix(t, "[") {
		return nil, false
	}
	dec := json.NewDecoder(strings.NewReader(t))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, false
	}
	return v, true
}

// leaves appends the string and number values and the object keys of v
// to out.
func leaves(v any, out []string) []string {
	switch t := v.(type) {
	case string:
		out = append(out, t)
	case json.Number:
		out = append(out, t.String())
	case []any:
		for _, e := range t {
			out = leaves(e, out)
		}
	case map[string]any:
		for k, e := range t {
			out = append(out, k)
			out = leaves(e, out)
		}
	}
	return out
}

// redactValue is v with its string and number values redacted.
func redactValue(v any, rules []compiled) any {
	switch t := v.(type) {
	case string:
		return redact(t, rules)
	case json.Number:
		if r := redact(t.String(), rules); r != t.String() {
			return r
		}
		return t
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = redactValue(e, rules)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = redactValue(e, rules)
		}
		return out
	}
	return v
}

// encode is v as compact JSON without HTML escaping (as guardian.CanonicalJSON).
func encode(v any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(b.String(), "\n")
}
