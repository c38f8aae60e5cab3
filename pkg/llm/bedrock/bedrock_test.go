package bedrock_test

import (
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/google/go-cmp/cmp"

	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/bedrock"
)

var update = flag.Bool("update", false, "rewrite golden request files under testdata/")

type reply struct {
	status  int
	errType string // X-Amzn-ErrorType for error replies
	body    string // literal body, or
	file    string // body from testdata/: a Converse answer, streamed for a 200
	// breakAfter > 0 streams that many events, then breaks the stream the
	// way brk says.
	breakAfter int
	brk        string // "drop": close the connection; "exception": a modelStreamErrorException; "validation": a validationException; "end": end before messageStop
}

// converseServer speaks the ConverseStream REST wire format (POST
// /model/{modelId}/converse-stream, a JSON body in; out, for a 200, an
// application/vnd.amazon.eventstream of binary frames) and records what it
// was sent.
type converseServer struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	replies []reply
	paths   []string
	bodies  [][]byte
	signed  []bool
}

func newConverseServer(t *testing.T, replies ...reply) *converseServer {
	s := &converseServer{t: t, replies: replies}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		n := len(s.bodies)
		s.bodies = append(s.bodies, body)
		s.paths = append(s.paths, r.Method+" "+r.URL.EscapedPath())
		s.signed = append(s.signed, strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKIDTEST/"))
		rep := s.replies[min(n, len(s.replies)-1)]
		s.mu.Unlock()
		data := []byte(rep.body)
		if rep.file != "" {
			var err error
			if data, err = os.ReadFile(filepath.Join("testdata", rep.file)); err != nil {
				t.Errorf("read %s: %v", rep.file, err)
			}
		}
		if rep.status != http.StatusOK {
			w.Header().Set("Content-Type", "application/json")
			if rep.errType != "" {
				w.Header().Set("X-Amzn-ErrorType", rep.errType)
			}
			w.WriteHeader(rep.status)
			_, _ = w.Write(data)
			return
		}
		// On loopback the answer can start before the client's request
		// writer has finished with the request, and the SDK then sees its
		// connection closed midway through the stream (the provider
		// retries, which would make the request counts here flaky). A
		// real endpoint is never that fast.
		time.Sleep(5 * time.Millisecond)
		events, err := streamOf(data)
		if err != nil {
			t.Errorf("stream %s: %v", rep.file, err)
		}
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		w.WriteHeader(http.StatusOK)
		enc := eventstream.NewEncoder()
		for i, ev := range events {
			if rep.breakAfter > 0 && i == rep.breakAfter {
				switch rep.brk {
				case "drop":
					w.(http.Flusher).Flush()
					panic(http.ErrAbortHandler) // the client sees the connection drop
				case "exception":
					writeFrame(t, enc, w, exception("modelStreamErrorException", "An error occurred while streaming the response. Retry your request."))
				case "validation":
					writeFrame(t, enc, w, exception("validationException", "The model returned the following errors: input is too long"))
				}
				return
			}
			writeFrame(t, enc, w, ev)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *converseServer) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.bodies)
}

// provider uses the package's Client pointed at the server, with static
// credentials and two attempts, so its retries before a stream starts are
// exercised. Zero fields of cfg get the test's model ids.
func (s *converseServer) provider(cfg bedrock.Config) *bedrock.Provider {
	client := bedrock.NewClient(aws.Config{
		Region:           "eu-central-1",
		BaseEndpoint:     aws.String(s.srv.URL),
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDTEST", "SECRETTEST", ""),
		HTTPClient:       s.srv.Client(),
		RetryMaxAttempts: 2,
	})
	if cfg.Model == "" {
		cfg.Model = "anthropic.claude-test-v1:0"
	}
	if cfg.FlavourModels == nil {
		cfg.FlavourModels = map[llm.Flavour]string{llm.Small: "amazon.nova-micro-v1:0"}
	}
	cfg.BackoffBase = time.Millisecond
	return bedrock.New(client, cfg)
}

