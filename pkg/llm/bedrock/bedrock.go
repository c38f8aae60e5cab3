// Package bedrock is the llm.Provider for Amazon Bedrock's ConverseStream
// API (IAM credentials, no keys). It maps llm.Request to one ConverseStream
// call with a tool configuration, passes text deltas to the request's
// OnText as they arrive (issue 15) and assembles the answer, tool uses
// included, from the stream. For models that support prompt caching it
// places cache points after the tools, after the system rules and at the
// end of the transcript, before the per-call Context (issue 18). Retries of
// throttling and 5xx before a stream starts are the SDK's retryer
// (configure its attempts on the client); a stream that breaks midway is
// retried here. It must not interpret tool calls or the transcript.
package bedrock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"

	"github.com/clientagent/clientagent/pkg/llm"
)

// ConverseStreamAPI is the one SDK call this package makes;
// *bedrockruntime.Client implements it.
type ConverseStreamAPI interface {
	ConverseStream(ctx context.Context, in *bedrockruntime.ConverseStreamInput, optFns ...func(*bedrockruntime.Options)) (*bedrockruntime.ConverseStreamOutput, error)
}

// Defaults used when the corresponding Config field is zero.
const (
	DefaultTimeout     = 120 * time.Second
	DefaultMaxAttempts = 3
	DefaultBackoffBase = 500 * time.Millisecond
	maxBackoff         = 10 * time.Second
)

// PromptCache says whether requests carry cache points.
type PromptCache string

const (
	// PromptCacheAuto places cache points for the models known to support
	// prompt caching: Claude 3.7 Sonnet, 3.5 Haiku, the Claude 4 families
	// and Amazon Nova. The zero value means the same.
	PromptCacheAuto PromptCache = "auto"
	// PromptCacheOn places them whatever the model.
	PromptCacheOn PromptCache = "on"
	// PromptCacheOff never places them.
	PromptCacheOff PromptCache = "off"
)

// Config configures a Provider.
type Config struct {
	// Model is the model or inference profile id for every flavour not in FlavourModels.
	Model string
	// FlavourModels optionally maps a request's flavour to a model id.
	FlavourModels map[llm.Flavour]string
	// PromptCache chooses, per model, whether requests carry cache points.
	PromptCache PromptCache
	// Timeout bounds one Complete, all retries included (the caller's context still wins).
	Timeout time.Duration
	// MaxAttempts bounds the calls per Complete when a stream breaks after
	// it started (first call included). Failures before a stream starts are
	// the SDK retryer's.
	MaxAttempts int
	// BackoffBase is the first delay before calling again after a broken
	// stream, before jitter; it doubles per retry.
	BackoffBase time.Duration
	// Logger receives one event per failed call; nil discards.
	Logger *slog.Logger
}

// Provider is an llm.Provider speaking ConverseStream. It is safe for
// concurrent use.
type Provider struct {
	api ConverseStreamAPI
	cfg Config
	log *slog.Logger
}

var _ llm.Provider = (*Provider)(nil)

// New returns a Provider calling api.
func New(api ConverseStreamAPI, cfg Config) *Provider {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = DefaultBackoffBase
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Provider{api: api, cfg: cfg, log: log}
}

