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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/clientagent/clientagent/pkg/guardian"
)

// API is the one Bedrock call the guardian makes (a *bedrockruntime.Client).
type API interface {
	ApplyGuardrail(ctx context.Context, in *bedrockruntime.ApplyGuardrailInput, opts ...func(*bedrockruntime.Options)) (*bedrockruntime.ApplyGuardrailOutput, error)
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
	source := types.GuardrailContentSourceInput
	if in.Kind == guardian.ToolResult || in.Kind == guardian.ModelOutput {
		source = types.GuardrailContentSourceOutput
	}
	out, err := g.api.ApplyGuardrail(ctx, &bedrockruntime.ApplyGuardrailInput{
		GuardrailIdentifier: aws.String(g.id),
		GuardrailVersion:    aws.String(g.version),
		Source:              source,
		Content: []types.GuardrailContentBlock{
			&types.GuardrailContentBlockMemberText{Value: types.GuardrailTextBlock{Text: aws.String(in.Checked())}},
		},
	})
	if err != nil {
		return guardian.Decision{}, fmt.Errorf("bedrock guardrail %s:%s: %w", g.id, g.version, err)
	}
	switch out.Action {
	case types.GuardrailActionNone:
		return guardian.Decision{Action: guardian.Allow, Rule: g.Name()}, nil
	case types.GuardrailActionGuardrailIntervened:
	default:
		return guardian.Decision{}, fmt.Errorf("bedrock guardrail %s:%s: unknown action %q", g.id, g.version, out.Action)
	}
	f := findings(out.Assessments)
	reason := "the guardrail intervened"
	if len(f.what) > 0 {
		reason += ": " + strings.Join(f.what, ", ")
	} else if out.ActionReason != nil && *out.ActionReason != "" {
		reason += ": " + *out.ActionReason
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
func masked(outs []types.GuardrailOutputContent) (string, error) {
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
func findings(as []types.GuardrailAssessment) found {
	var f found
	for _, a := range as {
		if p := a.TopicPolicy; p != nil {
			for _, t := range p.Topics {
				if t.Action != types.GuardrailTopicPolicyActionNone {
					f.blocked = true
					f.add("topic " + aws.ToString(t.Name))
				}
			}
		}
		if p := a.ContentPolicy; p != nil {
			for _, c := range p.Filters {
				if c.Action != types.GuardrailContentPolicyActionNone {
					f.blocked = true
					f.add("content filter " + string(c.Type))
				}
			}
		}
		if p := a.WordPolicy; p != nil {
			for _, w := range p.CustomWords {
				if w.Action != types.GuardrailWordPolicyActionNone {
					f.blocked = true
					f.add("custom word")
				}
			}
			for _, w := range p.ManagedWordLists {
				if w.Action != types.GuardrailWordPolicyActionNone {
					f.blocked = true
					f.add("managed word list " + string(w.Type))
				}
			}
		}
		if p := a.SensitiveInformationPolicy; p != nil {
			for _, e := range p.PiiEntities {
				f.sensitive(e.Action, "pii "+string(e.Type))
			}
			for _, r := range p.Regexes {
				f.sensitive(r.Action, "regex "+aws.ToString(r.Name))
			}
		}
		if p := a.ContextualGroundingPolicy; p != nil {
			for _, c := range p.Filters {
				if c.Action != types.GuardrailContextualGroundingPolicyActionNone {
					f.blocked = true
					f.add("grounding " + string(c.Type))
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

func (f *found) sensitive(act types.GuardrailSensitiveInformationPolicyAction, what string) {
	switch act {
	case types.GuardrailSensitiveInformationPolicyActionNone:
	case types.GuardrailSensitiveInformationPolicyActionAnonymized:
		f.anonymized = true
		f.add(what + " (anonymized)")
	default:
		f.blocked = true
		f.add(what)
	}
}
