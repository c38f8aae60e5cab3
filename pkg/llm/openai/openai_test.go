package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	oai "github.com/openai/openai-go/v3"

	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/openai"
)

var update = flag.Bool("update", false, "rewrite golden request files under testdata/")

// reply is one scripted HTTP answer of the fake Chat Completions server.
type reply struct {
	status int
	header map[string]string
	file   string // a whole completion or error body from testdata/
	// whole serves file as one JSON completion, as a server that ignores
	// "stream" does; otherwise a 200 file is streamed as SSE chunks.
	whole bool
	// breakAfter > 0 streams that many chunks, then breaks the stream the
	// way brk says.
	breakAfter int
	brk        string // "drop": close the connection; "event": an error event; "end": end cleanly
}

// chatServer is an in-process server speaking the Chat Completions wire
// format: it answers POST /v1/chat/completions with the scripted replies in
// order (the last one repeats) and records every request body. A 200 reply
// is streamed as text/event-stream, "data: {chunk}" lines ending with
// "data: [DONE]", unless it is marked whole.
type chatServer struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	replies []reply
	bodies  [][]byte
	auth    []string
	// answer, when set, picks the reply for a request body instead of the script.
	answer func(body []byte) reply
}

func newChatServer(t *testing.T, replies ...reply) *chatServer {
	t.Helper()
	s := &chatServer{t: t, replies: replies}
	s.srv = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *chatServer) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		return
	}
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.bodies)
	s.bodies = append(s.bodies, body)
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	var rep reply
	if s.answer != nil {
		rep = s.answer(body)
	} else {
		rep = s.replies[min(n, len(s.replies)-1)]
	}
	s.mu.Unlock()
	data, err := os.ReadFile(filepath.Join("testdata", rep.file))
	if err != nil {
		s.t.Errorf("read reply %s: %v", rep.file, err)
	}
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	if rep.status != http.StatusOK || rep.whole {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rep.status)
		_, _ = w.Write(data)
		return
	}
	chunks, err := streamChunks(data, 4)
	if err != nil {
		s.t.Errorf("stream %s: %v", rep.file, err)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	for i, c := range chunks {
		if rep.breakAfter > 0 && i == rep.breakAfter {
			switch rep.brk {
			case "drop":
				flusher.Flush()
				panic(http.ErrAbortHandler) // the client sees the connection drop
			case "event":
				_, _ = io.WriteString(w, "data: {\"error\":{\"message\":\"upstream overloaded\",\"type\":\"server_error\"}}\n\n")
			}
			return
		}
		_, _ = fmt.Fprintf(w, "data: %s\n\n", c)
		flusher.Flush()
	}
	_, _ = io.WriteString(w, "data: [DONE]\n\n")
}

func (s *chatServer) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

func (s *chatServer) body(i int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bodies[i]
}

func (s *chatServer) provider(cfg openai.Config) *openai.Provider {
	cfg.BaseURL = s.srv.URL + "/v1"
	if cfg.Model == "" {
		cfg.Model = "gpt-test"
	}
	cfg.BackoffBase = time.Millisecond
	cfg.HTTPClient = s.srv.Client()
	return openai.New(cfg)
}

