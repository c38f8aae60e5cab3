package llmconfig_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/clientagent/clientagent/pkg/awssecrets"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/llmconfig"
)

const testSecretARN = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:clientagent-dev/openai-api-key-AbCdEf"

// fakeSecretsManager speaks the Secrets Manager wire protocol (AWS JSON 1.1:
// POST /, X-Amz-Target: secretsmanager.GetSecretValue) for the secrets it
// holds, and records the requests it saw.
type fakeSecretsManager struct {
	secrets map[string]string // SecretId → SecretString

	mu   sync.Mutex
	seen []secretRequest
}

type secretRequest struct {
	target, contentType, auth, secretID string
}

func (f *fakeSecretsManager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var in struct{ SecretId string }
	_ = json.Unmarshal(body, &in)
	f.mu.Lock()
	f.seen = append(f.seen, secretRequest{r.Header.Get("X-Amz-Target"), r.Header.Get("Content-Type"), r.Header.Get("Authorization"), in.SecretId})
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	if r.Method != http.MethodPost || r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"__type":"UnknownOperationException","message":"unexpected request"}`)
		return
	}
	value, ok := f.secrets[in.SecretId]
	if !ok {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"__type":"ResourceNotFoundException","Message":"Secrets Manager can't find the specified secret."}`)
		return
	}
	out, _ := json.Marshal(map[string]any{
		"ARN": in.SecretId, "Name": "clientagent-dev/openai-api-key", "SecretString": value,
		"VersionId": "v1", "VersionStages": []string{"AWSCURRENT"}, "CreatedDate": 1.7e9,
	})
	_, _ = w.Write(out)
}

func (f *fakeSecretsManager) requests() []secretRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]secretRequest(nil), f.seen...)
}

func TestReadOpenAIKey(t *testing.T) {
	t.Parallel()
	fake := &fakeSecretsManager{secrets: map[string]string{
		"plain":        "  sk-plain\n",
		"json-api-key": `{"api_key":"sk-json"}`,
		"json-env":     `{"OPENAI_API_KEY":"sk-env-name","other":"x"}`,
		"json-nokey":   `{"token":"sk-hidden"}`,
		"json-broken":  `{"api_key":`,
		"empty":        "",
	}}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	client := awssecrets.NewClient(aws.Config{BaseEndpoint: aws.String(srv.URL), Region: "eu-west-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "SECRETTEST", "")})
	tests := []struct {
		id       string
		want     string
		wantErr  string
		sentinel error
	}{
		{id: "plain", want: "sk-plain"},
		{id: "json-api-key", want: "sk-json"},
		{id: "json-env", want: "sk-env-name"},
		{id: "json-nokey", wantErr: "no api_key or OPENAI_API_KEY", sentinel: llmconfig.ErrNoKeyInSecret},
		{id: "json-broken", wantErr: "not a JSON object", sentinel: llmconfig.ErrNoKeyInSecret},
		{id: "empty", wantErr: "empty secret string", sentinel: llmconfig.ErrNoKeyInSecret},
		{id: "missing", wantErr: "ResourceNotFoundException"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			t.Parallel()
			got, err := llmconfig.ReadOpenAIKey(t.Context(), client, tt.id)
			if tt.wantErr == "" {
				if err != nil || got != tt.want {
					t.Errorf("ReadOpenAIKey(%s) = %q, %v, want %q", tt.id, got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "read OpenAI key from secret "+tt.id+":") {
				t.Fatalf("ReadOpenAIKey(%s) error = %v, want \"read OpenAI key from secret %s: …%s…\"", tt.id, err, tt.id, tt.wantErr)
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Errorf("ReadOpenAIKey(%s) error = %v, want errors.Is %v", tt.id, err, tt.sentinel)
			}
			if strings.Contains(err.Error(), "sk-hidden") {
				t.Errorf("ReadOpenAIKey(%s) error %q leaks the secret's content", tt.id, err)
			}
		})
	}
	for _, r := range fake.requests() {
		if r.target != "secretsmanager.GetSecretValue" || r.contentType != "application/x-amz-json-1.1" ||
			!strings.Contains(r.auth, "AWS4-HMAC-SHA256 Credential=AKIDTEST/") || !strings.Contains(r.auth, "/eu-west-1/secretsmanager/") {
			t.Errorf("request %+v: want a SigV4-signed JSON 1.1 GetSecretValue for eu-west-1", r)
		}
	}
}

// The deployed llmstep holds only OPENAI_API_KEY_SECRET_ARN: FromEnv reads
// the key at cold start and the OpenAI-compatible endpoint sees it. It sets
// the process environment the AWS SDK reads, so it cannot run in parallel.
func TestFromEnvReadsKeyFromSecret(t *testing.T) {
	fake := &fakeSecretsManager{secrets: map[string]string{testSecretARN: `{"api_key":"sk-from-secret"}`}}
	sm := httptest.NewServer(fake)
	t.Cleanup(sm.Close)
	t.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", sm.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SECRETTEST")
	// No AWS_REGION: the region comes from the ARN, as a function outside
	// Lambda (the local stack pointing at a deployed secret) would need.
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")

	auth := make(chan string, 4)
	llmSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth <- r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	t.Cleanup(llmSrv.Close)

	tests := []struct {
		name     string
		env      map[string]string
		wantAuth string
		wantErr  string
		wantReqs int
	}{
		{
			name:     "key from the secret",
			env:      map[string]string{"CLIENTAGENT_LLM": "openai", "OPENAI_BASE_URL": llmSrv.URL + "/v1", "OPENAI_API_KEY_SECRET_ARN": testSecretARN},
			wantAuth: "Bearer sk-from-secret", wantReqs: 1,
		},
		{
			name:     "OPENAI_API_KEY wins and nothing is read",
			env:      map[string]string{"CLIENTAGENT_LLM": "openai", "OPENAI_BASE_URL": llmSrv.URL + "/v1", "OPENAI_API_KEY": "sk-env", "OPENAI_API_KEY_SECRET_ARN": testSecretARN},
			wantAuth: "Bearer sk-env", wantReqs: 0,
		},
		{
			name:     "unknown secret fails the cold start clearly",
			env:      map[string]string{"CLIENTAGENT_LLM": "openai", "OPENAI_API_KEY_SECRET_ARN": testSecretARN + "-gone"},
			wantErr:  "read OpenAI key from secret " + testSecretARN + "-gone: ",
			wantReqs: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(fake.requests())
			p, desc, err := llmconfig.FromEnvContext(t.Context(), env(tt.env))
			if got := len(fake.requests()) - before; got != tt.wantReqs {
				t.Errorf("Secrets Manager requests = %d, want %d", got, tt.wantReqs)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("FromEnvContext() error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("FromEnvContext() error = %v", err)
			}
			if strings.Contains(desc, "sk-") {
				t.Errorf("FromEnvContext() description %q leaks the key", desc)
			}
			if _, err := p.Complete(t.Context(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}); err != nil {
				t.Fatalf("Complete() error = %v", err)
			}
			if got := <-auth; got != tt.wantAuth {
				t.Errorf("LLM endpoint saw Authorization %q, want %q", got, tt.wantAuth)
			}
		})
	}
	for _, r := range fake.requests() {
		if !strings.Contains(r.auth, "/eu-west-1/secretsmanager/") {
			t.Errorf("Secrets Manager request signed as %q, want region eu-west-1 from the ARN", r.auth)
		}
	}
}
