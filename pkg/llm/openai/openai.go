// Package openai is the llm.Provider for OpenAI-compatible Chat Completions
// endpoints (OpenAI, a LiteLLM proxy, vLLM, Ollama), speaking the wire
// protocol itself with net/http and encoding/json (wire.go). It maps llm.Request to one streamed chat completion with tools and
// tool_choice=auto, laid out for the endpoint's prompt cache (issue 18): the
// fixed System rules first, then the transcript, and last the per-call
// Context as a final system message, with prompt_cache_key set to the
// request's CacheKey where the endpoint accepts it. Text deltas reach the
// request's OnText as they arrive (issue 15); tool calls and usage are
// assembled from the stream into the same answer a non-streamed call gives.
// It retries 429/5xx/transport failures and streams cut midway itself, with
// exponential backoff and jitter. It must not interpret tool calls or the
// transcript: that is the loop's job. openai-go, the official SDK, is this
// package's test oracle only (the fuzz target decodes with both): linked
// into llmstep it cost ≈ 30 MB and milliseconds of cold start
// (docs/benchmarks.md).
package openai

import (
	"bytes"
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

	"github.com/clientagent/clientagent/pkg/keepalive"
	"github.com/clientagent/clientagent/pkg/llm"
)

// Defaults used when the corresponding Config field is zero.
const (
	DefaultMaxAttempts = 4
	DefaultTimeout     = 90 * time.Second
	DefaultBackoffBase = 500 * time.Millisecond
	DefaultMaxBackoff  = 20 * time.Second
	// DefaultBaseURL is OpenAI's public endpoint.
	DefaultBaseURL = "https://api.openai.com/v1"
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
	cfg Config
	url string // the chat completions URL
	hc  *http.Client
	log *slog.Logger
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
		hc = keepalive.Client()
	}
	base := cfg.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	return &Provider{cfg: cfg, url: strings.TrimRight(base, "/") + "/chat/completions", hc: hc, log: log}
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
	params, err := buildRequest(model, req)
	if err != nil {
		return nil, fmt.Errorf("openai: build request: %w", err)
	}
	withKey := req.CacheKey != "" && !p.noCacheKey.Load()
	var body []byte
	bodyHasKey := false
	for attempt := 1; ; attempt++ {
		if body == nil || bodyHasKey != withKey {
			params.PromptCacheKey = ""
			if withKey {
				params.PromptCacheKey = req.CacheKey
			}
			if body, err = params.encode(); err != nil {
				return nil, fmt.Errorf("openai: build request: %w", err)
			}
			bodyHasKey = withKey
		}
		res, gaveText, err := p.attempt(ctx, body, &req)
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
func (p *Provider) attempt(ctx context.Context, body []byte, req *llm.Request) (res *llm.Response, gaveText bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return nil, false, &badAnswer{err: fmt.Errorf("openai: request: %w", err)}
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("User-Agent", "clientagent")
	if p.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+p.cfg.APIKey)
	}
	hres, err := p.hc.Do(hreq)
	if err != nil {
		return nil, false, err
	}
	defer hres.Body.Close()
	if hres.StatusCode >= 400 {
		return nil, false, newAPIError(hres)
	}
	if isJSON(hres.Header.Get("Content-Type")) {
		// Some OpenAI-compatible servers ignore "stream" and answer with
		// one JSON completion.
		whole, err := io.ReadAll(hres.Body)
		if err != nil {
			return nil, false, err
		}
		if res, err = decodeCompletion(whole); err != nil {
			return nil, false, &badAnswer{err: err}
		}
		req.Text(res.Text)
		return res, false, nil
	}
	return readStream(hres.Body, req.Text)
}

// readStream reads a text/event-stream body of chunks to its end ("data:
// [DONE]"), passing text deltas to onText, and maps the completion they make.
func readStream(body io.Reader, onText func(string)) (res *llm.Response, gaveText bool, err error) {
	var a assembler
	events := newEventReader(body)
	for {
		data, err := events.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, a.gaveText, &streamError{chunks: a.chunks, err: err}
		}
		if bytes.HasPrefix(data, []byte("[DONE]")) {
			break
		}
		var c chunk
		if err := unmarshalLenient(data, &c); err != nil {
			return nil, a.gaveText, &streamError{chunks: a.chunks, err: err}
		}
		if len(c.Error) > 0 {
			return nil, a.gaveText, &streamError{chunks: a.chunks, err: fmt.Errorf("received error while streaming: %s", c.Error)}
		}
		a.add(&c, onText)
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
		// An error event's message quotes the event; keep it short.
		return failure{message: fmt.Sprintf("stream cut after %d chunks: %s", broken.chunks, truncate(rootCause(err).Error(), 500)), retryAfter: -1}
	}
	var apiErr *apiError
	if !errors.As(err, &apiErr) {
		// Transport error or attempt timeout. net/http's url.Error carries the
		// URL, which may hold credentials for some gateways, so keep only the cause.
		return failure{message: "transport error: " + truncate(rootCause(err).Error(), 500), retryAfter: -1}
	}
	f := failure{status: apiErr.status, retryAfter: -1}
	f.message = fmt.Sprintf("HTTP %d", apiErr.status)
	if m := apiErr.message(); m != "" {
		f.message += ": " + truncate(m, 500)
	} else if t := http.StatusText(apiErr.status); t != "" {
		f.message += " " + t
	}
	switch {
	case apiErr.status == http.StatusTooManyRequests || apiErr.status >= 500:
		f.retryAfter = parseRetryAfter(apiErr.header)
	case apiErr.status == http.StatusRequestTimeout:
		// 408 is transient by definition; treat like a transport failure.
	default:
		f.final = true
		// OpenAI says "Unrecognized request argument supplied:
		// prompt_cache_key"; strict servers answer 422 "extra fields not
		// permitted" naming the field.
		if apiErr.status == http.StatusBadRequest || apiErr.status == http.StatusUnprocessableEntity {
			f.refusesCacheKey = strings.Contains(string(apiErr.body), "prompt_cache_key")
		}
	}
	return f
}

// apiError is an HTTP error answer (status 400 and above).
type apiError struct {
	status int
	header http.Header
	body   []byte // the first 8 KiB
}

func (e *apiError) Error() string { return fmt.Sprintf("HTTP %d", e.status) }

// newAPIError reads the error answer res (the first 8 KiB of its body).
func newAPIError(res *http.Response) *apiError {
	b, _ := io.ReadAll(io.LimitReader(res.Body, 8<<10))
	return &apiError{status: res.StatusCode, header: res.Header, body: b}
}

// message is the provider's message: OpenAI's error.message (or an error
// that is a string), else the body's top-level "message" (vLLM and other
// servers that do not wrap their errors).
func (e *apiError) message() string {
	var top struct {
		Error   json.RawMessage `json:"error"`
		Message any             `json:"message"`
	}
	if json.Unmarshal(e.body, &top) != nil {
		return ""
	}
	var wrapped struct {
		Message any `json:"message"`
	}
	if json.Unmarshal(top.Error, &wrapped) == nil {
		if m, ok := wrapped.Message.(string); ok && strings.TrimSpace(m) != "" {
			return strings.TrimSpace(m)
		}
	}
	var s string
	if json.Unmarshal(top.Error, &s) == nil && strings.TrimSpace(s) != "" {
		return strings.TrimSpace(s)
	}
	if m, ok := top.Message.(string); ok {
		return strings.TrimSpace(m)
	}
	return ""
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
