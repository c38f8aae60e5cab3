// Package bedrock is the llm.Provider for Amazon Bedrock's Converse API
// (IAM credentials, no keys). It maps llm.Request to one Converse call with
// a tool configuration and maps the answer back. Retries of throttling and
// 5xx are the SDK's retryer (configure its attempts on the client); this
// package only classifies the final error. It must not interpret tool calls
// or the transcript.
package bedrock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"

	"github.com/clientagent/clientagent/pkg/llm"
)

// ConverseAPI is the one SDK call this package makes; *bedrockruntime.Client
// implements it.
type ConverseAPI interface {
	Converse(ctx context.Context, in *bedrockruntime.ConverseInput, optFns ...func(*bedrockruntime.Options)) (*bedrockruntime.ConverseOutput, error)
}

// DefaultTimeout is the deadline of one Complete when Config.Timeout is zero.
const DefaultTimeout = 120 * time.Second

// Config configures a Provider.
type Config struct {
	// Model is the model or inference profile id for every flavour not in FlavourModels.
	Model string
	// FlavourModels optionally maps a request's flavour to a model id.
	FlavourModels map[llm.Flavour]string
	// Timeout bounds one Complete, SDK retries included (the caller's context still wins).
	Timeout time.Duration
	// Logger receives one event per failed call; nil discards.
	Logger *slog.Logger
}

// Provider is an llm.Provider speaking Converse. It is safe for concurrent use.
type Provider struct {
	api ConverseAPI
	cfg Config
	log *slog.Logger
}

var _ llm.Provider = (*Provider)(nil)

// New returns a Provider calling api.
func New(api ConverseAPI, cfg Config) *Provider {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provider{api: api, cfg: cfg, log: log}
}

// Complete sends req as one Converse call. A final throttling error wraps
// llm.ErrRateLimited; 5xx-class and transport errors wrap llm.ErrUnavailable;
// anything else (validation, access denied) is returned with the service's
// message and wraps neither.
func (p *Provider) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	model := p.cfg.Model
	if m := p.cfg.FlavourModels[req.Flavour]; m != "" {
		model = m
	}
	in, err := buildInput(model, req)
	if err != nil {
		return nil, fmt.Errorf("bedrock: build request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	out, err := p.api.Converse(ctx, in)
	if err != nil {
		err = classify(err)
		p.log.WarnContext(ctx, "llm call failed", "provider", "bedrock", "model", model, "error", err)
		return nil, fmt.Errorf("bedrock: converse (model %s): %w", model, err)
	}
	res, err := mapOutput(out)
	if err != nil {
		return nil, fmt.Errorf("bedrock: converse (model %s): %w", model, err)
	}
	res.Model = model
	return res, nil
}

// classify wraps err with the sentinel a caller branches on.
func classify(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return fmt.Errorf("%w: %w", llm.ErrUnavailable, err)
	}
	msg := apiErr.ErrorCode() + ": " + apiErr.ErrorMessage()
	switch apiErr.ErrorCode() {
	case "ThrottlingException", "ServiceQuotaExceededException", "TooManyRequestsException":
		return fmt.Errorf("%s: %w", msg, llm.ErrRateLimited)
	case "ServiceUnavailableException", "InternalServerException", "ModelNotReadyException", "ModelTimeoutException":
		return fmt.Errorf("%s: %w", msg, llm.ErrUnavailable)
	}
	if apiErr.ErrorFault() == smithy.FaultServer {
		return fmt.Errorf("%s: %w", msg, llm.ErrUnavailable)
	}
	return errors.New(msg)
}

