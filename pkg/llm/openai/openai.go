// Package openai is the llm.Provider for OpenAI-compatible Chat Completions
// endpoints (OpenAI, a LiteLLM proxy, vLLM, Ollama), built on openai-go.
// It maps llm.Request to one streamed chat completion with tools and
// tool_choice=auto, laid out for the endpoint's prompt cache (issue 18): the
// fixed System rules first, then the transcript, and last the per-call
// Context as a final system message, with prompt_cache_key set to the
// request's CacheKey where the endpoint accepts it. Text deltas reach the
// request's OnText as they arrive (issue 15); tool calls and usage are
// assembled from the stream into the same answer a non-streamed call gives.
// It retries 429/5xx/transport failures and streams cut midway itself, with
// exponential backoff and jitter. It must not interpret tool calls or the
// transcript: that is the loop's job.
package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/clientagent/clientagent/pkg/llm"
	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
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
	// noCacheKey is set once the endpoint refused prompt_cache_key, so later
	// calls do not pay for the refused request again.
	noCacheKey atomic.Bool
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

// Complete sends req as one streamed chat completion, retrying transient
// failures. Text deltas go to req.OnText as they arrive; when an attempt
// that already gave text fails and is retried, req.OnReset is called first.
// After the last attempt it returns an error wrapping llm.ErrRateLimited
// (HTTP 429) or llm.ErrUnavailable (5xx, transport errors, streams cut
// midway, attempt timeouts). Any other HTTP error is returned at once with
// the provider's message, except an endpoint refusing prompt_cache_key,
// which is asked again without it (and never again by this Provider). A
// tool call whose arguments are not a JSON object is still returned, with
// ArgumentsError set.
func (p *Provider) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	model := p.model(req.Flavour)
	params, err := buildParams(model, req)
	if err != nil {
		return nil, fmt.Errorf("openai: build request: %w", err)
	}
	withKey := req.CacheKey != "" && !p.noCacheKey.Load()
	for attempt := 1; ; attempt++ {
		send := params
		if withKey {
			send.PromptCacheKey = oai.String(req.CacheKey)
		}
		res, gaveText, err := p.attempt(ctx, send, &req)
		if err == nil {
			return res, nil
		}
		c := classify(err)
		if ctxErr := ctx.Err(); ctxErr != nil {
			// The caller's deadline ended the call: no retry can help.
			return nil, fmt.Errorf("openai: chat completion (model %s), attempt %d: %w", model, attempt, ctxErr)
		}
		if withKey && c.refusesCacheKey {
			// "Where the endpoint accepts it" (issue 18): some
			// OpenAI-compatible servers reject unknown parameters. Asking
			// again without the key is not a retry of a failure, so it
			// does not count as an attempt.
			p.noCacheKey.Store(true)
			withKey = false
			attempt--
			p.log.InfoContext(ctx, "endpoint refuses prompt_cache_key, sending requests without it",
				"provider", "openai", "model", model, "error", c.message)
			continue
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
		if gaveText {
			req.Reset()
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("openai: chat completion (model %s): %w (waiting to retry after %s: %w)", model, ctx.Err(), c.message, c.sentinel())
		case <-t.C:
		}
	}
}

// attempt makes one streamed call and reads it to its end. gaveText says
// whether text deltas already went to req.OnText, so a retry must reset.
func (p *Provider) attempt(ctx context.Context, params oai.ChatCompletionNewParams, req *llm.Request) (res *llm.Response, gaveText bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	// Some OpenAI-compatible servers ignore "stream" and answer with one
	// JSON completion; it is kept aside here and decoded as such.
	var whole []byte
	keepWhole := func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		res, err := next(r)
		if err != nil || res.StatusCode >= 300 || !isJSON(res.Header.Get("Content-Type")) {
			return res, err
		}
		whole, err = io.ReadAll(res.Body)
		_ = res.Body.Close()
		if err != nil {
			return nil, err
		}
		res.Body = http.NoBody
		return res, nil
	}
	stream := p.client.Chat.Completions.NewStreaming(ctx, params, option.WithMiddleware(keepWhole))
	defer stream.Close()
	res, gaveText, err = readStream(stream, req.Text)
	if whole != nil {
		if res, err = decodeCompletion(whole); err != nil {
			return nil, false, &badAnswer{err: err}
		}
		req.Text(res.Text)
		return res, false, nil
	}
	return res, gaveText, err
}