// frame is one event stream message: an event or an exception.
type frame struct {
	messageType, eventType string // eventType is the :exception-type of an exception
	payload                any
}

func event(eventType string, payload any) frame { return frame{"event", eventType, payload} }

func exception(exceptionType, message string) frame {
	return frame{"exception", exceptionType, map[string]string{"message": message}}
}

// writeFrame writes f with the headers ConverseStream sends: :event-type
// (or :exception-type), :content-type and :message-type.
func writeFrame(t *testing.T, enc *eventstream.Encoder, w io.Writer, f frame) {
	payload, err := json.Marshal(f.payload)
	if err != nil {
		t.Errorf("frame payload: %v", err)
	}
	msg := eventstream.Message{Payload: payload}
	if f.messageType == "exception" {
		msg.Headers.Set(":exception-type", eventstream.StringValue(f.eventType))
	} else {
		msg.Headers.Set(":event-type", eventstream.StringValue(f.eventType))
	}
	msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	msg.Headers.Set(":message-type", eventstream.StringValue(f.messageType))
	if err := enc.Encode(w, msg); err != nil {
		t.Errorf("encode frame: %v", err)
	}
}

// streamOf turns a whole Converse answer into the events ConverseStream
// sends for it: messageStart; per block, text in deltas of at most 8 bytes,
// or a tool use's contentBlockStart (id, name) and its input JSON text in
// deltas of 8 bytes; contentBlockStop; messageStop; metadata with the usage.
func streamOf(body []byte) ([]frame, error) {
	var answer struct {
		Output struct {
			Message struct {
				Content []struct {
					Text    *string `json:"text"`
					ToolUse *struct {
						ID    string          `json:"toolUseId"`
						Name  string          `json:"name"`
						Input json.RawMessage `json:"input"`
					} `json:"toolUse"`
				} `json:"content"`
			} `json:"message"`
		} `json:"output"`
		StopReason string          `json:"stopReason"`
		Usage      json.RawMessage `json:"usage"`
		Metrics    json.RawMessage `json:"metrics"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return nil, err
	}
	pieces := func(s string) []string {
		var out []string
		for s != "" {
			k := min(8, len(s))
			out = append(out, s[:k])
			s = s[k:]
		}
		return out
	}
	events := []frame{event("messageStart", map[string]any{"role": "assistant"})}
	for i, c := range answer.Output.Message.Content {
		switch {
		case c.Text != nil:
			for _, p := range pieces(*c.Text) {
				events = append(events, event("contentBlockDelta", map[string]any{"contentBlockIndex": i, "delta": map[string]any{"text": p}}))
			}
		case c.ToolUse != nil:
			events = append(events, event("contentBlockStart", map[string]any{"contentBlockIndex": i, "start": map[string]any{"toolUse": map[string]any{"toolUseId": c.ToolUse.ID, "name": c.ToolUse.Name}}}))
			for _, p := range pieces(string(c.ToolUse.Input)) {
				events = append(events, event("contentBlockDelta", map[string]any{"contentBlockIndex": i, "delta": map[string]any{"toolUse": map[string]any{"input": p}}}))
			}
		}
		events = append(events, event("contentBlockStop", map[string]any{"contentBlockIndex": i}))
	}
	return append(events,
		event("messageStop", map[string]any{"stopReason": answer.StopReason}),
		event("metadata", map[string]any{"usage": answer.Usage, "metrics": answer.Metrics}),
	), nil
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

// transcript is the docs/design.md §2 example after a parallel batch of two calls,
// then a follow-up user message.
func transcript() llm.Request {
	return llm.Request{
		Flavour: llm.Medium,
		System:  "You are the client agent.",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "svg Alpha and Beta"},
			{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
				{ID: "tooluse_a", Name: "create_svg_artifact", Arguments: `{"word":"Alpha"}`},
				{ID: "tooluse_b", Name: "create_svg_artifact", Arguments: `{"word":"Be`},
			}},
			llm.ToolResultMessage("tooluse_a", `{"status":"succeeded","artifacts":[{"artifact_id":"a1","mime_type":"image/svg+xml"}]}`),
			llm.ToolResultMessage("tooluse_b", `{"status":"failed","error":"malformed JSON arguments"}`),
			{Role: llm.RoleAssistant, Content: "One picture failed."},
			{Role: llm.RoleUser, Content: "Convert a1 to PNG"},
		},
		Tools: []llm.ToolDefinition{
			{Name: "create_svg_artifact", Description: "Render a word as SVG.", Parameters: json.RawMessage(`{"type":"object","properties":{"word":{"type":"string"}},"required":["word"]}`)},
			{Name: "convert_svg_to_png", Parameters: json.RawMessage(`{"type":"object","properties":{"artifact_id":{"type":"string"}},"required":["artifact_id"]}`)},
		},
	}
}

