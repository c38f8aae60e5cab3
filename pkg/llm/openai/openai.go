// Package openai is the llm.Provider for OpenAI-compatible Chat Completions
// endpoints (OpenAI, a LiteLLM proxy, vLLM, Ollama), built on openai-go.
// It maps llm.Request to one chat completion with tools and
// tool_choice=auto, retries 429/5xx/transport failures itself with
// exponential backoff and jitter, and maps the answer back. It must not
// interpret tool calls or the transcript: that is the loop's job.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/clientagent/clientagent/pkg/llm"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// Defaults used when the corresponding Config field is zero.
const (
	DefaultMaxAttempts = 4
	DefaultTimeout     = 90 * time.Second
	DefaultBackoffBase = 500 * time.Millisecond
	DefaultMaxBackoff  = 20 * time.Second
)

// Config configures a Provider. Only Model is required; BaseURL defaults to
// OpenAI's public endpoint.
type Config struct {
	// BaseURL is the API root including the version path, e.g.
	// "http://localhost:4000/v1" for LiteLLM or "http://localhost:11434/v1" for Ollama.
	BaseURL string
	// APIKey is sent as a bearer token; empty sends no Authorization header.
	APIKey string
	// Model is the model id used for every flavour not listed in FlavourModels.
	Model string
	// FlavourModels optionally maps a request's flavour to a model id.
	FlavourModels map[llm.Flavour]string
	// HTTPClient is the client used for calls; nil uses a default client.
	HTTPClient *http.Client
	// MaxAttempts bounds the attempts per Complete (first try included).
	MaxAttempts int
	// Timeout is the deadline of one attempt (the caller's context still wins).
	Timeout time.Duration
	// BackoffBase is the first retry delay before jitter; it doubles per retry.
	BackoffBase time.Duration
	// MaxBackoff caps both the computed backoff and a server's Retry-After.
	MaxBackoff time.Duration
	// Logger receives one event per failed attempt; nil discards.
	Logger *slog.Logger
}

// Provider is an llm.Provider speaking Chat Completions. It is safe for
// concurrent use.
type Provider struct {
	cfg    Config
	client oai.Client
	log    *slog.Logger
}

var _ llm.Provider = (*Provider)(nil)

// New returns a Provider for cfg, filling zero fields with the defaults.
func New(cfg Config) *Provider {
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = DefaultBackoffBase
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	// Retries are ours (WithMaxRetries(0)): we need the sentinel errors after
	// the last attempt, a configurable backoff for tests, and a log event per
	// attempt. Explicit options override the SDK's OPENAI_* environment defaults.
	opts := []option.RequestOption{
		option.WithMaxRetries(0),
		option.WithHTTPClient(hc),
		option.WithAPIKey(cfg.APIKey),
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	return &Provider{cfg: cfg, client: oai.NewClient(opts...), log: log}
}

// Complete sends req as one chat completion, retrying transient failures.
// After the last attempt it returns an error wrapping llm.ErrRateLimited
// (HTTP 429) or llm.ErrUnavailable (5xx, transport errors, attempt
// timeouts). Any other HTTP error is returned at once with the provider's
// message. A tool call whose arguments are not a JSON object is still
// returned, with ArgumentsError set.
func (p *Provider) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	model := p.model(req.Flavour)
	params, err := buildParams(model, req)
	if err != nil {
		return nil, fmt.Errorf("openai: build request: %w", err)
	}
	for attempt := 1; ; attempt++ {
		res, err := p.attempt(ctx, params)
		if err == nil {
			return mapResponse(res)
		}
		c := classify(err)
		if ctxErr := ctx.Err(); ctxErr != nil {
			// The caller's deadline ended the call: no retry can help.
			return nil, fmt.Errorf("openai: chat completion (model %s), attempt %d: %w", model, attempt, ctxErr)
		}
		if c.final {
			return nil, fmt.Errorf("openai: chat completion (model %s): %s", model, c.message)
		}
		if attempt >= p.cfg.MaxAttempts {
			return nil, fmt.Errorf("openai: chat completion (model %s) failed after %d attempts: %s: %w", model, attempt, c.message, c.sentinel())
		}
		delay := p.backoff(attempt, c.retryAfter)
		p.log.WarnContext(ctx, "llm call failed, retrying",
			"provider", "openai", "model", model, "attempt", attempt,
			"status", c.status, "error", c.message, "delay", delay)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("openai: chat completion (model %s): %w (waiting to retry after %s: %w)", model, ctx.Err(), c.message, c.sentinel())
		case <-t.C:
		}
	}
}

