// Package eval is the multi-step harness of `clientagent eval` (issue 16,
// docs/design.md §10): it loads scenario files (JSON or YAML, docs/evals.md), plays
// each one through a running stack's HTTP API — the prompts of a
// conversation and scripted answers to its forms and approvals — and checks
// machine-readable expectations on every turn: the status, the tools called
// and their arguments and statuses, the reply, the artifacts and the spend.
//
// It only talks to the public API, so a scenario means the same against the
// local stack and a deployment. It must not start a stack, read the
// environment or decide the exit status: the command (pkg/eval/evalcli)
// does that.
package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/clientagent/clientagent/pkg/schemacheck"
	"github.com/clientagent/clientagent/pkg/wire"
)

// Scenario is one scenario file: a conversation of one or more turns.
type Scenario struct {
	// Name identifies the scenario in reports (default: the file name
	// without its extension).
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Tags        []string `json:"tags,omitempty"`
	Turns       []Turn   `json:"turns"`

	// Path is the file the scenario was read from; uploads are relative to
	// its folder.
	Path string `json:"-"`
}

// Turn is one user message, the scripted answers to the pauses it may hit
// and what must be true once it has ended.
type Turn struct {
	// Text is the user message ("/workflow <id> …" selects a workflow the
	// way the chat does).
	Text string `json:"text,omitempty"`
	// Workflow selects a workflow explicitly (the message's workflow field).
	Workflow *WorkflowSelection `json:"workflow,omitempty"`
	// Files are uploaded to the conversation and sent with the message;
	// paths are relative to the scenario's folder.
	Files []string `json:"files,omitempty"`
	// Form answers the turn's forms, Approval its approvals.
	Form     []FormAnswer     `json:"form,omitempty"`
	Approval []ApprovalAnswer `json:"approval,omitempty"`
	// Timeout bounds the turn, pauses included (a Go duration; default 2m).
	Timeout string `json:"timeout,omitempty"`
	Expect  Expect `json:"expect"`
}

// WorkflowSelection is the message's explicit workflow choice.
type WorkflowSelection = wire.WorkflowSelection

// FormAnswer fills the form of one call. It answers the first call of an
// open form whose tool is Tool (or whose position in the form is Call,
// counted from 1; with neither, any call). Each answer is used once, in
// the order written.
type FormAnswer struct {
	Tool   string         `json:"tool,omitempty"`
	Call   int            `json:"call,omitempty"`
	Values map[string]any `json:"values"`
}

// ApprovalAnswer decides one approval. It answers the next open approval
// that shows a call of Tool (any approval without Tool). Arguments edits
// the shown arguments of the calls of a tool before approving (merged over
// them, key by key).
type ApprovalAnswer struct {
	Tool      string                    `json:"tool,omitempty"`
	Decision  string                    `json:"decision"`
	Note      string                    `json:"note,omitempty"`
	Arguments map[string]map[string]any `json:"arguments,omitempty"`
}

// Expect is what must be true of a turn once it has ended. Every field is
// optional; the zero Expect checks nothing.
type Expect struct {
	// Status is the turn's final status: succeeded, failed, expired,
	// cancelled, superseded, blocked.
	Status string `json:"status,omitempty"`
	// Tools are the tools the turn called, compared as ToolsOrder says:
	// "sequence" (default: exactly these calls in this order), "set" (the
	// same tools, in any order and number) or "includes" (at least these,
	// others allowed).
	Tools      []string `json:"tools,omitempty"`
	ToolsOrder string   `json:"tools_order,omitempty"`
	// NotCalled are tools the turn must not call (distractors).
	NotCalled []string `json:"not_called,omitempty"`
	// Calls check single calls: their status and arguments.
	Calls []CallExpect `json:"calls,omitempty"`
	// ReplyContains are substrings of the reply; ReplyMatches regular
	// expressions (RE2) it must match.
	ReplyContains []string `json:"reply_contains,omitempty"`
	ReplyMatches  []string `json:"reply_matches,omitempty"`
	// Artifacts counts the artifacts the turn produced by MIME type.
	Artifacts []ArtifactExpect `json:"artifacts,omitempty"`
	// MaxLLMCalls, MaxTokens and MaxCostUSD bound the turn's spend.
	MaxLLMCalls *int     `json:"max_llm_calls,omitempty"`
	MaxTokens   *int     `json:"max_tokens,omitempty"`
	MaxCostUSD  *float64 `json:"max_cost_usd,omitempty"`
}

// Orders of Expect.ToolsOrder.
const (
	OrderSequence = "sequence"
	OrderSet      = "set"
	OrderIncludes = "includes"
)

// CallExpect checks the calls of Tool: every one of them, or only the Nth
// (from 1, in call order). At least one such call must exist.
type CallExpect struct {
	Tool string `json:"tool"`
	Nth  int    `json:"nth,omitempty"`
	// Status is the call's result: succeeded, failed, rejected,
	// not_executed, answered (ask_user), invalid.
	Status    string           `json:"status,omitempty"`
	Arguments *ArgumentsExpect `json:"arguments,omitempty"`
}

// ArgumentsExpect checks a call's arguments in one of three ways: Exact
// (equal as JSON), Subset (every key given has that value; nested objects
// are subsets too) or Schema (a JSON Schema the arguments must satisfy).
type ArgumentsExpect struct {
	Exact  map[string]any `json:"exact,omitempty"`
	Subset map[string]any `json:"subset,omitempty"`
	Schema any            `json:"schema,omitempty"`

	schema *schemacheck.Schema
}