// streamChunks turns a whole completion body into the chunks a streaming
// endpoint sends for it, as OpenAI sends them: a role chunk, the content in
// pieces of piece bytes at most, each tool call's id, type and name with
// its first piece of arguments and then the rest by index, a chunk with the
// finish reason, and the usage in a last chunk without choices.
func streamChunks(body []byte, piece int) ([][]byte, error) {
	var c oai.ChatCompletion
	if err := c.UnmarshalJSON(body); err != nil {
		return nil, err
	}
	if len(c.Choices) == 0 {
		return nil, errors.New("no choices")
	}
	chunk := func(choices []any, usage any) []byte {
		m := map[string]any{"id": c.ID, "object": "chat.completion.chunk", "created": c.Created, "model": c.Model, "choices": choices}
		if usage != nil {
			m["usage"] = usage
		}
		b, err := json.Marshal(m)
		if err != nil {
			panic(err)
		}
		return b
	}
	delta := func(d map[string]any, finish any) []any {
		return []any{map[string]any{"index": 0, "delta": d, "finish_reason": finish, "logprobs": nil}}
	}
	msg := c.Choices[0].Message
	out := [][]byte{chunk(delta(map[string]any{"role": "assistant", "content": ""}, nil), nil)}
	for _, p := range pieces(msg.Content, piece) {
		out = append(out, chunk(delta(map[string]any{"content": p}, nil), nil))
	}
	for i, tc := range msg.ToolCalls {
		name, args := tc.Function.Name, tc.Function.Arguments
		if tc.Type != "" && tc.Type != "function" {
			name, args = tc.Custom.Name, tc.Custom.Input
		}
		first, rest := "", pieces(args, piece)
		if len(rest) > 0 {
			first, rest = rest[0], rest[1:]
		}
		out = append(out, chunk(delta(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": tc.ID, "type": tc.Type, "function": map[string]any{"name": name, "arguments": first},
		}}}, nil), nil))
		for _, p := range rest {
			out = append(out, chunk(delta(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "function": map[string]any{"arguments": p},
			}}}, nil), nil))
		}
	}
	finish := c.Choices[0].FinishReason
	if finish == "" {
		finish = "stop"
	}
	out = append(out, chunk(delta(map[string]any{}, finish), nil))
	if raw := c.Usage.RawJSON(); c.JSON.Usage.Valid() && json.Valid([]byte(raw)) {
		out = append(out, chunk([]any{}, json.RawMessage(raw)))
	}
	return out, nil
}

// pieces cuts s into parts of at most n bytes, on rune boundaries.
func pieces(s string, n int) []string {
	var out []string
	for s != "" {
		i := min(n, len(s))
		for i < len(s) && !utf8.RuneStart(s[i]) {
			i++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// transcriptRequest is the docs/design.md §2 example mid-way: the user's request, the
// SVG call and its compact result (docs/design.md §3.5), ready for the PNG step; the
// artifact catalog is the per-call Context (issue 18).
func transcriptRequest() llm.Request {
	return llm.Request{
		Flavour:  llm.Medium,
		System:   "You are the client agent.",
		Context:  "Artifacts:\n- artifact_id: a1 (image/svg+xml)",
		CacheKey: "conv-7f3a",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "Create a PNG image with the word Popelnase"},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
				{ID: "call_1", Name: "create_svg_artifact", Arguments: `{"word":"Popelnase"}`},
			}},
			llm.ToolResultMessage("call_1", `{"status":"succeeded","summary":"SVG created","artifacts":[{"artifact_id":"a1","mime_type":"image/svg+xml"}]}`),
		},
		Tools: []llm.ToolDefinition{
			{Name: "create_svg_artifact", Description: "Render a word as SVG.", Parameters: json.RawMessage(`{"type":"object","properties":{"word":{"type":"string"}},"required":["word"]}`)},
			{Name: "convert_svg_to_png", Description: "Convert an SVG artifact to PNG.", Parameters: json.RawMessage(`{"type":"object","properties":{"artifact_id":{"type":"string","description":"artifact_id of an existing conversation artifact"}},"required":["artifact_id"]}`)},
		},
	}
}

// textRecorder records what a request's OnText and OnReset saw.
type textRecorder struct {
	mu     sync.Mutex
	deltas []string
	resets int
}

func (r *textRecorder) attach(req *llm.Request) {
	req.OnText = func(d string) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.deltas = append(r.deltas, d)
	}
	req.OnReset = func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.resets++
		r.deltas = nil
	}
}

func (r *textRecorder) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.deltas, "")
}

