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

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/google/go-cmp/cmp"

	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/bedrock"
)

var update = flag.Bool("update", false, "rewrite golden request files under testdata/")

type reply struct {
	status  int
	errType string // X-Amzn-ErrorType for error replies
	body    string // literal body, or
	file    string // body from testdata/
}

// converseServer speaks the Converse REST wire format
// (POST /model/{modelId}/converse, JSON) and records what it was sent.
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
		w.Header().Set("Content-Type", "application/json")
		if rep.errType != "" {
			w.Header().Set("X-Amzn-ErrorType", rep.errType)
		}
		w.WriteHeader(rep.status)
		_, _ = w.Write(data)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// provider uses the real SDK client pointed at the server, with static
// credentials and two attempts, so the SDK's own retryer is exercised.
func (s *converseServer) provider() *bedrock.Provider {
	client := bedrockruntime.New(bedrockruntime.Options{
		Region:           "eu-central-1",
		BaseEndpoint:     aws.String(s.srv.URL),
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDTEST", "SECRETTEST", ""),
		HTTPClient:       s.srv.Client(),
		RetryMaxAttempts: 2,
		RetryMode:        aws.RetryModeStandard,
	})
	return bedrock.New(client, bedrock.Config{Model: "anthropic.claude-test-v1:0", FlavourModels: map[llm.Flavour]string{llm.Small: "amazon.nova-micro-v1:0"}})
}

// transcript is the spec §2 example after a parallel batch of two calls,
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

func TestCompleteToolUse(t *testing.T) {
	t.Parallel()
	s := newConverseServer(t, reply{status: 200, file: "converse_tool_use.json"})
	got, err := s.provider().Complete(t.Context(), transcript())
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
	if want := "POST /model/anthropic.claude-test-v1%3A0/converse"; s.paths[0] != want {
		t.Errorf("request = %q, want %q", s.paths[0], want)
	}
	if !s.signed[0] {
		t.Errorf("request was not SigV4-signed with the static credentials")
	}
}

// TestRequestGolden pins the Converse body: toolSpec/inputSchema.json, auto
// tool choice, toolUse blocks, and both results of one batch in ONE user
// message (Converse requires alternating roles).
func TestRequestGolden(t *testing.T) {
	t.Parallel()
	s := newConverseServer(t, reply{status: 200, file: "converse_text.json"})
	got, err := s.provider().Complete(t.Context(), transcript())
	if err != nil {
		t.Fatalf("Complete() error = %v", err)
	}
	if got.Text != "Here is the PNG image with the word Popelnase." || got.Usage.InputTokens != 1100 {
		t.Errorf("Complete() = %+v, want the text answer and its usage", got)
	}
	var gotV any
	if err := json.Unmarshal(s.bodies[0], &gotV); err != nil {
		t.Fatalf("body is not JSON: %v", err)
	}
	path := filepath.Join("testdata", "converse_request.golden.json")
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

func TestFlavourModel(t *testing.T) {
	t.Parallel()
	s := newConverseServer(t, reply{status: 200, file: "converse_text.json"})
	req := llm.Request{Flavour: llm.Small, Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
	if _, err := s.provider().Complete(t.Context(), req); err != nil {
		t.Fatalf("Complete() error = %v", err)
	}
	if want := "POST /model/amazon.nova-micro-v1%3A0/converse"; s.paths[0] != want {
		t.Errorf("request = %q, want %q", s.paths[0], want)
	}
	var body map[string]any
	_ = json.Unmarshal(s.bodies[0], &body)
	if _, ok := body["toolConfig"]; ok {
		t.Errorf("request without tools has a toolConfig: %s", s.bodies[0])
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
			name:         "throttling then success is retried by the SDK",
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
			got, err := s.provider().Complete(t.Context(), transcript())
			if len(s.bodies) != tt.wantRequests {
				t.Errorf("server saw %d requests, want %d", len(s.bodies), tt.wantRequests)
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
