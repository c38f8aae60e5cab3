package mcpenv_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/clientagent/clientagent/pkg/mcp"
	"github.com/clientagent/clientagent/pkg/platform"
	"github.com/clientagent/clientagent/pkg/platform/mcpenv"
)

// Servers reads each secret header from Secrets Manager (an in-process
// server speaking its JSON protocol), asks it only when a header names a
// secret, and refuses a stdio server on Lambda.
func TestServers(t *testing.T) {
	var asked atomic.Int32
	sm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" {
			http.Error(w, "unexpected "+r.Header.Get("X-Amz-Target"), http.StatusBadRequest)
			return
		}
		asked.Add(1)
		var in struct{ SecretId string }
		json.NewDecoder(r.Body).Decode(&in)
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		json.NewEncoder(w).Encode(map[string]string{"Name": in.SecretId, "SecretString": `{"token":"Bearer s3cr3t"}`})
	}))
	defer sm.Close()
	t.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", sm.URL)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_REGION", "us-east-1")

	servers := func(cfg string) ([]mcp.ServerConfig, error) {
		vars := map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "clientagent-test-api", mcp.EnvVar: cfg}
		return mcpenv.Servers(t.Context(), platform.NewEnv(func(k string) string { return vars[k] }))
	}
	if got, err := servers(""); err != nil || len(got) != 0 {
		t.Errorf("no servers: %v, %v", got, err)
	}
	got, err := servers(`[{"name":"docs","url":"https://docs.example/mcp","headers":{"X-Team":"a"}}]`)
	if err != nil || len(got) != 1 || got[0].Headers["X-Team"] != "a" || asked.Load() != 0 {
		t.Errorf("plain headers: %+v, %v, Secrets Manager asked %d times; want the header kept and no request", got, err, asked.Load())
	}
	got, err = servers(`[{"name":"docs","url":"https://docs.example/mcp","headers":{"Authorization":"secret:docs-token#token"}}]`)
	if err != nil || len(got) != 1 || got[0].Headers["Authorization"] != "Bearer s3cr3t" || asked.Load() != 1 {
		t.Errorf("secret header: %+v, %v, asked %d times; want the secret's field in the header, read once", got, err, asked.Load())
	}
	if _, err := servers(`[{"name":"fs","command":"npx"}]`); !errors.Is(err, mcp.ErrStdioOnLambda) {
		t.Errorf("stdio on Lambda: %v, want ErrStdioOnLambda", err)
	}
}

type secretsFunc func(ctx context.Context, id string) (string, error)

func (f secretsFunc) SecretString(ctx context.Context, id string) (string, error) { return f(ctx, id) }

// Without a reader a secret header is a configuration error; a secret that
// cannot be read leaves that server unusable, not the function unable to
// start.
func TestResolve(t *testing.T) {
	t.Parallel()
	secret := []mcp.ServerConfig{{Name: "docs", URL: "https://docs.example/mcp", Headers: map[string]string{"Authorization": "secret:docs-token"}}}
	if _, err := mcpenv.Resolve(t.Context(), nil, secret, nil); err == nil || !strings.Contains(err.Error(), "no secret reader") {
		t.Errorf("Resolve(secret header, no reader) = %v, want no secret reader", err)
	}
	got, err := mcpenv.Resolve(t.Context(), nil, secret, secretsFunc(func(_ context.Context, id string) (string, error) { return "Bearer " + id, nil }))
	if err != nil || len(got) != 1 || got[0].Headers["Authorization"] != "Bearer docs-token" {
		t.Errorf("Resolve() = %+v, %v; want the secret read into the header", got, err)
	}
	got, err = mcpenv.Resolve(t.Context(), nil, secret, secretsFunc(func(context.Context, string) (string, error) { return "", errors.New("AccessDeniedException") }))
	if err != nil || len(got) != 1 || got[0].Unusable == nil || !strings.Contains(got[0].Unusable.Error(), "AccessDenied") || got[0].Headers != nil {
		t.Errorf("Resolve(unreadable secret) = %+v, %v; want the server kept unusable, no error", got, err)
	}
}