// issue 15: text streams in as deltas; tool uses are assembled from their
// start and their input deltas.
func TestCompleteToolUse(t *testing.T) {
	t.Parallel()
	s := newConverseServer(t, reply{status: 200, file: "converse_tool_use.json"})
	req := transcript()
	var rec textRecorder
	rec.attach(&req)
	got, err := s.provider(bedrock.Config{}).Complete(t.Context(), req)
	if err != nil {
		t.Fatalf("Complete() error = %v", err)
	}
	want := &llm.Response{
		Text: "I will convert the SVG.",
		ToolCalls: []llm.ToolCall{
			{ID: "tooluse_1", Name: "convert_svg_to_png", Arguments: `{"artifact_id":"a1"}`},
			{ID: "tooluse_2", Name: "create_svg_artifact", Arguments: `{"word":"Beta"}`},
		},
		Usage: llm.Usage{InputTokens: 950, OutputTokens: 42},
		Model: "anthropic.claude-test-v1:0",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Complete() mismatch (-want +got):\n%s", diff)
	}
	if rec.text() != want.Text || len(rec.deltas) < 2 {
		t.Errorf("OnText saw %q, want the text in several deltas", rec.deltas)
	}
	if want := "POST /model/anthropic.claude-test-v1%3A0/converse-stream"; s.paths[0] != want {
		t.Errorf("request = %q, want %q", s.paths[0], want)
	}
	if !s.signed[0] {
		t.Errorf("request was not SigV4-signed with the static credentials")
	}
}

// TestRequestGolden pins the ConverseStream body for a model without prompt
// caching: toolSpec/inputSchema.json, auto tool choice, toolUse blocks,
// both results of one batch in ONE user message (Converse requires
// alternating roles), and no cache point.
func TestRequestGolden(t *testing.T) {
	t.Parallel()
	s := newConverseServer(t, reply{status: 200, file: "converse_text.json"})
	got, err := s.provider(bedrock.Config{}).Complete(t.Context(), transcript())
	if err != nil {
		t.Fatalf("Complete() error = %v", err)
	}
	if got.Text != "Here is the PNG image with the word Popelnase." || got.Usage.InputTokens != 1100 {
		t.Errorf("Complete() = %+v, want the text answer and its usage", got)
	}
	assertGoldenJSON(t, "converse_request.golden.json", s.bodies[0])
}