// readStream reads a stream of chunks to its end, passing text deltas to
// onText, and maps the completion they make.
func readStream(stream *ssestream.Stream[oai.ChatCompletionChunk], onText func(string)) (res *llm.Response, gaveText bool, err error) {
	var a assembler
	for stream.Next() {
		a.add(stream.Current(), onText)
	}
	if err := stream.Err(); err != nil {
		var apiErr *oai.Error
		if errors.As(err, &apiErr) {
			return nil, false, err
		}
		return nil, a.gaveText, &streamError{chunks: a.chunks, err: err}
	}
	if !a.finished {
		// A stream that ends cleanly but early (a proxy closing it) is as
		// broken as a dropped connection.
		return nil, a.gaveText, &streamError{chunks: a.chunks, err: errors.New("stream ended without a finish reason")}
	}
	if res, err = mapResponse(a.completion()); err != nil {
		return nil, a.gaveText, &badAnswer{err: err}
	}
	return res, a.gaveText, nil
}

// streamError is a stream that failed after the request was accepted: the
// connection dropped, an error event came, or the stream ended early. It is
// retried like a transport error.
type streamError struct {
	chunks int
	err    error
}

func (e *streamError) Error() string {
	return fmt.Sprintf("stream broken after %d chunks: %v", e.chunks, e.err)
}

func (e *streamError) Unwrap() error { return e.err }

// badAnswer is an answer that arrived whole but cannot be read; asking
// again would get the same.
type badAnswer struct{ err error }

func (e *badAnswer) Error() string { return e.err.Error() }

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
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
	status          int           // HTTP status, 0 for transport errors
	final           bool          // not worth retrying
	refusesCacheKey bool          // the endpoint does not accept prompt_cache_key
	message         string        // safe to show: no URL, headers or key
	retryAfter      time.Duration // -1 when the server did not say
}

func (f failure) sentinel() error {
	if f.status == http.StatusTooManyRequests {
		return llm.ErrRateLimited
	}
	return llm.ErrUnavailable
}

func classify(err error) failure {
	var bad *badAnswer
	if errors.As(err, &bad) {
		return failure{final: true, message: truncate(bad.Error(), 500), retryAfter: -1}
	}
	var broken *streamError
	if errors.As(err, &broken) && broken.chunks > 0 {
		// The SDK's error event message may quote the event; keep it short.
		return failure{message: fmt.Sprintf("stream cut after %d chunks: %s", broken.chunks, truncate(rootCause(err).Error(), 500)), retryAfter: -1}
	}
	var apiErr *oai.Error
	if !errors.As(err, &apiErr) {
		// Transport error or attempt timeout. The SDK's url.Error carries the
		// URL, which may hold credentials for some gateways, so keep only the cause.
		return failure{message: "transport error: " + truncate(rootCause(err).Error(), 500), retryAfter: -1}
	}
	f := failure{status: apiErr.StatusCode, retryAfter: -1}
	f.message = fmt.Sprintf("HTTP %d", apiErr.StatusCode)
	m, body := providerMessage(apiErr)
	if m != "" {
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
		// OpenAI says "Unrecognized request argument supplied:
		// prompt_cache_key"; strict servers answer 422 "extra fields not
		// permitted" naming the field.
		if apiErr.StatusCode == http.StatusBadRequest || apiErr.StatusCode == http.StatusUnprocessableEntity {
			f.refusesCacheKey = strings.Contains(body, "prompt_cache_key")
		}
	}
	return f
}