// ArtifactExpect counts the artifacts of MimeType the turn produced:
// exactly Count, or at least AtLeast.
type ArtifactExpect struct {
	MimeType string `json:"mime_type"`
	Count    *int   `json:"count,omitempty"`
	AtLeast  *int   `json:"at_least,omitempty"`
}

// ErrNoScenarios is returned by Load for a folder without scenario files.
var ErrNoScenarios = errors.New("no scenario files (*.json, *.yaml, *.yml)")

// Load reads the scenario at path, or every scenario file under the folder
// path (recursively, in name order). A file that does not parse or whose
// expectations are not valid is an error naming the file.
func Load(path string) ([]*Scenario, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		s, err := LoadFile(path)
		if err != nil {
			return nil, err
		}
		return []*Scenario{s}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && isScenarioFile(p) {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: %w", path, ErrNoScenarios)
	}
	sort.Strings(files)
	var out []*Scenario
	names := map[string]string{}
	for _, f := range files {
		s, err := LoadFile(f)
		if err != nil {
			return nil, err
		}
		if prev, ok := names[s.Name]; ok {
			return nil, fmt.Errorf("%s: scenario name %q is already used by %s", f, s.Name, prev)
		}
		names[s.Name] = f
		out = append(out, s)
	}
	return out, nil
}

func isScenarioFile(p string) bool {
	switch strings.ToLower(filepath.Ext(p)) {
	case ".json", ".yaml", ".yml":
		return true
	}
	return false
}

// LoadFile reads one scenario file, JSON or YAML by its extension.
func LoadFile(path string) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := Parse(b, strings.ToLower(filepath.Ext(path)) != ".json")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s.Path = path
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	return s, nil
}

// Parse reads a scenario from JSON, or from YAML when isYAML. Unknown
// fields are errors, so a misspelt expectation cannot pass silently.
func Parse(b []byte, isYAML bool) (*Scenario, error) {
	if isYAML {
		var v any
		if err := yaml.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("parse YAML: %w", err)
		}
		j, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("parse YAML: %w", err)
		}
		b = j
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s Scenario
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("parse scenario: %w", err)
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

var finalStatuses = []string{"succeeded", "failed", "expired", "cancelled", "superseded", "blocked"}

// validate checks what a scenario asks for can be checked, and compiles its
// regular expressions and schemas once.
func (s *Scenario) validate() error {
	if len(s.Turns) == 0 {
		return errors.New("a scenario needs at least one turn")
	}
	for i := range s.Turns {
		t := &s.Turns[i]
		n := i + 1
		if strings.TrimSpace(t.Text) == "" && t.Workflow == nil {
			return fmt.Errorf("turn %d: text or workflow is required", n)
		}
		if t.Workflow != nil && t.Workflow.ID == "" {
			return fmt.Errorf("turn %d: workflow.id is required", n)
		}
		for _, a := range t.Approval {
			if a.Decision != "approve" && a.Decision != "reject" {
				return fmt.Errorf("turn %d: approval decision %q: want approve or reject", n, a.Decision)
			}
			if len(a.Arguments) > 0 && a.Decision != "approve" {
				return fmt.Errorf("turn %d: edited arguments come only with approve", n)
			}
		}
		for _, f := range t.Form {
			if f.Call < 0 {
				return fmt.Errorf("turn %d: form call %d: counted from 1", n, f.Call)
			}
		}
		e := &t.Expect
		if e.Status != "" && !slices.Contains(finalStatuses, e.Status) {
			return fmt.Errorf("turn %d: expect.status %q: want one of %s", n, e.Status, strings.Join(finalStatuses, ", "))
		}
		switch e.ToolsOrder {
		case "", OrderSequence, OrderSet, OrderIncludes:
		default:
			return fmt.Errorf("turn %d: expect.tools_order %q: want sequence, set or includes", n, e.ToolsOrder)
		}
		for _, re := range e.ReplyMatches {
			if _, err := regexp.Compile(re); err != nil {
				return fmt.Errorf("turn %d: expect.reply_matches: %w", n, err)
			}
		}
		for j := range e.Calls {
			c := &e.Calls[j]
			if c.Tool == "" {
				return fmt.Errorf("turn %d: expect.calls[%d]: tool is required", n, j)
			}
			if c.Arguments == nil {
				continue
			}
			ways := 0
			for _, set := range []bool{c.Arguments.Exact != nil, c.Arguments.Subset != nil, c.Arguments.Schema != nil} {
				if set {
					ways++
				}
			}
			if ways != 1 {
				return fmt.Errorf("turn %d: expect.calls[%d].arguments: give exactly one of exact, subset, schema", n, j)
			}
			if c.Arguments.Schema != nil {
				sc, err := compileSchema(c.Arguments.Schema)
				if err != nil {
					return fmt.Errorf("turn %d: expect.calls[%d].arguments.schema: %w", n, j, err)
				}
				c.Arguments.schema = sc
			}
		}
		for j, a := range e.Artifacts {
			if a.MimeType == "" || (a.Count == nil) == (a.AtLeast == nil) {
				return fmt.Errorf("turn %d: expect.artifacts[%d]: give mime_type and one of count, at_least", n, j)
			}
		}
	}
	return nil
}

func compileSchema(v any) (*schemacheck.Schema, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	// A scenario's schema is self-contained: no files or URLs behind $ref.
	return schemacheck.Compile("expect.json", b)
}
