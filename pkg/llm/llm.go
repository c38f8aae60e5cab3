// Package llm is the tool-calling interface the loop speaks to a model
// (docs/design.md §6): messages and tool definitions in, assistant text, tool calls
// and token usage out. Providers live in subpackages named after what they
// adapt (openai, bedrock, scripted). This package must not know about Valkey,
// Step Functions or specialists.
package llm

import (
	"context"
	"encoding/json"
	"errors"
)

// Role is the author of a Message, in the OpenAI Chat Completions vocabulary.
type Role string

const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of the transcript sent to a model. An assistant
// message may carry ToolCalls; a tool message answers exactly one call by
// ToolCallID.
type Message struct {
	Role       Role       `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// ToolCall is one call the model asked for. Arguments is the raw JSON text
// the model produced; ArgumentsError is set when that text is not a JSON
// object, so the loop can answer with an error result instead of failing.
type ToolCall struct {
	ID             string `json:"id"`
	Name           string `json:"name"`
	Arguments      string `json:"arguments"`
	ArgumentsError string `json:"arguments_error,omitempty"`
}

// ToolDefinition is a function tool offered to the model. Parameters is a
// plain JSON Schema object (no vendor keywords).
type ToolDefinition struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Flavour selects a model size; configuration maps it to a model id.
type Flavour string

const (
	Small  Flavour = "small"
	Medium Flavour = "medium"
	Large  Flavour = "large"
)

// Request is one LLM call, always sent with tool_choice=auto. Its parts are
// laid out so a provider can cache the start of a request it saw on the
// conversation's previous call (docs/architecture.md, "A prompt the
// providers can cache"): the tools in a stable order, the fixed System
// rules, the transcript (which only grows at its end), and last the
// per-call Context.
type Request struct {
	Flavour Flavour `json:"flavour,omitempty"`
	// System is the fixed rules: the same on every call of a conversation.
	System   string           `json:"system"`
	Messages []Message        `json:"messages"`
	Tools    []ToolDefinition `json:"tools,omitempty"`
	// Context is what changes from call to call (the artifact catalog,
	// recent skill inputs, the time), sent after the transcript: as a
	// final system message (OpenAI) or a text block closing the last user
	// message (Bedrock).
	Context string `json:"context,omitempty"`
	// CacheKey names the conversation, so its calls reach the same prompt
	// cache (OpenAI's prompt_cache_key).
	CacheKey string `json:"cache_key,omitempty"`
	// OnText, when set, receives the answer's text as it streams in, one
	// delta at a time, in order. OnReset says that an attempt which already
	// gave text failed and a retry starts the text again. A provider that
	// does not stream calls OnText once with the whole text.
	OnText  func(delta string) `json:"-"`
	OnReset func()             `json:"-"`
}

// Usage is the token count a provider reported for one call. InputTokens
// counts every input token, cached or not; CachedInputTokens of them were
// read from the provider's prompt cache (billed at the cached rate), and
// CacheWriteTokens were written to it (Bedrock bills these at its
// cache-write rate).
type Usage struct {
	InputTokens       int `json:"input_tokens"`
	OutputTokens      int `json:"output_tokens"`
	CachedInputTokens int `json:"cached_input_tokens,omitempty"`
	CacheWriteTokens  int `json:"cache_write_tokens,omitempty"`
}

// Total is input plus output tokens.
func (u Usage) Total() int { return u.InputTokens + u.OutputTokens }

// Response is the model's answer. The loop ends a turn only when ToolCalls
// is empty, never on a finish reason (docs/design.md §3.6).
type Response struct {
	Text      string     `json:"text,omitempty"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	Usage     Usage      `json:"usage"`
	Model     string     `json:"model,omitempty"`
}

// AssistantMessage is the transcript entry for a response.
func (r *Response) AssistantMessage() Message {
	return Message{Role: RoleAssistant, Content: r.Text, ToolCalls: r.ToolCalls}
}

// Text passes delta to req's OnText, when set.
func (r *Request) Text(delta string) {
	if r.OnText != nil && delta != "" {
		r.OnText(delta)
	}
}

// Reset calls req's OnReset, when set.
func (r *Request) Reset() {
	if r.OnReset != nil {
		r.OnReset()
	}
}

// ToolResultMessage is the transcript entry answering call id with content.
func ToolResultMessage(callID, content string) Message {
	return Message{Role: RoleTool, ToolCallID: callID, Content: content}
}

// Provider makes one tool-calling LLM call. Implementations retry transient
// failures (429, 5xx) themselves with backoff and a bounded number of
// attempts; an error they return is final for this attempt of the step.
// ErrRateLimited and ErrUnavailable wrap such final transient failures so the
// caller (a Lambda retried by Step Functions) can tell them apart.
type Provider interface {
	Complete(ctx context.Context, req Request) (*Response, error)
}

var (
	// ErrRateLimited is returned (wrapped) when the provider kept answering 429.
	ErrRateLimited = errors.New("llm: rate limited")
	// ErrUnavailable is returned (wrapped) when the provider kept failing with 5xx or transport errors.
	ErrUnavailable = errors.New("llm: provider unavailable")
)