// issue 18: with prompt caching, cache points close the tools, the system
// rules and the transcript; the Context comes after the last one, closing
// the last user message.
func TestRequestGoldenPromptCache(t *testing.T) {
	t.Parallel()
	s := newConverseServer(t, reply{status: 200, file: "converse_cached.json"})
	req := transcript()
	req.Context = "Artifacts:\n- artifact_id: a1 (image/svg+xml)"
	got, err := s.provider(bedrock.Config{Model: "eu.anthropic.claude-sonnet-4-20250514-v1:0"}).Complete(t.Context(), req)
	if err != nil {
		t.Fatalf("Complete() error = %v", err)
	}
	// inputTokens leaves out the cache reads and writes; llm.Usage counts them.
	wantUsage := llm.Usage{InputTokens: 310 + 1800 + 248, OutputTokens: 9, CachedInputTokens: 1800, CacheWriteTokens: 248}
	if got.Usage != wantUsage {
		t.Errorf("Complete() usage = %+v, want %+v", got.Usage, wantUsage)
	}
	assertGoldenJSON(t, "converse_request_cached.golden.json", s.bodies[0])
}

// cacheLayout is where a ConverseStream body has its cache points and its
// Context, read from the wire.
type cacheLayout struct {
	Points           int  // cache points in all
	AfterTools       bool // the last tool is a cache point
	AfterSystem      bool // the last system block is a cache point
	BeforeContext    bool // the last message ends with a cache point, then the Context
	ContextLastBlock bool // the Context is the last block of the last (user) message
}

