package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
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

	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/openai"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden request files under testdata/")

// reply is one scripted HTTP answer of the fake Chat Completions server.
type reply struct {
	status int
	header map[string]string
	file   string // body from testdata/
}

// chatServer is an in-process server speaking the Chat Completions wire
// format: it answers POST /v1/chat/completions with the scripted replies in
// order (the last one repeats) and records every request body.
type chatServer struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	replies []reply
	bodies  [][]byte
	auth    []string
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
	rep := s.replies[min(n, len(s.replies)-1)]
	s.mu.Unlock()
	data, err := os.ReadFile(filepath.Join("testdata", rep.file))
	if err != nil {
		s.t.Errorf("read reply %s: %v", rep.file, err)
	}
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.status)
	_, _ = w.Write(data)
}

func (s *chatServer) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
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

// transcriptRequest is the spec §2 example mid-way: the user's request, the
// SVG call and its compact result (spec §3.5), ready for the PNG step.
func transcriptRequest() llm.Request {
	return llm.Request{
		Flavour: llm.Medium,
		System:  "You are the client agent.\nArtifacts:\n- artifact_id: a1 (image/svg+xml)",
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

func TestCompleteText(t *testing.T) {
	t.Parallel()
	s := newChatServer(t, reply{status: 200, file: "response_text.json"})
	p := s.provider(openai.Config{APIKey: "sk-test"})

	got, err := p.Complete(t.Context(), transcriptRequest())
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
	if s.auth[0] != "Bearer sk-test" {
		t.Errorf("Authorization = %q, want bearer key", s.auth[0])
	}
}

// TestRequestGolden checks the body the server sees (spec §3.6): system
// message first, assistant message with tool_calls, tool message with
// tool_call_id, function tools with JSON schema and tool_choice "auto".
func TestRequestGolden(t *testing.T) {
	t.Parallel()
	s := newChatServer(t, reply{status: 200, file: "response_text.json"})
	p := s.provider(openai.Config{})
	if _, err := p.Complete(t.Context(), transcriptRequest()); err != nil {
		t.Fatalf("Complete() error = %v", err)
	}
	assertGoldenJSON(t, "request_transcript.golden.json", s.bodies[0])
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
		"model":    "tiny",
		"messages": []any{map[string]any{"role": "user", "content": "hi"}},
	}
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("request body mismatch (-want +got):\n%s", diff)
	}
	if s.auth[0] != "" {
		t.Errorf("Authorization = %q, want none without an API key", s.auth[0])
	}
}

func TestCompleteToolCalls(t *testing.T) {
	t.Parallel()
	s := newChatServer(t, reply{status: 200, file: "response_tool_calls.json"})
	got, err := s.provider(openai.Config{}).Complete(t.Context(), transcriptRequest())
	if err != nil {
		t.Fatalf("Complete() error = %v", err)
	}
	want := &llm.Response{
		ToolCalls: []llm.ToolCall{
			{ID: "call_a", Name: "create_svg_artifact", Arguments: `{"word":"Alpha"}`},
			{ID: "call_b", Name: "create_svg_artifact", Arguments: `{"word":"Beta"}`},
			{ID: "call_c", Name: "design_valve_flange", Arguments: `{"holes":6,"outer_diameter_mm":120}`},
		},
		Usage: llm.Usage{InputTokens: 1200, OutputTokens: 61},
		Model: "gpt-test",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Complete() mismatch (-want +got):\n%s", diff)
	}
}

// spec §3.6: arguments_error is set on malformed JSON, and the call is still returned.
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
	p := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m", Timeout: 100 * time.Millisecond, BackoffBase: time.Millisecond})
	if _, err := p.Complete(t.Context(), transcriptRequest()); err != nil {
		t.Fatalf("Complete() error = %v, want success on the second attempt", err)
	}
}

func TestCallerDeadlineStopsRetries(t *testing.T) {
	t.Parallel()
	s := newChatServer(t, reply{status: 429, header: map[string]string{"Retry-After": "10"}, file: "response_error_429.json"})
	p := s.provider(openai.Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Complete(ctx, transcriptRequest())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Complete() error = %v, want DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 2*time.Second {
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
