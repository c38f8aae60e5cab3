// Package bedrock is the guardian backed by Amazon Bedrock Guardrails
// (CLIENTAGENT_GUARDIAN=bedrock:<guardrail id>:<version>): each check is
// one ApplyGuardrail call on the checked text, with source INPUT for the
// user's message and tool calls and OUTPUT for tool results and the model's
// own output.
//
// NONE allows. GUARDRAIL_INTERVENED blocks, with a reason naming what
// intervened (topics, content filters, word lists, PII types, regexes,
// grounding) but never the matched text; when every intervention is an
// anonymization (PII or regex ANONYMIZED) and the guardrail returned the
// masked text, it redacts instead, with that text. The guardrail's own
// configuration decides what it looks for; this package must not second-
// guess it.
package bedrock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/clientagent/clientagent/pkg/guardian"
)

// API is the one Bedrock call the guardian makes (Client makes it):
// ApplyGuardrail of guardrail id at version on text, from source (INPUT
// or OUTPUT).
type API interface {
	ApplyGuardrail(ctx context.Context, id, version, source, text string) (*Result, error)
}

// Result is what ApplyGuardrail answers, as far as the guardian reads it.
type Result struct {
	Action       string       `json:"action"` // NONE or GUARDRAIL_INTERVENED
	ActionReason string       `json:"actionReason"`
	Outputs      []Output     `json:"outputs"`
	Assessments  []Assessment `json:"assessments"`
}

// Output is one text the guardrail returns (the input, masked).
type Output struct {
	Text *string `json:"text"`
}

// Assessment is what each policy of the guardrail found.
type Assessment struct {
	TopicPolicy *struct {
		Topics []struct{ Name, Action string } `json:"topics"`
	} `json:"topicPolicy"`
	ContentPolicy *struct {
		Filters []struct{ Type, Action string } `json:"filters"`
	} `json:"contentPolicy"`
	WordPolicy *struct {
		CustomWords      []struct{ Action string }       `json:"customWords"`
		ManagedWordLists []struct{ Type, Action string } `json:"managedWordLists"`
	} `json:"wordPolicy"`
	SensitiveInformationPolicy *struct {
		PiiEntities []struct{ Type, Action string } `json:"piiEntities"`
		Regexes     []struct{ Name, Action string } `json:"regexes"`
	} `json:"sensitiveInformationPolicy"`
	ContextualGroundingPolicy *struct {
		Filters []struct{ Type, Action string } `json:"filters"`
	} `json:"contextualGroundingPolicy"`
	AutomatedReasoningPolicy *struct {
		Findings []any `json:"findings"`
	} `json:"automatedReasoningPolicy"`
}

// Guardrail is a guardian.Guardian applying one guardrail version; it is
// safe for concurrent use.
type Guardrail struct {
	api         API
	id, version string
}

var _ guardian.Guardian = (*Guardrail)(nil)

// New returns the guardian of guardrail id at version ("DRAFT" or a
// number).
func New(api API, id, version string) *Guardrail {
	return &Guardrail{api: api, id: id, version: version}
}

// Name is "bedrock:<id>:<version>", the rule of its decisions.
func (g *Guardrail) Name() string { return "bedrock:" + g.id + ":" + g.version }

// Check applies the guardrail to in.Checked().
func (g *Guardrail) Check(ctx context.Context, in guardian.Input) (guardian.Decision, error) {
	source := "INPUT"
	if in.Kind == guardian.ToolResult || in.Kind == guardian.ModelOutput {
		source = "OUTPUT"
	}
	out, err := g.api.ApplyGuardrail(ctx, g.id, g.version, source, in.Checked())
	if err != nil {
		return guardian.Decision{}, fmt.Errorf("bedrock guardrail %s:%s: %w", g.id, g.version, err)
	}
	switch out.Action {
	case "NONE":
		return guardian.Decision{Action: guardian.Allow, Rule: g.Name()}, nil
	case "GUARDRAIL_INTERVENED":
	default:
		return guardian.Decision{}, fmt.Errorf("bedrock guardrail %s:%s: unknown action %q", g.id, g.version, out.Action)
	}
	f := findings(out.Assessments)
	reason := "the guardrail intervened"
	if len(f.what) > 0 {
		reason += ": " + strings.Join(f.what, ", ")
	} else if out.ActionReason != "" {
		reason += ": " + out.ActionReason
	}
	if !f.blocked && f.anonymized {
		if text, err := masked(out.Outputs); err == nil {
			return guardian.Decision{Action: guardian.Redact, Rule: g.Name(), Reason: reason, Text: text}, nil
		}
	}
	return guardian.Decision{Action: guardian.Block, Rule: g.Name(), Reason: reason}, nil
}

// masked is the guardrail's output text: the input with its anonymized
// parts masked.
func masked(outs []Output) (string, error) {
	var texts []string
	for _, o := range outs {
		if o.Text != nil {
			texts = append(texts, *o.Text)
		}
	}
	if len(texts) == 0 {
		return "", errors.New("no output text")
	}
	return strings.Join(texts, ""), nil
}

// found is what the assessments say intervened.
type found struct {
	what       []string // "topic Investments", "content VIOLENCE", "pii EMAIL (anonymized)"
	blocked    bool     // some policy blocked
	anonymized bool     // some policy anonymized
}

func (f *found) add(s string) {
	if !slices.Contains(f.what, s) {
		f.what = append(f.what, s)
	}
}

// findings reads the assessments: every policy entry whose action is not
// NONE. An entry of a kind this package does not know (a newer policy)
// counts as a block.
func findings(as []Assessment) found {
	var f found
	for _, a := range as {
		if p := a.TopicPolicy; p != nil {
			for _, t := range p.Topics {
				if t.Action != "NONE" {
					f.blocked = true
					f.add("topic " + t.Name)
				}
			}
		}
		if p := a.ContentPolicy; p != nil {
			for _, c := range p.Filters {
				if c.Action != "NONE" {
					f.blocked = true
					f.add("content filter " + c.Type)
				}
			}
		}
		if p := a.WordPolicy; p != nil {
			for _, w := range p.CustomWords {
				if w.Action != "NONE" {
					f.blocked = true
					f.add("custom word")
				}
			}
			for _, w := range p.ManagedWordLists {
				if w.Action != "NONE" {
					f.blocked = true
					f.add("managed word list " + w.Type)
				}
			}
		}
		if p := a.SensitiveInformationPolicy; p != nil {
			for _, e := range p.PiiEntities {
				f.sensitive(e.Action, "pii "+e.Type)
			}
			for _, r := range p.Regexes {
				f.sensitive(r.Action, "regex "+r.Name)
			}
		}
		if p := a.ContextualGroundingPolicy; p != nil {
			for _, c := range p.Filters {
				if c.Action != "NONE" {
					f.blocked = true
					f.add("grounding " + c.Type)
				}
			}
		}
		if p := a.AutomatedReasoningPolicy; p != nil && len(p.Findings) > 0 {
			f.blocked = true
			f.add("automated reasoning")
		}
	}
	return f
}

func (f *found) sensitive(act, what string) {
	switch act {
	case "NONE":
	case "ANONYMIZED":
		f.anonymized = true
		f.add(what + " (anonymized)")
	default:
		f.blocked = true
		f.add(what)
	}
}