func layoutOf(t *testing.T, body []byte, context string) cacheLayout {
	t.Helper()
	var b struct {
		System   []map[string]any `json:"system"`
		Messages []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
		ToolConfig struct {
			Tools []map[string]any `json:"tools"`
		} `json:"toolConfig"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatal(err)
	}
	var l cacheLayout
	l.Points = strings.Count(string(body), `"cachePoint"`)
	isPoint := func(m map[string]any) bool {
		return cmp.Equal(m, map[string]any{"cachePoint": map[string]any{"type": "default"}})
	}
	if n := len(b.ToolConfig.Tools); n > 0 {
		l.AfterTools = isPoint(b.ToolConfig.Tools[n-1])
	}
	if n := len(b.System); n > 0 {
		l.AfterSystem = isPoint(b.System[n-1])
	}
	if n := len(b.Messages); n > 0 {
		last := b.Messages[n-1]
		k := len(last.Content)
		l.ContextLastBlock = last.Role == "user" && k > 0 && last.Content[k-1]["text"] == context
		l.BeforeContext = l.ContextLastBlock && k > 1 && isPoint(last.Content[k-2])
	}
	return l
}

func TestPromptCacheModes(t *testing.T) {
	t.Parallel()
	all := cacheLayout{Points: 3, AfterTools: true, AfterSystem: true, BeforeContext: true, ContextLastBlock: true}
	none := cacheLayout{ContextLastBlock: true}
	tests := []struct {
		name  string
		mode  bedrock.PromptCache
		model string
		want  cacheLayout
	}{
		{name: "auto, a Claude 4 inference profile", model: "us.anthropic.claude-opus-4-1-20250805-v1:0", want: all},
		{name: "auto, Claude 3.7 Sonnet", mode: bedrock.PromptCacheAuto, model: "anthropic.claude-3-7-sonnet-20250219-v1:0", want: all},
		// Nova refuses a cache point among the tools.
		{name: "auto, Nova", model: "amazon.nova-pro-v1:0", want: cacheLayout{Points: 2, AfterSystem: true, BeforeContext: true, ContextLastBlock: true}},
		{name: "auto, a model without prompt caching", model: "meta.llama3-1-70b-instruct-v1:0", want: none},
		{name: "on, whatever the model", mode: bedrock.PromptCacheOn, model: "arn:aws:bedrock:eu-central-1:123456789012:application-inference-profile/abc123", want: all},
		{name: "off, even for Claude", mode: bedrock.PromptCacheOff, model: "anthropic.claude-sonnet-4-20250514-v1:0", want: none},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newConverseServer(t, reply{status: 200, file: "converse_text.json"})
			req := transcript()
			req.Context = "Artifacts:\n- artifact_id: a1 (image/svg+xml)"
			if _, err := s.provider(bedrock.Config{Model: tt.model, PromptCache: tt.mode}).Complete(t.Context(), req); err != nil {
				t.Fatalf("Complete() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, layoutOf(t, s.bodies[0], req.Context)); diff != "" {
				t.Errorf("cache layout mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// issue 18: the request is byte-stable, and the next call of a
// conversation starts with the previous call's cached prefix.
func TestRequestIsStable(t *testing.T) {
	t.Parallel()
	s := newConverseServer(t, reply{status: 200, file: "converse_text.json"})
	p := s.provider(bedrock.Config{PromptCache: bedrock.PromptCacheOn})
	req := transcript()
	req.Context = "time: 2026-01-01T10:00:00Z"
	for range 2 {
		if _, err := p.Complete(t.Context(), req); err != nil {
			t.Fatalf("Complete() error = %v", err)
		}
	}
	if string(s.bodies[0]) != string(s.bodies[1]) {
		t.Errorf("the same request gave different bodies:\n%s\n%s", s.bodies[0], s.bodies[1])
	}
}

// The Context gets a user message of its own when the transcript does not
// end with one (Converse wants the last message to be the user's).
func TestContextAfterAssistantMessage(t *testing.T) {
	t.Parallel()
	s := newConverseServer(t, reply{status: 200, file: "converse_text.json"})
	req := transcript()
	req.Messages = req.Messages[:5] // ends with the assistant's "One picture failed."
	req.Context = "Artifacts: none"
	if _, err := s.provider(bedrock.Config{PromptCache: bedrock.PromptCacheOn}).Complete(t.Context(), req); err != nil {
		t.Fatalf("Complete() error = %v", err)
	}
	var body struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(s.bodies[0], &body); err != nil {
		t.Fatal(err)
	}
	n := len(body.Messages)
	want := []any{
		map[string]any{"role": "assistant", "content": []any{map[string]any{"text": "One picture failed."}, map[string]any{"cachePoint": map[string]any{"type": "default"}}}},
		map[string]any{"role": "user", "content": []any{map[string]any{"text": "Artifacts: none"}}},
	}
	got := []any{body.Messages[n-2], body.Messages[n-1]}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("last messages mismatch (-want +got):\n%s", diff)
	}
}

func TestSupportsPromptCache(t *testing.T) {
	t.Parallel()
	tests := map[string]bool{
		"anthropic.claude-3-7-sonnet-20250219-v1:0":                                                           true,
		"us.anthropic.claude-3-5-haiku-20241022-v1:0":                                                         true,
		"eu.anthropic.claude-sonnet-4-5-20250929-v1:0":                                                        true,
		"global.anthropic.claude-opus-4-20250514-v1:0":                                                        true,
		"apac.anthropic.claude-haiku-4-5-20251001-v1:0":                                                       true,
		"amazon.nova-lite-v1:0":                                                                               true,
		"us.amazon.nova-premier-v1:0":                                                                         true,
		"arn:aws:bedrock:us-east-1::foundation-model/amazon.nova-micro-v1:0":                                  true,
		"arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-sonnet-4-20250514-v1:0": true,
		"anthropic.claude-3-5-sonnet-20241022-v2:0":                                                           false,
		"anthropic.claude-3-haiku-20240307-v1:0":                                                              false,
		"meta.llama3-1-70b-instruct-v1:0":                                                                     false,
		"arn:aws:bedrock:eu-west-1:123456789012:application-inference-profile/abc123":                         false,
	}
	for id, want := range tests {
		if got := bedrock.SupportsPromptCache(id); got != want {
			t.Errorf("SupportsPromptCache(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestFlavourModel(t *testing.T) {
	t.Parallel()
	s := newConverseServer(t, reply{status: 200, file: "converse_text.json"})
	req := llm.Request{Flavour: llm.Small, Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
	if _, err := s.provider(bedrock.Config{}).Complete(t.Context(), req); err != nil {
		t.Fatalf("Complete() error = %v", err)
	}
	if want := "POST /model/amazon.nova-micro-v1%3A0/converse-stream"; s.paths[0] != want {
		t.Errorf("request = %q, want %q", s.paths[0], want)
	}
	var body map[string]any
	_ = json.Unmarshal(s.bodies[0], &body)
	if _, ok := body["toolConfig"]; ok {
		t.Errorf("request without tools has a toolConfig: %s", s.bodies[0])
	}
}

// issue 15: a stream broken midway is called again; the text already
// given is reset, and the answer is the retry's, whole.
func TestStreamBrokenMidwayIsRetried(t *testing.T) {
	t.Parallel()
	for _, brk := range []string{"drop", "exception", "end"} {
		t.Run(brk, func(t *testing.T) {
			t.Parallel()
			s := newConverseServer(t,
				reply{status: 200, file: "converse_tool_use.json", breakAfter: 5, brk: brk},
				reply{status: 200, file: "converse_tool_use.json"},
			)
			req := transcript()
			var rec textRecorder
			rec.attach(&req)
			got, err := s.provider(bedrock.Config{}).Complete(t.Context(), req)
			if err != nil {
				t.Fatalf("Complete() error = %v", err)
			}
			want := &llm.Response{
				Text: "I will convert the SVG.",
				ToolCalls: []llm.ToolCall{
					{ID: "tooluse_1", Name: "convert_svg_to_png", Arguments: `{"artifact_id":"a1"}`},
					{ID: "tooluse_2", Name: "create_svg_artifact", Arguments: `{"word":"Beta"}`},
				},
				Usage: llm.Usage{InputTokens: 950, OutputTokens: 42},
				Model: "anthropic.claude-test-v1:0",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Complete() mismatch (-want +got):\n%s", diff)
			}
			if n := s.requests(); n != 2 {
				t.Errorf("server saw %d requests, want 2", n)
			}
			if rec.resets != 1 || rec.text() != want.Text {
				t.Errorf("OnReset called %d times, then OnText gave %q; want 1 reset, then the text", rec.resets, rec.text())
			}
		})
	}
}

func TestStreamBroken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		reply        reply
		wantRequests int
		wantErr      error
		wantText     string
	}{
		{
			name:         "a validation exception midway is final",
			reply:        reply{status: 200, file: "converse_tool_use.json", breakAfter: 3, brk: "validation"},
			wantRequests: 1,
			wantText:     "ValidationException: The model returned the following errors: input is too long",
		},
		{
			name:         "broken on every call is ErrUnavailable after the attempts",
			reply:        reply{status: 200, file: "converse_tool_use.json", breakAfter: 3, brk: "drop"},
			wantRequests: bedrock.DefaultMaxAttempts,
			wantErr:      llm.ErrUnavailable,
			wantText:     "stream",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newConverseServer(t, tt.reply)
			_, err := s.provider(bedrock.Config{}).Complete(t.Context(), transcript())
			if n := s.requests(); n != tt.wantRequests {
				t.Errorf("server saw %d requests, want %d (error %v)", n, tt.wantRequests, err)
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantText) {
				t.Fatalf("Complete() error = %v, want it to contain %q", err, tt.wantText)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Complete() error = %v, want wrapping %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && (errors.Is(err, llm.ErrRateLimited) || errors.Is(err, llm.ErrUnavailable)) {
				t.Errorf("Complete() error = %v, want a final error", err)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		replies      []reply
		wantRequests int
		wantErr      error
		wantText     string
	}{
		{
			name:         "throttling then success is tried again",
			replies:      []reply{{status: 429, errType: "ThrottlingException", body: `{"message":"Too many requests"}`}, {status: 200, file: "converse_text.json"}},
			wantRequests: 2,
		},
		{
			name:         "throttling exhausted is ErrRateLimited",
			replies:      []reply{{status: 429, errType: "ThrottlingException", body: `{"message":"Too many requests"}`}},
			wantRequests: 2,
			wantErr:      llm.ErrRateLimited,
			wantText:     "Too many requests",
		},
		{
			name:         "service unavailable exhausted is ErrUnavailable",
			replies:      []reply{{status: 503, errType: "ServiceUnavailableException", body: `{"message":"try later"}`}},
			wantRequests: 2,
			wantErr:      llm.ErrUnavailable,
			wantText:     "try later",
		},
		{
			name:         "validation error is final with the message",
			replies:      []reply{{status: 400, errType: "ValidationException", body: `{"message":"The model returned the following errors: tools.0: bad schema"}`}},
			wantRequests: 1,
			wantText:     "ValidationException: The model returned the following errors: tools.0: bad schema",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newConverseServer(t, tt.replies...)
			got, err := s.provider(bedrock.Config{}).Complete(t.Context(), transcript())
			if n := s.requests(); n != tt.wantRequests {
				t.Errorf("server saw %d requests, want %d", n, tt.wantRequests)
			}
			if tt.wantText == "" {
				if err != nil || got.Text == "" {
					t.Fatalf("Complete() = %+v, %v, want the text answer", got, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Complete() error = nil, want one")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Complete() error = %v, want wrapping %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && (errors.Is(err, llm.ErrRateLimited) || errors.Is(err, llm.ErrUnavailable)) {
				t.Errorf("Complete() error = %v, want a final error", err)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("Complete() error = %q, want it to contain %q", err, tt.wantText)
			}
			if strings.Contains(err.Error(), "SECRETTEST") {
				t.Errorf("Complete() error leaks the secret key: %q", err)
			}
		})
	}
}

// assertGoldenJSON compares got with testdata/name as JSON values, so key
// order and whitespace do not matter.
func assertGoldenJSON(t *testing.T, name string, got []byte) {
	t.Helper()
	var gotV any
	if err := json.Unmarshal(got, &gotV); err != nil {
		t.Fatalf("body is not JSON: %v", err)
	}
	path := filepath.Join("testdata", name)
	if *update {
		out, _ := json.MarshalIndent(gotV, "", "  ")
		if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden: %v (run with -update)", err)
	}
	var wantV any
	if err := json.Unmarshal(data, &wantV); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantV, gotV); diff != "" {
		t.Errorf("request body mismatch with %s (-want +got):\n%s", path, diff)
	}
}

// A path label is escaped as the AWS SDKs escape it: every byte but the
// unreserved ones, so a model ARN stays one segment.
func TestEscapePath(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"anthropic.claude-test-v1:0": "anthropic.claude-test-v1%3A0",
		"arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-sonnet-4-20250514-v1:0": "arn%3Aaws%3Abedrock%3Aeu-west-1%3A123456789012%3Ainference-profile%2Feu.anthropic.claude-sonnet-4-20250514-v1%3A0",
		"a b~_é": "a%20b~_%C3%A9",
	} {
		if got := bedrock.EscapePath(in); got != want {
			t.Errorf("EscapePath(%q) = %q, want %q", in, got, want)
		}
	}
}

// An error answer without X-Amzn-ErrorType is named by the body's __type
// (its shape id's name), and an internal server error is one to try again.
func TestErrorNamedByItsBody(t *testing.T) {
	t.Parallel()
	s := newConverseServer(t, reply{status: 500, body: `{"__type":"com.amazon.bedrock#InternalServerException","Message":"boom"}`})
	_, err := s.provider(bedrock.Config{}).Complete(t.Context(), transcript())
	if err == nil || !errors.Is(err, llm.ErrUnavailable) || !strings.Contains(err.Error(), "InternalServerException: boom") {
		t.Errorf("Complete() error = %v, want InternalServerException: boom, wrapping ErrUnavailable", err)
	}
	if n := s.requests(); n != 2 {
		t.Errorf("server saw %d requests, want 2 (the client's attempts)", n)
	}
}