func (p *Provider) attempt(ctx context.Context, params oai.ChatCompletionNewParams) (*oai.ChatCompletion, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	return p.client.Chat.Completions.New(ctx, params)
}

func (p *Provider) model(f llm.Flavour) string {
	if m := p.cfg.FlavourModels[f]; m != "" {
		return m
	}
	return p.cfg.Model
}

// backoff is exponential with "equal jitter" (half fixed, half random), so
// parallel loops hitting the same rate limit spread out. A server's
// Retry-After wins when present, capped like the backoff.
func (p *Provider) backoff(attempt int, retryAfter time.Duration) time.Duration {
	if retryAfter >= 0 {
		return min(retryAfter, p.cfg.MaxBackoff)
	}
	d := p.cfg.BackoffBase << (attempt - 1)
	if d <= 0 || d > p.cfg.MaxBackoff {
		d = p.cfg.MaxBackoff
	}
	half := d / 2
	return half + rand.N(half+1)
}

// failure is the classification of one failed attempt.
type failure struct {
	status     int           // HTTP status, 0 for transport errors
	final      bool          // not worth retrying
	message    string        // safe to show: no URL, headers or key
	retryAfter time.Duration // -1 when the server did not say
}

func (f failure) sentinel() error {
	if f.status == http.StatusTooManyRequests {
		return llm.ErrRateLimited
	}
	return llm.ErrUnavailable
}

func classify(err error) failure {
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) {
		// Transport error or attempt timeout. The SDK's url.Error carries the
		// URL, which may hold credentials for some gateways, so keep only the cause.
		return failure{message: "transport error: " + rootCause(err).Error(), retryAfter: -1}
	}
	f := failure{status: apiErr.StatusCode, retryAfter: -1}
	f.message = fmt.Sprintf("HTTP %d", apiErr.StatusCode)
	if m := strings.TrimSpace(apiErr.Message); m != "" {
		f.message += ": " + truncate(m, 500)
	} else if t := http.StatusText(apiErr.StatusCode); t != "" {
		f.message += " " + t
	}
	switch {
	case apiErr.StatusCode == http.StatusTooManyRequests || apiErr.StatusCode >= 500:
		if apiErr.Response != nil {
			f.retryAfter = parseRetryAfter(apiErr.Response.Header)
		}
	case apiErr.StatusCode == http.StatusRequestTimeout:
		// 408 is transient by definition; treat like a transport failure.
	default:
		f.final = true
	}
	return f
}

func rootCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