// issue 15: the text streams in as deltas, unbatched, and the response is
// what the whole completion says.
func TestCompleteText(t *testing.T) {
	t.Parallel()
	s := newChatServer(t, reply{status: 200, file: "response_text.json"})
	p := s.provider(openai.Config{APIKey: "sk-test"})
	req := transcriptRequest()
	var rec textRecorder
	rec.attach(&req)

	got, err := p.Complete(t.Context(), req)
	if err != nil {
		t.Fatalf("Complete() error = %v", err)
	}
	want := &llm.Response{
		Text:  "Here is the PNG image with the word Popelnase.",
		Usage: llm.Usage{InputTokens: 812, OutputTokens: 14},
		Model: "gpt-test",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Complete() mismatch (-want +got):\n%s", diff)
	}
	if rec.text() != want.Text || len(rec.deltas) < 2 || rec.resets != 0 {
		t.Errorf("OnText saw %q in %d deltas with %d resets, want the text in several deltas and no reset", rec.deltas, len(rec.deltas), rec.resets)
	}
	if s.auth[0] != "Bearer sk-test" {
		t.Errorf("Authorization = %q, want bearer key", s.auth[0])
	}
}

// TestRequestGolden checks the body the server sees (docs/design.md §3.6, issue 18):
// system rules first, assistant message with tool_calls, tool message with
// tool_call_id, the Context as the last (system) message, function tools
// with JSON schema and tool_choice "auto", prompt_cache_key, and a streamed
// call with usage.
func TestRequestGolden(t *testing.T) {
	t.Parallel()
	s := newChatServer(t, reply{status: 200, file: "response_text.json"})
	p := s.provider(openai.Config{})
	if _, err := p.Complete(t.Context(), transcriptRequest()); err != nil {
		t.Fatalf("Complete() error = %v", err)
	}
	assertGoldenJSON(t, "request_transcript.golden.json", s.bodies[0])
}

// issue 18: the start of the request is a cacheable prefix: the same
// request gives the same bytes, and the next call of the conversation (its
// transcript grown, another Context) starts with the previous call's bytes
// up to where its Context was.
func TestRequestIsACacheablePrefix(t *testing.T) {
	t.Parallel()
	s := newChatServer(t, reply{status: 200, file: "response_cached.json"})
	p := s.provider(openai.Config{})
	first := transcriptRequest()
	next := transcriptRequest()
	next.Messages = append(next.Messages,
		llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "call_2", Name: "convert_svg_to_png", Arguments: `{"artifact_id":"a1"}`}}},
		llm.ToolResultMessage("call_2", `{"status":"succeeded","artifacts":[{"artifact_id":"a2","mime_type":"image/png"}]}`))
	next.Context = "Artifacts:\n- artifact_id: a1 (image/svg+xml)\n- artifact_id: a2 (image/png)"
	for _, req := range []llm.Request{first, first, next} {
		got, err := p.Complete(t.Context(), req)
		if err != nil {
			t.Fatalf("Complete() error = %v", err)
		}
		want := llm.Usage{InputTokens: 2400, OutputTokens: 9, CachedInputTokens: 2048}
		if got.Usage != want {
			t.Errorf("Complete() usage = %+v, want %+v (cached_tokens recorded)", got.Usage, want)
		}
	}
	if !bytes.Equal(s.body(0), s.body(1)) {
		t.Errorf("the same request gave different bodies:\n%s\n%s", s.body(0), s.body(1))
	}
	var body struct {
		Messages       []map[string]any `json:"messages"`
		PromptCacheKey string           `json:"prompt_cache_key"`
	}
	if err := json.Unmarshal(s.body(2), &body); err != nil {
		t.Fatal(err)
	}
	if body.PromptCacheKey != "conv-7f3a" {
		t.Errorf("prompt_cache_key = %q, want the conversation id", body.PromptCacheKey)
	}
	last := body.Messages[len(body.Messages)-1]
	if last["role"] != "system" || last["content"] != next.Context {
		t.Errorf("last message = %v, want the Context as a system message", last)
	}
	// Messages are compared as JSON values: the prefix the cache sees is
	// the same messages in the same order.
	var firstBody struct {
		Messages []map[string]any `json:"messages"`
	}
	_ = json.Unmarshal(s.body(0), &firstBody)
	stable := firstBody.Messages[:len(firstBody.Messages)-1]
	if diff := cmp.Diff(stable, body.Messages[:len(stable)]); diff != "" {
		t.Errorf("the next call does not start with the previous one's messages (-prev +next):\n%s", diff)
	}
}

