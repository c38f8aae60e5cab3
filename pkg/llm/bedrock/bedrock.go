// Package bedrock is the llm.Provider for Amazon Bedrock's ConverseStream
// API (IAM credentials, no keys). It maps llm.Request to one ConverseStream
// call with a tool configuration, passes text deltas to the request's
// OnText as they arrive (issue 15) and assembles the answer, tool uses
// included, from the stream. For models that support prompt caching it
// places cache points after the tools, after the system rules and at the
// end of the transcript, before the per-call Context (issue 18). Retries of
// throttling and 5xx before a stream starts are the Client's (its
// MaxAttempts); a stream that breaks midway is retried here. It must not
// interpret tool calls or the transcript.
package bedrock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/clientagent/clientagent/pkg/llm"
)

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
	// the Client's to try again.
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
	in, err := buildInput(req, p.cachePoints(model))
	if err != nil {
		return nil, fmt.Errorf("bedrock: build request: %w", err)
	}
	body, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("bedrock: encode request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		res, gaveText, err := p.attempt(ctx, model, body, &req)
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
func (p *Provider) attempt(ctx context.Context, model string, body []byte, req *llm.Request) (*llm.Response, bool, error) {
	stream, err := p.api.ConverseStream(ctx, model, body)
	if err != nil {
		return nil, false, err
	}
	defer stream.Close()
	return readStream(stream.Recv, req.Text)
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
	var apiErr *APIError
	if !errors.As(err, &apiErr) {
		return fmt.Errorf("%w: %w", llm.ErrUnavailable, err)
	}
	msg := apiErr.Error()
	switch apiErr.Code {
	case "ThrottlingException", "ServiceQuotaExceededException", "TooManyRequestsException":
		return fmt.Errorf("%s: %w", msg, llm.ErrRateLimited)
	case "ServiceUnavailableException", "InternalServerException", "ModelNotReadyException", "ModelTimeoutException",
		"ModelStreamErrorException": // "Retry your request", says its message

		return fmt.Errorf("%s: %w", msg, llm.ErrUnavailable)
	}
	if apiErr.serverFault() {
		return fmt.Errorf("%s: %w", msg, llm.ErrUnavailable)
	}
	return errors.New(msg)
}

// converseRequest is a ConverseStream body, in the Converse wire format
// (the model id is in the path).
type converseRequest struct {
	Messages   []message   `json:"messages"`
	System     []block     `json:"system,omitempty"`
	ToolConfig *toolConfig `json:"toolConfig,omitempty"`
}

type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

// block is a content block or a system block: exactly one field is set.
type block struct {
	Text       string       `json:"text,omitempty"`
	ToolUse    *toolUseOut  `json:"toolUse,omitempty"`
	ToolResult *toolResult  `json:"toolResult,omitempty"`
	CachePoint *cachePointT `json:"cachePoint,omitempty"`
}

type toolUseOut struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type toolResult struct {
	ToolUseID string  `json:"toolUseId"`
	Content   []block `json:"content"`
}

type cachePointT struct {
	Type string `json:"type"`
}

type toolConfig struct {
	Tools      []toolEntry `json:"tools"`
	ToolChoice struct {
		Auto struct{} `json:"auto"`
	} `json:"toolChoice"`
}

// toolEntry is a tool specification or a cache point.
type toolEntry struct {
	ToolSpec   *toolSpec    `json:"toolSpec,omitempty"`
	CachePoint *cachePointT `json:"cachePoint,omitempty"`
}

type toolSpec struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	InputSchema struct {
		JSON json.RawMessage `json:"json"`
	} `json:"inputSchema"`
}

const (
	roleUser      = "user"
	roleAssistant = "assistant"
)

// defaultSchema is the input schema of a tool that declares none.
var defaultSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// jsonObject is b compacted when it is a JSON object, else nil.
func jsonObject(b []byte) json.RawMessage {
	var compact bytes.Buffer
	if json.Compact(&compact, b) != nil || compact.Len() == 0 || compact.Bytes()[0] != '{' {
		return nil
	}
	return compact.Bytes()
}

