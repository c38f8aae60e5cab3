package llmconfig_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/bedrock"
	"github.com/clientagent/clientagent/pkg/llm/llmconfig"
	"github.com/clientagent/clientagent/pkg/llm/openai"
	"github.com/clientagent/clientagent/pkg/llm/scripted"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestFromEnvChoosesProvider(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		env      map[string]string
		wantType string
		wantDesc string
		wantErr  string
	}{
		{name: "nothing set: offline demo model", env: nil, wantType: "scripted", wantDesc: "demo"},
		{name: "explicit scripted", env: map[string]string{"CLIENTAGENT_LLM": "scripted", "OPENAI_BASE_URL": "http://x/v1"}, wantType: "scripted"},
		{name: "base url means openai", env: map[string]string{"OPENAI_BASE_URL": "http://127.0.0.1:4000/v1", "CLIENTAGENT_MODEL": "m1"}, wantType: "openai", wantDesc: "m1 at http://127.0.0.1:4000/v1"},
		{name: "openai without base url uses the default model", env: map[string]string{"CLIENTAGENT_LLM": "OpenAI"}, wantType: "openai", wantDesc: llmconfig.DefaultOpenAIModel},
		{name: "bedrock needs a model", env: map[string]string{"CLIENTAGENT_LLM": "bedrock"}, wantErr: "CLIENTAGENT_MODEL"},
		{name: "unknown kind", env: map[string]string{"CLIENTAGENT_LLM": "gpt"}, wantErr: "want openai, bedrock or scripted"},
		{name: "bad timeout", env: map[string]string{"OPENAI_BASE_URL": "http://x", "CLIENTAGENT_LLM_TIMEOUT": "soon"}, wantErr: "CLIENTAGENT_LLM_TIMEOUT"},
		{name: "bad attempts", env: map[string]string{"OPENAI_BASE_URL": "http://x", "CLIENTAGENT_LLM_MAX_ATTEMPTS": "0"}, wantErr: "CLIENTAGENT_LLM_MAX_ATTEMPTS"},
		{name: "bad bedrock prompt cache", env: map[string]string{"CLIENTAGENT_LLM": "bedrock", "CLIENTAGENT_MODEL": "amazon.nova-pro-v1:0", "CLIENTAGENT_BEDROCK_PROMPT_CACHE": "maybe"}, wantErr: "want on, off or auto"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, desc, err := llmconfig.FromEnv(env(tt.env))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("FromEnv() error = %v, want it to mention %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("FromEnv() error = %v", err)
			}
			var gotType string
			switch p.(type) {
			case *scripted.Provider:
				gotType = "scripted"
			case *openai.Provider:
				gotType = "openai"
			case *bedrock.Provider:
				gotType = "bedrock"
			default:
				gotType = "other"
			}
			if gotType != tt.wantType {
				t.Errorf("FromEnv() provider = %T, want %s", p, tt.wantType)
			}
			if !strings.Contains(desc, tt.wantDesc) {
				t.Errorf("FromEnv() description = %q, want it to contain %q", desc, tt.wantDesc)
			}
		})
	}
}

// The openai provider FromEnv builds talks to OPENAI_BASE_URL with the key
// and the configured model per flavour, and the key stays out of the description.
func TestFromEnvOpenAIWiring(t *testing.T) {
	t.Parallel()
	type seen struct{ auth, model string }
	got := make(chan seen, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct{ Model string }
		_ = json.Unmarshal(body, &req)
		got <- seen{r.Header.Get("Authorization"), req.Model}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","created":1,"model":"`+req.Model+`","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	t.Cleanup(srv.Close)
	p, desc, err := llmconfig.FromEnv(env(map[string]string{
		"OPENAI_BASE_URL": srv.URL + "/v1", "OPENAI_API_KEY": "sk-env", "CLIENTAGENT_MODEL": "medium-m", "CLIENTAGENT_MODEL_SMALL": "small-m",
	}))
	if err != nil {
		t.Fatalf("FromEnv() error = %v", err)
	}
	if strings.Contains(desc, "sk-env") {
		t.Errorf("FromEnv() description %q leaks the key", desc)
	}
	for _, tc := range []struct {
		flavour llm.Flavour
		model   string
	}{{llm.Medium, "medium-m"}, {llm.Small, "small-m"}} {
		res, err := p.Complete(t.Context(), llm.Request{Flavour: tc.flavour, Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
		if err != nil {
			t.Fatalf("Complete() error = %v", err)
		}
		s := <-got
		if s.auth != "Bearer sk-env" || s.model != tc.model || res.Text != "hi" {
			t.Errorf("flavour %s: server saw %+v and answered %q, want bearer sk-env and model %s", tc.flavour, s, res.Text, tc.model)
		}
	}
}

// Bedrock reads its region from the environment the AWS SDK reads, so this
// test sets process variables and cannot run in parallel.
func TestFromEnvBedrock(t *testing.T) {
	t.Setenv("AWS_REGION", "eu-central-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SECRETTEST")
	p, desc, err := llmconfig.FromEnv(env(map[string]string{"CLIENTAGENT_LLM": "bedrock", "CLIENTAGENT_MODEL": "amazon.nova-pro-v1:0"}))
	if err != nil {
		t.Fatalf("FromEnv() error = %v", err)
	}
	if _, ok := p.(*bedrock.Provider); !ok {
		t.Errorf("FromEnv() provider = %T, want *bedrock.Provider", p)
	}
	if want := "bedrock amazon.nova-pro-v1:0 in eu-central-1"; desc != want {
		t.Errorf("FromEnv() description = %q, want %q", desc, want)
	}
}

// issue 18: CLIENTAGENT_BEDROCK_PROMPT_CACHE reaches the provider: the
// request a Nova model gets carries cache points unless it is off. The
// endpoint is a fake that refuses every call after recording its body; it
// sets process variables, so it cannot run in parallel.
func TestFromEnvBedrockPromptCache(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(body))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-ErrorType", "ValidationException")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"message":"recorded"}`)
	}))
	t.Cleanup(srv.Close)
	t.Setenv("AWS_REGION", "eu-central-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SECRETTEST")
	t.Setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", srv.URL)
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	for _, tc := range []struct {
		setting    string
		wantPoints bool
	}{{"", true}, {"auto", true}, {"on", true}, {"OFF", false}} {
		p, _, err := llmconfig.FromEnv(env(map[string]string{
			"CLIENTAGENT_LLM": "bedrock", "CLIENTAGENT_MODEL": "eu.amazon.nova-pro-v1:0", "CLIENTAGENT_BEDROCK_PROMPT_CACHE": tc.setting,
		}))
		if err != nil {
			t.Fatalf("FromEnv(%q) error = %v", tc.setting, err)
		}
		req := llm.Request{System: "rules", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
		if _, err := p.Complete(t.Context(), req); err == nil || !strings.Contains(err.Error(), "recorded") {
			t.Fatalf("Complete() error = %v, want the fake's refusal", err)
		}
		mu.Lock()
		last := bodies[len(bodies)-1]
		mu.Unlock()
		if got := strings.Contains(last, `"cachePoint"`); got != tc.wantPoints {
			t.Errorf("CLIENTAGENT_BEDROCK_PROMPT_CACHE=%q: request has cache points = %v, want %v: %s", tc.setting, got, tc.wantPoints, last)
		}
	}
}