// issue 18: prompt_cache_key is sent "where the endpoint accepts it": an
// endpoint that refuses it is asked again without it, once, and this
// Provider never sends it there again.
func TestPromptCacheKeyRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		refusal reply
	}{
		{name: "OpenAI-shaped 400", refusal: reply{status: 400, file: "response_error_cache_key.json"}},
		{name: "unwrapped 400 (vLLM)", refusal: reply{status: 400, file: "response_error_cache_key_vllm.json"}},
		{name: "422 with details (FastAPI)", refusal: reply{status: 422, file: "response_error_cache_key_422.json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newChatServer(t)
			s.answer = func(body []byte) reply {
				if bytes.Contains(body, []byte(`"prompt_cache_key"`)) {
					return tt.refusal
				}
				return reply{status: 200, file: "response_text.json"}
			}
			p := s.provider(openai.Config{})
			for i := range 2 {
				if _, err := p.Complete(t.Context(), transcriptRequest()); err != nil {
					t.Fatalf("Complete() #%d error = %v", i+1, err)
				}
			}
			if n := s.requests(); n != 3 {
				t.Fatalf("server saw %d requests, want 3 (refused, again without the key, the next call without it)", n)
			}
			for i, want := range []bool{true, false, false} {
				if got := bytes.Contains(s.body(i), []byte(`"prompt_cache_key"`)); got != want {
					t.Errorf("request %d has prompt_cache_key = %v, want %v", i+1, got, want)
				}
			}
		})
	}
}

