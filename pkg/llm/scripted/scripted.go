// Package scripted is a deterministic llm.Provider: a function (Func) for
// tests, and Demo, the rule-based offline demo model that drives the
// documented demo prompts without a real LLM (the model of `make run`). Every request is
// recorded so tests can count LLM calls and inspect transcripts. It must not
// do I/O or depend on anything but pkg/llm: it stands in for a model, not for
// the platform.
package scripted

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/clientagent/clientagent/pkg/llm"
)

// Provider is a deterministic llm.Provider. It is safe for concurrent use.
type Provider struct {
	answer func(req llm.Request) (*llm.Response, error)

	mu       sync.Mutex
	requests []llm.Request
	delay    time.Duration // between streamed chunks
}

// Stream makes p stream its answers' text (llm.Request.OnText) in small
// chunks, waiting delay between them, as a real model does (issue 15). It
// returns p.
func (p *Provider) Stream(delay time.Duration) *Provider {
	p.mu.Lock()
	p.delay = delay
	p.mu.Unlock()
	return p
}

var _ llm.Provider = (*Provider)(nil)

// Func returns a provider answering with f. f gets a copy of the request.
func Func(f func(req llm.Request) (*llm.Response, error)) *Provider {
	return &Provider{answer: f}
}

// Complete records req and answers it. The response is a copy the caller may
// keep; tool calls without an ID get a deterministic one derived from the
// transcript, and zero usage is replaced by an estimate of len(text)/4 so
// token budgets work.
func (p *Provider) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	req = cloneRequest(req)
	p.mu.Lock()
	p.requests = append(p.requests, cloneRequest(req))
	p.mu.Unlock()

	res, err := p.answer(req)
	if err != nil {
		return nil, err
	}
	if res == nil {
		return nil, errors.New("scripted: answer returned no response")
	}
	out := *res
	out.ToolCalls = slices.Clone(res.ToolCalls)
	prefix := callIDPrefix(req)
	for i := range out.ToolCalls {
		if out.ToolCalls[i].ID == "" {
			out.ToolCalls[i].ID = fmt.Sprintf("%s_%d", prefix, i)
		}
	}
	if out.Usage == (llm.Usage{}) {
		out.Usage = estimateUsage(req, &out)
	}
	if out.Model == "" {
		out.Model = "scripted"
	}
	if err := p.stream(ctx, req, out.Text); err != nil {
		return nil, err
	}
	return &out, nil
}

// stream gives text to req.OnText in chunks of a few words, p.delay apart.
func (p *Provider) stream(ctx context.Context, req llm.Request, text string) error {
	p.mu.Lock()
	delay := p.delay
	p.mu.Unlock()
	for i, chunk := range chunks(text) {
		if i > 0 && delay > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("scripted: %w", ctx.Err())
			case <-time.After(delay):
			}
		}
		req.Text(chunk)
	}
	return nil
}

// chunks splits text after every third space, like a model's tokens
// arrive: the chunks joined are text.
func chunks(text string) []string {
	var out []string
	spaces, start := 0, 0
	for i, r := range text {
		if r == ' ' {
			if spaces++; spaces%3 == 0 {
				out = append(out, text[start:i+1])
				start = i + 1
			}
		}
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}

// Requests returns a copy of every request received, in order.
func (p *Provider) Requests() []llm.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]llm.Request, len(p.requests))
	for i, r := range p.requests {
		out[i] = cloneRequest(r)
	}
	return out
}

// Calls returns how many requests the provider received.
func (p *Provider) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.requests)
}

func cloneRequest(r llm.Request) llm.Request {
	r.Messages = slices.Clone(r.Messages)
	for i := range r.Messages {
		r.Messages[i].ToolCalls = slices.Clone(r.Messages[i].ToolCalls)
	}
	r.Tools = slices.Clone(r.Tools)
	return r
}

// callIDPrefix is "call_" plus a short hash of the transcript, so ids are
// the same for the same transcript and differ between turns.
func callIDPrefix(req llm.Request) string {
	h := sha256.New()
	// Encoding a Request cannot fail: it holds only strings and raw JSON.
	_ = json.NewEncoder(h).Encode(req.Messages)
	return "call_" + hex.EncodeToString(h.Sum(nil))[:10]
}

// estimateUsage counts roughly four characters per token.
func estimateUsage(req llm.Request, res *llm.Response) llm.Usage {
	in := len(req.System) + len(req.Context)
	for _, m := range req.Messages {
		in += len(m.Content)
		for _, c := range m.ToolCalls {
			in += len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		in += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	out := len(res.Text)
	for _, c := range res.ToolCalls {
		out += len(c.Name) + len(c.Arguments)
	}
	return llm.Usage{InputTokens: in/4 + 1, OutputTokens: out/4 + 1}
}