// Complete sends req as one ConverseStream call. Text deltas go to
// req.OnText as they arrive; a stream that breaks midway (dropped, a
// transient exception event, no messageStop) is called again, after
// req.OnReset when text was already given. A final throttling error wraps
// llm.ErrRateLimited; 5xx-class, transport and broken-stream errors wrap
// llm.ErrUnavailable; anything else (validation, access denied) is returned
// with the service's message and wraps neither.
func (p *Provider) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	model := p.cfg.Model
	if m := p.cfg.FlavourModels[req.Flavour]; m != "" {
		model = m
	}
	in, err := buildInput(model, req, p.cachePoints(model))
	if err != nil {
		return nil, fmt.Errorf("bedrock: build request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		res, gaveText, err := p.attempt(ctx, in, &req)
		if err == nil {
			res.Model = model
			return res, nil
		}
		var broken *streamError
		midway := errors.As(err, &broken)
		err = classify(err)
		transient := errors.Is(err, llm.ErrUnavailable) || errors.Is(err, llm.ErrRateLimited)
		if !midway || !transient || attempt >= p.cfg.MaxAttempts || ctx.Err() != nil {
			p.log.WarnContext(ctx, "llm call failed", "provider", "bedrock", "model", model, "attempt", attempt, "error", err)
			return nil, fmt.Errorf("bedrock: converse stream (model %s): %w", model, err)
		}
		delay := p.backoff(attempt)
		p.log.WarnContext(ctx, "llm stream broke, retrying", "provider", "bedrock", "model", model,
			"attempt", attempt, "error", err, "delay", delay)
		if gaveText {
			req.Reset()
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("bedrock: converse stream (model %s): %w (waiting to retry after %w)", model, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// attempt makes one ConverseStream call and reads its stream to the end.
// gaveText says whether text already went to req.OnText.
func (p *Provider) attempt(ctx context.Context, in *bedrockruntime.ConverseStreamInput, req *llm.Request) (*llm.Response, bool, error) {
	out, err := p.api.ConverseStream(ctx, in)
	if err != nil {
		return nil, false, err
	}
	stream := out.GetStream()
	defer stream.Close()
	return readStream(stream.Events(), stream.Err, req.Text)
}

// backoff is exponential with "equal jitter" (half fixed, half random).
func (p *Provider) backoff(attempt int) time.Duration {
	d := p.cfg.BackoffBase << (attempt - 1)
	if d <= 0 || d > maxBackoff {
		d = maxBackoff
	}
	half := d / 2
	return half + rand.N(half+1)
}

// streamError is a stream that broke after the call was accepted.
type streamError struct {
	events int
	err    error
}

func (e *streamError) Error() string {
	return fmt.Sprintf("stream broken after %d events: %v", e.events, e.err)
}

func (e *streamError) Unwrap() error { return e.err }

// cachePoints is where a request carries cache points.
type cachePoints struct{ tools, system, messages bool }

func (p *Provider) cachePoints(model string) cachePoints {
	switch p.cfg.PromptCache {
	case PromptCacheOff:
		return cachePoints{}
	case PromptCacheOn:
	default:
		if !supportsPromptCache(model) {
			return cachePoints{}
		}
	}
	// Nova caches the system rules and the messages (and with them the
	// tools before them) but refuses a cache point among the tools.
	return cachePoints{tools: !isModel(model, "amazon.nova-"), system: true, messages: true}
}

// promptCacheModels are the model families Bedrock caches prompts for.
var promptCacheModels = []string{
	"anthropic.claude-3-7-sonnet",
	"anthropic.claude-3-5-haiku",
	"anthropic.claude-sonnet-4",
	"anthropic.claude-opus-4",
	"anthropic.claude-haiku-4",
	"amazon.nova-",
}

func supportsPromptCache(model string) bool {
	return slices.ContainsFunc(promptCacheModels, func(family string) bool { return isModel(model, family) })
}

// isModel reports whether the model id, an inference profile id (with its
// "us.", "eu.", "global.", … prefix) or an ARN ending in one of them, is of
// the family.
func isModel(id, family string) bool {
	id = strings.ToLower(strings.TrimSpace(id))
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		id = id[i+1:]
	}
	if strings.HasPrefix(id, family) {
		return true
	}
	_, rest, ok := strings.Cut(id, ".")
	return ok && strings.HasPrefix(rest, family)
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
	case "ServiceUnavailableException", "InternalServerException", "ModelNotReadyException", "ModelTimeoutException",
		"ModelStreamErrorException": // "Retry your request", says its message

		return fmt.Errorf("%s: %w", msg, llm.ErrUnavailable)
	}
	if apiErr.ErrorFault() == smithy.FaultServer {
		return fmt.Errorf("%s: %w", msg, llm.ErrUnavailable)
	}
	return errors.New(msg)
}

// buildInput maps req to ConverseStream. Converse has no tool role: tool
// results are toolResult blocks in a user message, and consecutive messages
// of one role are merged into one (Converse requires user and assistant to
// alternate), so a batch's results become one user message. The per-call
// Context closes the last user message (or a user message of its own), after
// the transcript's cache point, so the request up to there is the prefix of
// the conversation's next call. The body is byte-stable for the same
// request: tools in the given order, schemas and inputs are maps, which
// encode with sorted keys.
func buildInput(model string, req llm.Request, cache cachePoints) (*bedrockruntime.ConverseStreamInput, error) {
	in := &bedrockruntime.ConverseStreamInput{ModelId: aws.String(model)}
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
	point := types.CachePointBlock{Type: types.CachePointTypeDefault}
	if cache.system && len(in.System) > 0 {
		in.System = append(in.System, &types.SystemContentBlockMemberCachePoint{Value: point})
	}
	if n := len(in.Messages); cache.messages && n > 0 {
		in.Messages[n-1].Content = append(in.Messages[n-1].Content, &types.ContentBlockMemberCachePoint{Value: point})
	}
	if strings.TrimSpace(req.Context) != "" {
		text := &types.ContentBlockMemberText{Value: req.Context}
		if n := len(in.Messages); n > 0 && in.Messages[n-1].Role == types.ConversationRoleUser {
			in.Messages[n-1].Content = append(in.Messages[n-1].Content, text)
		} else {
			in.Messages = append(in.Messages, types.Message{Role: types.ConversationRoleUser, Content: []types.ContentBlock{text}})
		}
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
		if cache.tools {
			tc.Tools = append(tc.Tools, &types.ToolMemberCachePoint{Value: point})
		}
		in.ToolConfig = tc
	}
	return in, nil
}

// readStream reads a stream's events to their end (then err says whether
// it broke), passing text deltas to onText, and assembles the answer. Text
// blocks are joined with a newline, given to onText as well. A stream that
// ends before messageStop is broken.
func readStream(events <-chan types.ConverseStreamOutput, errFn func() error, onText func(string)) (res *llm.Response, gaveText bool, err error) {
	var (
		n        int
		text     strings.Builder
		textAt   = int32(-1) // the block the text came from last
		tools    = map[int32]*toolUse{}
		stopped  bool
		usage    *types.TokenUsage
		giveText = func(s string) {
			text.WriteString(s)
			onText(s)
		}
	)
	tool := func(i int32) *toolUse {
		if tools[i] == nil {
			tools[i] = &toolUse{}
		}
		return tools[i]
	}
	for ev := range events {
		n++
		switch ev := ev.(type) {
		case *types.ConverseStreamOutputMemberContentBlockStart:
			if s, ok := ev.Value.Start.(*types.ContentBlockStartMemberToolUse); ok {
				t := tool(aws.ToInt32(ev.Value.ContentBlockIndex))
				t.id, t.name = aws.ToString(s.Value.ToolUseId), aws.ToString(s.Value.Name)
			}
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			i := aws.ToInt32(ev.Value.ContentBlockIndex)
			switch d := ev.Value.Delta.(type) {
			case *types.ContentBlockDeltaMemberText:
				if d.Value == "" {
					continue
				}
				if text.Len() > 0 && i != textAt {
					giveText("\n")
				}
				textAt = i
				giveText(d.Value)
			case *types.ContentBlockDeltaMemberToolUse:
				tool(i).input.WriteString(aws.ToString(d.Value.Input))
			}
		case *types.ConverseStreamOutputMemberMessageStop:
			stopped = true
		case *types.ConverseStreamOutputMemberMetadata:
			usage = ev.Value.Usage
		}
	}
	gaveText = text.Len() > 0
	if err := errFn(); err != nil {
		return nil, gaveText, &streamError{events: n, err: err}
	}
	if !stopped {
		return nil, gaveText, &streamError{events: n, err: errors.New("stream ended before messageStop")}
	}
	res = &llm.Response{Text: text.String(), Usage: mapUsage(usage)}
	indices := make([]int32, 0, len(tools))
	for i := range tools {
		indices = append(indices, i)
	}
	slices.Sort(indices)
	for _, i := range indices {
		t := tools[i]
		call := llm.ToolCall{ID: t.id, Name: t.name, Arguments: t.input.String()}
		// A tool without parameters may stream no input at all.
		if strings.TrimSpace(call.Arguments) == "" {
			call.Arguments = "{}"
		}
		call.ArgumentsError = argumentsError(call.Arguments)
		if call.ArgumentsError == "" {
			// The model's spacing goes; its text and key order stay, as
			// the transcript keeps them.
			var compact bytes.Buffer
			if json.Compact(&compact, []byte(call.Arguments)) == nil {
				call.Arguments = compact.String()
			}
		}
		res.ToolCalls = append(res.ToolCalls, call)
	}
	return res, gaveText, nil
}

// toolUse is one tool use being assembled: its id and name from its
// contentBlockStart, its input from many deltas.
type toolUse struct {
	id, name string
	input    strings.Builder
}

// mapUsage maps Bedrock's count, whose inputTokens leaves out the tokens
// read from and written to the cache, to llm.Usage, whose InputTokens
// counts them all.
func mapUsage(u *types.TokenUsage) llm.Usage {
	if u == nil {
		return llm.Usage{}
	}
	read, write := int(aws.ToInt32(u.CacheReadInputTokens)), int(aws.ToInt32(u.CacheWriteInputTokens))
	return llm.Usage{
		InputTokens:       int(aws.ToInt32(u.InputTokens)) + read + write,
		OutputTokens:      int(aws.ToInt32(u.OutputTokens)),
		CachedInputTokens: read,
		CacheWriteTokens:  write,
	}
}

func argumentsError(args string) string {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &obj); err != nil || obj == nil {
		return "arguments are not a JSON object"
	}
	return ""
}