// parseRetryAfter reads Retry-After-Ms (OpenAI, LiteLLM) or Retry-After in
// seconds; an HTTP date or garbage counts as absent (-1).
func parseRetryAfter(h http.Header) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	if v := h.Get("Retry-After"); v != "" {
		if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
			return time.Duration(s * float64(time.Second))
		}
	}
	return -1
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// buildParams maps req to Chat Completions parameters: the system prompt
// first, then the transcript; tools as function tools with tool_choice=auto
// (only when there are tools: some servers reject tool_choice without them).
func buildParams(model string, req llm.Request) (oai.ChatCompletionNewParams, error) {
	params := oai.ChatCompletionNewParams{Model: shared.ChatModel(model)}
	if req.System != "" {
		params.Messages = append(params.Messages, oai.SystemMessage(req.System))
	}
	for i, m := range req.Messages {
		msg, err := mapMessage(m)
		if err != nil {
			return params, fmt.Errorf("message %d: %w", i, err)
		}
		params.Messages = append(params.Messages, msg)
	}
	for _, t := range req.Tools {
		schema := shared.FunctionParameters{"type": "object", "properties": map[string]any{}}
		if len(t.Parameters) > 0 && string(t.Parameters) != "null" {
			schema = nil
			if err := json.Unmarshal(t.Parameters, &schema); err != nil {
				return params, fmt.Errorf("tool %s: parameters are not a JSON object: %w", t.Name, err)
			}
		}
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: schema}
		if t.Description != "" {
			fn.Description = oai.String(t.Description)
		}
		params.Tools = append(params.Tools, oai.ChatCompletionFunctionTool(fn))
	}
	if len(params.Tools) > 0 {
		params.ToolChoice = oai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: oai.String("auto")}
	}
	return params, nil
}

func mapMessage(m llm.Message) (oai.ChatCompletionMessageParamUnion, error) {
	switch m.Role {
	case llm.RoleSystem:
		return oai.SystemMessage(m.Content), nil
	case llm.RoleUser:
		return oai.UserMessage(m.Content), nil
	case llm.RoleTool:
		if m.ToolCallID == "" {
			return oai.ChatCompletionMessageParamUnion{}, errors.New("tool message without tool_call_id")
		}
		return oai.ToolMessage(m.Content, m.ToolCallID), nil
	case llm.RoleAssistant:
		var a oai.ChatCompletionAssistantMessageParam
		// Content is omitted when empty and there are calls: the wire format
		// allows it and some servers reject an empty string next to tool_calls.
		if m.Content != "" || len(m.ToolCalls) == 0 {
			a.Content.OfString = oai.String(m.Content)
		}
		for _, c := range m.ToolCalls {
			a.ToolCalls = append(a.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
					ID: c.ID,
					Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name:      c.Name,
						Arguments: c.Arguments,
					},
				},
			})
		}
		return oai.ChatCompletionMessageParamUnion{OfAssistant: &a}, nil
	default:
		return oai.ChatCompletionMessageParamUnion{}, fmt.Errorf("unknown role %q", m.Role)
	}
}

func mapResponse(res *oai.ChatCompletion) (*llm.Response, error) {
	if res == nil || len(res.Choices) == 0 {
		return nil, errors.New("openai: chat completion returned no choices")
	}
	msg := res.Choices[0].Message
	out := &llm.Response{
		Text:  msg.Content,
		Model: res.Model,
		Usage: llm.Usage{
			InputTokens:  int(res.Usage.PromptTokens),
			OutputTokens: int(res.Usage.CompletionTokens),
		},
	}
	for _, tc := range msg.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			// Custom (free-text) tools are never offered, so a custom call is
			// surfaced as an error the loop can answer instead of dropped.
			out.ToolCalls = append(out.ToolCalls, llm.ToolCall{
				ID: tc.ID, Name: tc.Custom.Name, Arguments: tc.Custom.Input,
				ArgumentsError: fmt.Sprintf("unsupported tool call type %q", tc.Type),
			})
			continue
		}
		call := llm.ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments}
		// Some servers (Ollama, vLLM) send "" for a call without arguments.
		if strings.TrimSpace(call.Arguments) == "" {
			call.Arguments = "{}"
		}
		call.ArgumentsError = ArgumentsError(call.Arguments)
		out.ToolCalls = append(out.ToolCalls, call)
	}
	return out, nil
}

// ArgumentsError returns why args is not a JSON object, or "" when it is.
func ArgumentsError(args string) string {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(args), &obj); err != nil {
		return "arguments are not a valid JSON object: " + err.Error()
	}
	if obj == nil {
		return "arguments are not a valid JSON object: null"
	}
	return ""
}
