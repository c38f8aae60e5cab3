// Package openaitest serves an llm.Provider (a scripted model) as an
// OpenAI-compatible Chat Completions endpoint, so tests and benchmarks
// drive the real OpenAI provider over the wire. It records every request
// body, and reports cached prompt tokens the way OpenAI does: the part of a
// request's prompt equal to the start of the previous request with the
// same prompt_cache_key, counted in whole blocks of 128 tokens (about 4
// characters each) once a prompt has 1024 tokens.
package openaitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/clientagent/clientagent/pkg/llm"
)

// Server is a running endpoint; URL is its base URL (OPENAI_BASE_URL).
type Server struct {
	URL string

	model llm.Provider
	mu    sync.Mutex
	// bodies are the request bodies received, in order.
	bodies [][]byte
	// last is the newest prompt per cache key.
	last map[string]string
	// conns counts the connections accepted.
	conns atomic.Int64
}

// Start serves model until the test ends.
func Start(t testing.TB, model llm.Provider) *Server {
	t.Helper()
	s := &Server{model: model, last: map[string]string{}}
	srv := httptest.NewUnstartedServer(s)
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/v1"
	return s
}

// Connections is how many connections the endpoint has accepted.
func (s *Server) Connections() int64 { return s.conns.Load() }

// Bodies returns a copy of the request bodies received, in order.
func (s *Server) Bodies() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]byte, len(s.bodies))
	for i, b := range s.bodies {
		out[i] = bytes.Clone(b)
	}
	return out
}

// wireRequest is the part of a Chat Completions request the server reads.
type wireRequest struct {
	Model          string            `json:"model"`
	Messages       []json.RawMessage `json:"messages"`
	Tools          []json.RawMessage `json:"tools"`
	PromptCacheKey string            `json:"prompt_cache_key"`
}

type wireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// Prompt is a request's prompt in the order the provider reads it: the
// tools, then each message, as sent. A provider's prompt cache can serve
// the start of it that equals the start of the previous request's.
func Prompt(body []byte) (string, error) {
	var r wireRequest
	if err := json.Unmarshal(body, &r); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, t := range r.Tools {
		b.Write(t)
	}
	for _, m := range r.Messages {
		b.Write(m)
	}
	return b.String(), nil
}

// CommonPrefix is the length of the longest common prefix of a and b.
func CommonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var wr wireRequest
	if err := json.Unmarshal(body, &wr); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req, err := decode(wr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	prompt, _ := Prompt(body)
	s.mu.Lock()
	s.bodies = append(s.bodies, body)
	prev := s.last[wr.PromptCacheKey]
	if wr.PromptCacheKey != "" {
		s.last[wr.PromptCacheKey] = prompt
	}
	s.mu.Unlock()

	res, err := s.model.Complete(r.Context(), req)
	if err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": err.Error(), "type": "invalid_request_error"}})
		return
	}
	promptTokens := len(prompt)/4 + 1
	cached := 0
	if wr.PromptCacheKey != "" && promptTokens >= 1024 {
		cached = CommonPrefix(prev, prompt) / 4 / 128 * 128
	}
	msg := map[string]any{"role": "assistant", "content": res.Text}
	finish := "stop"
	if len(res.ToolCalls) > 0 {
		var calls []map[string]any
		for i, c := range res.ToolCalls {
			id := c.ID
			if id == "" {
				id = fmt.Sprintf("call_%d", i)
			}
			calls = append(calls, map[string]any{"id": id, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
		}
		msg["tool_calls"] = calls
		finish = "tool_calls"
	}
	completion := len(res.Text)/4 + 1
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-test", "object": "chat.completion", "created": 1, "model": wr.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage": map[string]any{"prompt_tokens": promptTokens, "completion_tokens": completion, "total_tokens": promptTokens + completion,
			"prompt_tokens_details": map[string]any{"cached_tokens": cached}},
	})
}

// decode turns a wire request back into an llm.Request: the first system
// message is System, a system message after the transcript is Context.
func decode(wr wireRequest) (llm.Request, error) {
	var req llm.Request
	for i, raw := range wr.Messages {
		var m wireMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return req, fmt.Errorf("message %d: %w", i, err)
		}
		text := content(m.Content)
		switch {
		case m.Role == "system" && i == 0:
			req.System = text
		case m.Role == "system":
			req.Context = text
		case m.Role == "tool":
			req.Messages = append(req.Messages, llm.ToolResultMessage(m.ToolCallID, text))
		default:
			msg := llm.Message{Role: llm.Role(m.Role), Content: text}
			for _, c := range m.ToolCalls {
				msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
			}
			req.Messages = append(req.Messages, msg)
		}
	}
	for _, raw := range wr.Tools {
		var t struct {
			Function llm.ToolDefinition `json:"function"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return req, err
		}
		req.Tools = append(req.Tools, t.Function)
	}
	return req, nil
}

// content reads a message's content: a string, or text parts.
func content(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}