// providerMessage returns the error's message and the body it came in (the
// first 8 KiB): OpenAI's error.message, else the body's top-level "message"
// (vLLM and other servers that do not wrap their errors).
func providerMessage(apiErr *oai.Error) (message, body string) {
	message = strings.TrimSpace(apiErr.Message)
	if apiErr.Response != nil && apiErr.Response.Body != nil {
		// The SDK put the body it read back for us.
		b, _ := io.ReadAll(io.LimitReader(apiErr.Response.Body, 8<<10))
		body = string(b)
	}
	if message == "" {
		var top struct {
			Message string `json:"message"`
		}
		if json.Unmarshal([]byte(body), &top) == nil {
			message = strings.TrimSpace(top.Message)
		}
	}
	return message, body
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

// buildParams maps req to Chat Completions parameters: the system rules
// first, then the transcript, then the per-call Context as a last system
// message, so everything before the Context is the same prefix on the
// conversation's next call (issue 18); tools as function tools in the given
// order with tool_choice=auto (only when there are tools: some servers
// reject tool_choice without them). The body is byte-stable for the same
// request: schemas are maps, which encode with sorted keys.
func buildParams(model string, req llm.Request) (oai.ChatCompletionNewParams, error) {
	params := oai.ChatCompletionNewParams{
		Model: shared.ChatModel(model),
		// The call is streamed; usage comes in a last chunk only when asked.
		StreamOptions: oai.ChatCompletionStreamOptionsParam{IncludeUsage: oai.Bool(true)},
	}
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
	if req.Context != "" {
		params.Messages = append(params.Messages, oai.SystemMessage(req.Context))
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

// assembler rebuilds, from the chunks of a streamed completion, the
// completion a non-streamed call would have returned, so both map through
// mapResponse alike. Only choice 0 counts (n is never set).
type assembler struct {
	chunks   int
	model    string
	text     strings.Builder
	calls    []*callParts
	slot     map[int64]int // a delta's tool-call index → position in calls
	usage    oai.CompletionUsage
	finished bool // a finish_reason arrived
	gaveText bool
}

// callParts is one tool call being assembled; its arguments usually come
// in many fragments, its id, type and name in the first.
type callParts struct {
	id, typ    string
	name, args strings.Builder
}

func (a *assembler) add(c oai.ChatCompletionChunk, onText func(string)) {
	a.chunks++
	if a.model == "" {
		a.model = c.Model
	}
	if c.JSON.Usage.Valid() {
		// Sent in the last chunk (stream_options.include_usage); some
		// servers send a running count in every chunk, the last one wins.
		a.usage = c.Usage
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		if ch.Delta.Content != "" {
			a.text.WriteString(ch.Delta.Content)
			a.gaveText = true
			onText(ch.Delta.Content)
		}
		for _, d := range ch.Delta.ToolCalls {
			a.addCall(d)
		}
		if ch.FinishReason != "" {
			a.finished = true
		}
	}
}

func (a *assembler) addCall(d oai.ChatCompletionChunkChoiceDeltaToolCall) {
	i, ok := a.slot[d.Index]
	// A delta naming another id than its index's call starts a new call:
	// some servers (older Ollama) send whole calls, all with index 0.
	if !ok || (d.ID != "" && a.calls[i].id != "" && d.ID != a.calls[i].id) {
		if a.slot == nil {
			a.slot = map[int64]int{}
		}
		i = len(a.calls)
		a.slot[d.Index] = i
		a.calls = append(a.calls, &callParts{})
	}
	c := a.calls[i]
	if d.ID != "" {
		c.id = d.ID
	}
	if d.Type != "" {
		c.typ = d.Type
	}
	c.name.WriteString(d.Function.Name)
	c.args.WriteString(d.Function.Arguments)
}

func (a *assembler) completion() *oai.ChatCompletion {
	msg := oai.ChatCompletionMessage{Content: a.text.String()}
	for _, c := range a.calls {
		tc := oai.ChatCompletionMessageToolCallUnion{ID: c.id, Type: c.typ}
		tc.Function.Name, tc.Function.Arguments = c.name.String(), c.args.String()
		if c.typ != "" && c.typ != "function" {
			tc.Custom.Name, tc.Custom.Input = tc.Function.Name, tc.Function.Arguments
		}
		msg.ToolCalls = append(msg.ToolCalls, tc)
	}
	return &oai.ChatCompletion{Model: a.model, Choices: []oai.ChatCompletionChoice{{Message: msg}}, Usage: a.usage}
}

// decodeCompletion reads a whole (non-streamed) Chat Completions body.
func decodeCompletion(b []byte) (*llm.Response, error) {
	var res oai.ChatCompletion
	if err := res.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("openai: read chat completion: %w", err)
	}
	return mapResponse(&res)
}

// mapResponse maps a completion, whole or assembled from a stream. OpenAI's
// prompt_tokens already counts the cached tokens, as llm.Usage wants.
func mapResponse(res *oai.ChatCompletion) (*llm.Response, error) {
	if res == nil || len(res.Choices) == 0 {
		return nil, errors.New("openai: chat completion returned no choices")
	}
	msg := res.Choices[0].Message
	out := &llm.Response{
		Text:  msg.Content,
		Model: res.Model,
		Usage: llm.Usage{
			InputTokens:       int(res.Usage.PromptTokens),
			OutputTokens:      int(res.Usage.CompletionTokens),
			CachedInputTokens: int(res.Usage.PromptTokensDetails.CachedTokens),
			CacheWriteTokens:  int(res.Usage.PromptTokensDetails.CacheWriteTokens),
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