// Another 400 is final at once, with or without a cache key.
func TestOtherBadRequestIsFinalWithCacheKey(t *testing.T) {
	t.Parallel()
	s := newChatServer(t, reply{status: 400, file: "response_error_400.json"})
	_, err := s.provider(openai.Config{}).Complete(t.Context(), transcriptRequest())
	if err == nil || !strings.Contains(err.Error(), "Invalid schema") {
		t.Fatalf("Complete() error = %v, want the provider's message", err)
	}
	if n := s.requests(); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

func TestRequestWithoutToolsHasNoToolChoice(t *testing.T) {
	t.Parallel()
	s := newChatServer(t, reply{status: 200, file: "response_text.json"})
	p := s.provider(openai.Config{Model: "default", FlavourModels: map[llm.Flavour]string{llm.Small: "tiny"}})
	req := llm.Request{Flavour: llm.Small, Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
	if _, err := p.Complete(t.Context(), req); err != nil {
		t.Fatalf("Complete() error = %v", err)
	}
	var body map[string]any
	if err := json.Unmarshal(s.bodies[0], &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"model":          "tiny",
		"messages":       []any{map[string]any{"role": "user", "content": "hi"}},
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
	}
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("request body mismatch (-want +got):\n%s", diff)
	}
	if s.auth[0] != "" {
		t.Errorf("Authorization = %q, want none without an API key", s.auth[0])
	}
}

// Tool-call arguments arrive spread over many chunks, the id and name in
// the first only; streamed or whole, the answer is the same.
func TestCompleteToolCalls(t *testing.T) {
	t.Parallel()
	want := &llm.Response{
		ToolCalls: []llm.ToolCall{
			{ID: "call_a", Name: "create_svg_artifact", Arguments: `{"word":"Alpha"}`},
			{ID: "call_b", Name: "create_svg_artifact", Arguments: `{"word":"Beta"}`},
			{ID: "call_c", Name: "design_valve_flange", Arguments: `{"holes":6,"outer_diameter_mm":120}`},
		},
		Usage: llm.Usage{InputTokens: 1200, OutputTokens: 61},
		Model: "gpt-test",
	}
	for _, whole := range []bool{false, true} {
		s := newChatServer(t, reply{status: 200, file: "response_tool_calls.json", whole: whole})
		got, err := s.provider(openai.Config{}).Complete(t.Context(), transcriptRequest())
		if err != nil {
			t.Fatalf("Complete() (whole %v) error = %v", whole, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Complete() (whole %v) mismatch (-want +got):\n%s", whole, diff)
		}
	}
}

// A server that ignores "stream" and answers one JSON completion is read
// as such, and OnText gets the whole text once.
func TestCompleteWholeAnswer(t *testing.T) {
	t.Parallel()
	s := newChatServer(t, reply{status: 200, file: "response_text.json", whole: true})
	req := transcriptRequest()
	var rec textRecorder
	rec.attach(&req)
	got, err := s.provider(openai.Config{}).Complete(t.Context(), req)
	if err != nil {
		t.Fatalf("Complete() error = %v", err)
	}
	if want := "Here is the PNG image with the word Popelnase."; got.Text != want || len(rec.deltas) != 1 || rec.deltas[0] != want {
		t.Errorf("Complete() text %q, OnText saw %q, want %q once", got.Text, rec.deltas, want)
	}
}

// docs/design.md §3.6: arguments_error is set on malformed JSON, and the call is still returned.
func TestCompleteMalformedArguments(t *testing.T) {
	t.Parallel()
	s := newChatServer(t, reply{status: 200, file: "response_bad_arguments.json"})
	got, err := s.provider(openai.Config{}).Complete(t.Context(), transcriptRequest())
	if err != nil {
		t.Fatalf("Complete() error = %v", err)
	}
	type callState struct {
		ID, Name, Arguments string
		HasError            bool
	}
	var gotStates []callState
	for _, c := range got.ToolCalls {
		gotStates = append(gotStates, callState{c.ID, c.Name, c.Arguments, c.ArgumentsError != ""})
	}
	want := []callState{
		{"call_trunc", "design_valve_flange", `{"holes": 6, "outer_diam`, true},
		{"call_array", "create_svg_artifact", `["Alpha"]`, true},
		{"call_empty", "list_things", `{}`, false},
		{"call_ok", "create_svg_artifact", `{"word":"Gamma"}`, false},
	}
	if diff := cmp.Diff(want, gotStates); diff != "" {
		t.Errorf("Complete() tool calls mismatch (-want +got):\n%s", diff)
	}
	if !strings.Contains(got.ToolCalls[0].ArgumentsError, "not a valid JSON object") {
		t.Errorf("ArgumentsError = %q, want a JSON parse explanation", got.ToolCalls[0].ArgumentsError)
	}
}

// issue 15: a stream broken midway is retried like a transport error; the
// text already given is reset, and the answer is the retry's, whole.
func TestStreamBrokenMidwayIsRetried(t *testing.T) {
	t.Parallel()
	for _, brk := range []string{"drop", "event", "end"} {
		t.Run(brk, func(t *testing.T) {
			t.Parallel()
			s := newChatServer(t,
				reply{status: 200, file: "response_text.json", breakAfter: 4, brk: brk},
				reply{status: 200, file: "response_text.json"},
			)
			req := transcriptRequest()
			var rec textRecorder
			rec.attach(&req)
			got, err := s.provider(openai.Config{}).Complete(t.Context(), req)
			if err != nil {
				t.Fatalf("Complete() error = %v", err)
			}
			want := &llm.Response{
				Text:  "Here is the PNG image with the word Popelnase.",
				Usage: llm.Usage{InputTokens: 812, OutputTokens: 14},
				Model: "gpt-test",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Complete() mismatch (-want +got):\n%s", diff)
			}
			if n := s.requests(); n != 2 {
				t.Errorf("server saw %d requests, want 2", n)
			}
			if rec.resets != 1 {
				t.Errorf("OnReset called %d times, want 1", rec.resets)
			}
			if rec.text() != want.Text {
				t.Errorf("OnText since the reset = %q, want %q", rec.text(), want.Text)
			}
		})
	}
}

// A stream that keeps breaking ends as ErrUnavailable after the attempts.
func TestStreamBrokenExhausted(t *testing.T) {
	t.Parallel()
	s := newChatServer(t, reply{status: 200, file: "response_tool_calls.json", breakAfter: 3, brk: "drop"})
	req := transcriptRequest()
	var rec textRecorder
	rec.attach(&req)
	_, err := s.provider(openai.Config{MaxAttempts: 2}).Complete(t.Context(), req)
	if !errors.Is(err, llm.ErrUnavailable) || !strings.Contains(err.Error(), "stream cut after 3 chunks") {
		t.Errorf("Complete() error = %v, want ErrUnavailable naming the cut stream", err)
	}
	if n := s.requests(); n != 2 {
		t.Errorf("server saw %d requests, want 2", n)
	}
	if rec.resets != 0 {
		t.Errorf("OnReset called %d times, want 0: no text was given", rec.resets)
	}
}

func TestRetry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		replies      []reply
		maxAttempts  int
		wantRequests int
		wantErr      error  // nil: success
		wantErrText  string // substring of the error
	}{
		{
			name: "429 then success honours Retry-After",
			replies: []reply{
				{status: 429, header: map[string]string{"Retry-After": "0"}, file: "response_error_429.json"},
				{status: 200, file: "response_text.json"},
			},
			wantRequests: 2,
		},
		{
			name: "503 then success",
			replies: []reply{
				{status: 503, file: "response_error_503.json"},
				{status: 200, file: "response_text.json"},
			},
			wantRequests: 2,
		},
		{
			name:         "5xx exhausted is ErrUnavailable",
			replies:      []reply{{status: 500, file: "response_error_503.json"}},
			wantRequests: openai.DefaultMaxAttempts,
			wantErr:      llm.ErrUnavailable,
			wantErrText:  "The server is overloaded.",
		},
		{
			name:         "429 exhausted is ErrRateLimited",
			replies:      []reply{{status: 429, header: map[string]string{"Retry-After-Ms": "1"}, file: "response_error_429.json"}},
			maxAttempts:  2,
			wantRequests: 2,
			wantErr:      llm.ErrRateLimited,
			wantErrText:  "Rate limit reached",
		},
		{
			name:         "400 is final at once with the provider message",
			replies:      []reply{{status: 400, file: "response_error_400.json"}},
			wantRequests: 1,
			wantErrText:  "HTTP 400: Invalid schema for function 'create_svg_artifact'",
		},
		{
			name:         "unwrapped error body (vLLM): its message is shown",
			replies:      []reply{{status: 400, file: "response_error_400_unwrapped.json"}},
			wantRequests: 1,
			wantErrText:  "HTTP 400: This model's maximum context length is 8192 tokens.",
		},
		{
			name:         "401 is final at once",
			replies:      []reply{{status: 401, file: "response_error_400.json"}},
			wantRequests: 1,
			wantErrText:  "HTTP 401",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newChatServer(t, tt.replies...)
			p := s.provider(openai.Config{APIKey: "sk-secret-key", MaxAttempts: tt.maxAttempts})
			got, err := p.Complete(t.Context(), transcriptRequest())
			if n := s.requests(); n != tt.wantRequests {
				t.Errorf("server saw %d requests, want %d", n, tt.wantRequests)
			}
			if tt.wantErrText == "" {
				if err != nil {
					t.Fatalf("Complete() error = %v, want success", err)
				}
				if got.Text == "" {
					t.Errorf("Complete() text empty after retry")
				}
				return
			}
			if err == nil {
				t.Fatalf("Complete() = %+v, want error", got)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Complete() error = %v, want wrapping %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && (errors.Is(err, llm.ErrUnavailable) || errors.Is(err, llm.ErrRateLimited)) {
				t.Errorf("Complete() error = %v, want a final (non-transient) error", err)
			}
			if !strings.Contains(err.Error(), tt.wantErrText) {
				t.Errorf("Complete() error = %q, want it to contain %q", err, tt.wantErrText)
			}
			if strings.Contains(err.Error(), "sk-secret-key") {
				t.Errorf("Complete() error leaks the API key: %q", err)
			}
		})
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	s := newChatServer(t,
		reply{status: 429, header: map[string]string{"Retry-After": "0.3"}, file: "response_error_429.json"},
		reply{status: 200, file: "response_text.json"},
	)
	p := s.provider(openai.Config{})
	start := time.Now()
	if _, err := p.Complete(t.Context(), transcriptRequest()); err != nil {
		t.Fatalf("Complete() error = %v", err)
	}
	// The backoff base is 1ms, so only Retry-After explains a 300ms wait.
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("Complete() returned after %v, want at least the Retry-After of 300ms", d)
	}
}