// buildInput maps req to Converse. Converse has no tool role: tool results
// are toolResult blocks in a user message, and consecutive messages of one
// role are merged into one (Converse requires user and assistant to
// alternate), so a batch's results become one user message.
func buildInput(model string, req llm.Request) (*bedrockruntime.ConverseInput, error) {
	in := &bedrockruntime.ConverseInput{ModelId: aws.String(model)}
	if req.System != "" {
		in.System = append(in.System, &types.SystemContentBlockMemberText{Value: req.System})
	}
	for i, m := range req.Messages {
		var role types.ConversationRole
		var blocks []types.ContentBlock
		switch m.Role {
		case llm.RoleSystem:
			if m.Content != "" {
				in.System = append(in.System, &types.SystemContentBlockMemberText{Value: m.Content})
			}
			continue
		case llm.RoleUser:
			role = types.ConversationRoleUser
			if strings.TrimSpace(m.Content) != "" {
				blocks = append(blocks, &types.ContentBlockMemberText{Value: m.Content})
			}
		case llm.RoleAssistant:
			role = types.ConversationRoleAssistant
			if strings.TrimSpace(m.Content) != "" {
				blocks = append(blocks, &types.ContentBlockMemberText{Value: m.Content})
			}
			for _, c := range m.ToolCalls {
				// A call whose arguments were malformed is replayed with an
				// empty input: Converse only accepts a JSON object, and the
				// error result that follows tells the model what went wrong.
				var input map[string]any
				if json.Unmarshal([]byte(c.Arguments), &input) != nil || input == nil {
					input = map[string]any{}
				}
				blocks = append(blocks, &types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{
					ToolUseId: aws.String(c.ID),
					Name:      aws.String(c.Name),
					Input:     document.NewLazyDocument(input),
				}})
			}
		case llm.RoleTool:
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("message %d: tool message without tool_call_id", i)
			}
			role = types.ConversationRoleUser
			content := m.Content
			if strings.TrimSpace(content) == "" {
				content = "(empty result)"
			}
			blocks = append(blocks, &types.ContentBlockMemberToolResult{Value: types.ToolResultBlock{
				ToolUseId: aws.String(m.ToolCallID),
				Content:   []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: content}},
			}})
		default:
			return nil, fmt.Errorf("message %d: unknown role %q", i, m.Role)
		}
		if len(blocks) == 0 {
			continue // Converse rejects blank content blocks
		}
		if n := len(in.Messages); n > 0 && in.Messages[n-1].Role == role {
			in.Messages[n-1].Content = append(in.Messages[n-1].Content, blocks...)
			continue
		}
		in.Messages = append(in.Messages, types.Message{Role: role, Content: blocks})
	}
	if len(req.Tools) > 0 {
		tc := &types.ToolConfiguration{ToolChoice: &types.ToolChoiceMemberAuto{}}
		for _, t := range req.Tools {
			schema := map[string]any{"type": "object", "properties": map[string]any{}}
			if len(t.Parameters) > 0 && string(t.Parameters) != "null" {
				schema = nil
				if err := json.Unmarshal(t.Parameters, &schema); err != nil {
					return nil, fmt.Errorf("tool %s: parameters are not a JSON object: %w", t.Name, err)
				}
			}
			spec := types.ToolSpecification{
				Name:        aws.String(t.Name),
				InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(schema)},
			}
			if t.Description != "" {
				spec.Description = aws.String(t.Description)
			}
			tc.Tools = append(tc.Tools, &types.ToolMemberToolSpec{Value: spec})
		}
		in.ToolConfig = tc
	}
	return in, nil
}

func mapOutput(out *bedrockruntime.ConverseOutput) (*llm.Response, error) {
	msg, ok := out.Output.(*types.ConverseOutputMemberMessage)
	if !ok {
		return nil, fmt.Errorf("unexpected output %T", out.Output)
	}
	res := &llm.Response{}
	var texts []string
	for _, b := range msg.Value.Content {
		switch b := b.(type) {
		case *types.ContentBlockMemberText:
			texts = append(texts, b.Value)
		case *types.ContentBlockMemberToolUse:
			call := llm.ToolCall{ID: aws.ToString(b.Value.ToolUseId), Name: aws.ToString(b.Value.Name), Arguments: "{}"}
			if b.Value.Input != nil {
				raw, err := b.Value.Input.MarshalSmithyDocument()
				if err != nil {
					call.ArgumentsError = "arguments could not be read: " + err.Error()
				} else {
					call.Arguments = string(raw)
				}
			}
			if call.ArgumentsError == "" {
				call.ArgumentsError = argumentsError(call.Arguments)
			}
			res.ToolCalls = append(res.ToolCalls, call)
		}
	}
	res.Text = strings.Join(texts, "\n")
	if out.Usage != nil {
		res.Usage = llm.Usage{
			InputTokens:  int(aws.ToInt32(out.Usage.InputTokens)),
			OutputTokens: int(aws.ToInt32(out.Usage.OutputTokens)),
		}
	}
	return res, nil
}

func argumentsError(args string) string {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &obj); err != nil || obj == nil {
		return "arguments are not a JSON object"
	}
	return ""
}