// buildInput maps req to a ConverseStream body. Converse has no tool
// role: tool results are toolResult blocks in a user message, and
// consecutive messages of one role are merged into one (Converse requires
// user and assistant to alternate), so a batch's results become one user
// message. The per-call Context closes the last user message (or a user
// message of its own), after the transcript's cache point, so the request
// up to there is the prefix of the conversation's next call. The body is
// byte-stable for the same request: tools in the given order, schemas
// and inputs as the request has them, compacted.
func buildInput(req llm.Request, cache cachePoints) (*converseRequest, error) {
	in := &converseRequest{Messages: []message{}}
	if req.System != "" {
		in.System = append(in.System, block{Text: req.System})
	}
	for i, m := range req.Messages {
		var role string
		var blocks []block
		switch m.Role {
		case llm.RoleSystem:
			if m.Content != "" {
				in.System = append(in.System, block{Text: m.Content})
			}
			continue
		case llm.RoleUser:
			role = roleUser
			if strings.TrimSpace(m.Content) != "" {
				blocks = append(blocks, block{Text: m.Content})
			}
		case llm.RoleAssistant:
			role = roleAssistant
			if strings.TrimSpace(m.Content) != "" {
				blocks = append(blocks, block{Text: m.Content})
			}
			for _, c := range m.ToolCalls {
				// A call whose arguments were malformed is replayed with an
				// empty input: Converse only accepts a JSON object, and the
				// error result that follows tells the model what went wrong.
				input := jsonObject([]byte(c.Arguments))
				if input == nil {
					input = json.RawMessage(`{}`)
				}
				blocks = append(blocks, block{ToolUse: &toolUseOut{ToolUseID: c.ID, Name: c.Name, Input: input}})
			}
		case llm.RoleTool:
			if m.ToolCallID == "" {
				return nil, fmt.Errorf("message %d: tool message without tool_call_id", i)
			}
			role = roleUser
			content := m.Content
			if strings.TrimSpace(content) == "" {
				content = "(empty result)"
			}
			blocks = append(blocks, block{ToolResult: &toolResult{ToolUseID: m.ToolCallID, Content: []block{{Text: content}}}})
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
		in.Messages = append(in.Messages, message{Role: role, Content: blocks})
	}
	point := &cachePointT{Type: "default"}
	if cache.system && len(in.System) > 0 {
		in.System = append(in.System, block{CachePoint: point})
	}
	if n := len(in.Messages); cache.messages && n > 0 {
		in.Messages[n-1].Content = append(in.Messages[n-1].Content, block{CachePoint: point})
	}
	if strings.TrimSpace(req.Context) != "" {
		text := block{Text: req.Context}
		if n := len(in.Messages); n > 0 && in.Messages[n-1].Role == roleUser {
			in.Messages[n-1].Content = append(in.Messages[n-1].Content, text)
		} else {
			in.Messages = append(in.Messages, message{Role: roleUser, Content: []block{text}})
		}
	}
	if len(req.Tools) > 0 {
		tc := &toolConfig{}
		for _, t := range req.Tools {
			spec := &toolSpec{Name: t.Name, Description: t.Description}
			spec.InputSchema.JSON = defaultSchema
			if len(t.Parameters) > 0 && string(t.Parameters) != "null" {
				if spec.InputSchema.JSON = jsonObject(t.Parameters); spec.InputSchema.JSON == nil {
					return nil, fmt.Errorf("tool %s: parameters are not a JSON object", t.Name)
				}
			}
			tc.Tools = append(tc.Tools, toolEntry{ToolSpec: spec})
		}
		if cache.tools {
			tc.Tools = append(tc.Tools, toolEntry{CachePoint: point})
		}
		in.ToolConfig = tc
	}
	return in, nil
}

// streamEvent is the payload of a ConverseStream event, as far as the
// answer needs it.
type streamEvent struct {
	ContentBlockIndex int `json:"contentBlockIndex"`
	Start             *struct {
		ToolUse *struct {
			ToolUseID string `json:"toolUseId"`
			Name      string `json:"name"`
		} `json:"toolUse"`
	} `json:"start"`
	Delta *struct {
		Text    string `json:"text"`
		ToolUse *struct {
			Input string `json:"input"`
		} `json:"toolUse"`
	} `json:"delta"`
	Usage *usage `json:"usage"`
}

// usage is Bedrock's token count of a call (the metadata event's).
type usage struct {
	InputTokens           int `json:"inputTokens"`
	OutputTokens          int `json:"outputTokens"`
	CacheReadInputTokens  int `json:"cacheReadInputTokens"`
	CacheWriteInputTokens int `json:"cacheWriteInputTokens"`
}

// readStream reads a stream's events to their end, passing text deltas to
// onText, and assembles the answer. Text blocks are joined with a newline,
// given to onText as well. A stream that ends before messageStop, or in an
// error, is broken.
func readStream(recv func() (Event, error), onText func(string)) (res *llm.Response, gaveText bool, err error) {
	var (
		n        int
		text     strings.Builder
		textAt   = -1 // the block the text came from last
		tools    = map[int]*toolUse{}
		stopped  bool
		use      *usage
		giveText = func(s string) {
			text.WriteString(s)
			onText(s)
		}
	)
	tool := func(i int) *toolUse {
		if tools[i] == nil {
			tools[i] = &toolUse{}
		}
		return tools[i]
	}
	for {
		ev, err := recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, text.Len() > 0, &streamError{events: n, err: err}
		}
		n++
		var e streamEvent
		switch ev.Type {
		case "contentBlockStart", "contentBlockDelta", "metadata":
			if err := json.Unmarshal(ev.Payload, &e); err != nil {
				return nil, text.Len() > 0, &streamError{events: n, err: fmt.Errorf("event %s: %w", ev.Type, err)}
			}
		}
		switch ev.Type {
		case "contentBlockStart":
			if e.Start != nil && e.Start.ToolUse != nil {
				t := tool(e.ContentBlockIndex)
				t.id, t.name = e.Start.ToolUse.ToolUseID, e.Start.ToolUse.Name
			}
		case "contentBlockDelta":
			switch {
			case e.Delta == nil:
			case e.Delta.ToolUse != nil:
				tool(e.ContentBlockIndex).input.WriteString(e.Delta.ToolUse.Input)
			case e.Delta.Text != "":
				if text.Len() > 0 && e.ContentBlockIndex != textAt {
					giveText("\n")
				}
				textAt = e.ContentBlockIndex
				giveText(e.Delta.Text)
			}
		case "messageStop":
			stopped = true
		case "metadata":
			use = e.Usage
		}
	}
	gaveText = text.Len() > 0
	if !stopped {
		return nil, gaveText, &streamError{events: n, err: errors.New("stream ended before messageStop")}
	}
	res = &llm.Response{Text: text.String(), Usage: mapUsage(use)}
	indices := make([]int, 0, len(tools))
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
func mapUsage(u *usage) llm.Usage {
	if u == nil {
		return llm.Usage{}
	}
	return llm.Usage{
		InputTokens:       u.InputTokens + u.CacheReadInputTokens + u.CacheWriteInputTokens,
		OutputTokens:      u.OutputTokens,
		CachedInputTokens: u.CacheReadInputTokens,
		CacheWriteTokens:  u.CacheWriteInputTokens,
	}
}

func argumentsError(args string) string {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &obj); err != nil || obj == nil {
		return "arguments are not a JSON object"
	}
	return ""
}