func TestTransportErrorExhausted(t *testing.T) {
	t.Parallel()
	// A listener that is closed at once: every connection is refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := openai.New(openai.Config{BaseURL: "http://" + addr + "/v1", Model: "m", MaxAttempts: 2, BackoffBase: time.Millisecond})
	_, err = p.Complete(t.Context(), transcriptRequest())
	if !errors.Is(err, llm.ErrUnavailable) {
		t.Errorf("Complete() error = %v, want wrapping ErrUnavailable", err)
	}
}

func TestAttemptTimeoutIsRetried(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := 0
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			// Hang past the attempt timeout; released when the test ends
			// because a kept-alive connection may not report the client's cancel.
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		data, _ := os.ReadFile("testdata/response_text.json")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	// The second attempt has the same timeout on a new connection: a
	// second, not 100 ms, so a loaded machine does not time it out too
	// (issue 31).
	p := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m", Timeout: time.Second, BackoffBase: time.Millisecond})
	if _, err := p.Complete(t.Context(), transcriptRequest()); err != nil {
		t.Fatalf("Complete() error = %v, want success on the second attempt", err)
	}
}

func TestCallerDeadlineStopsRetries(t *testing.T) {
	t.Parallel()
	// A retry would wait a minute; the caller's 100 ms deadline ends the
	// call long before. The bound is generous for a loaded machine and
	// far below the minute (issue 31: a 10 s wait against a 2 s bound).
	s := newChatServer(t, reply{status: 429, header: map[string]string{"Retry-After": "60"}, file: "response_error_429.json"})
	p := s.provider(openai.Config{MaxBackoff: time.Minute})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Complete(ctx, transcriptRequest())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Complete() error = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("Complete() took %v, want it to stop at the caller's deadline", d)
	}
	if n := s.requests(); n != 1 {
		t.Errorf("server saw %d requests, want 1", n)
	}
}

func TestBadToolSchemaIsRejectedBeforeSending(t *testing.T) {
	t.Parallel()
	s := newChatServer(t, reply{status: 200, file: "response_text.json"})
	req := transcriptRequest()
	req.Tools[0].Parameters = json.RawMessage(`"not an object"`)
	if _, err := s.provider(openai.Config{}).Complete(t.Context(), req); err == nil {
		t.Errorf("Complete() error = nil, want a schema error")
	}
	if n := s.requests(); n != 0 {
		t.Errorf("server saw %d requests, want 0", n)
	}
}

// assertGoldenJSON compares got with testdata/name as JSON values, so key
// order and whitespace do not matter.
func assertGoldenJSON(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	var gotV any
	if err := json.Unmarshal(got, &gotV); err != nil {
		t.Fatalf("request body is not JSON: %v\n%s", err, got)
	}
	if *update {
		out, _ := json.MarshalIndent(gotV, "", "  ")
		if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden %s: %v (run with -update to create it)", path, err)
	}
	var wantV any
	if err := json.Unmarshal(data, &wantV); err != nil {
		t.Fatalf("golden %s is not JSON: %v", path, err)
	}
	if diff := cmp.Diff(wantV, gotV); diff != "" {
		t.Errorf("request body mismatch with %s (-want +got):\n%s", path, diff)
	}
}
