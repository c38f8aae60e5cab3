package platform

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/clientagent/clientagent/pkg/mcp"
)

type secretsFunc func(ctx context.Context, id string) (string, error)

func (f secretsFunc) SecretString(ctx context.Context, id string) (string, error) { return f(ctx, id) }

func TestEnvMCPServers(t *testing.T) {
	t.Parallel()
	lambda := func(extra map[string]string) func(string) string {
		env := map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "clientagent-invoke"}
		for k, v := range extra {
			env[k] = v
		}
		return func(k string) string { return env[k] }
	}

	e := NewEnv(lambda(map[string]string{mcp.EnvVar: `[{"name":"fs","command":"npx","args":["server"]}]`}))
	if _, err := e.MCPServers(t.Context()); !errors.Is(err, mcp.ErrStdioOnLambda) {
		t.Errorf("MCPServers(stdio on Lambda) error = %v, want ErrStdioOnLambda", err)
	}

	secretHeader := map[string]string{mcp.EnvVar: `[{"name":"docs","url":"https://docs.example/mcp","headers":{"Authorization":"secret:docs-token"}}]`}
	e = NewEnv(lambda(secretHeader))
	if _, err := e.MCPServers(t.Context()); err == nil || !strings.Contains(err.Error(), "no secret reader") {
		t.Errorf("MCPServers(secret header, no Secrets) error = %v, want no secret reader", err)
	}

	e = NewEnv(lambda(secretHeader))
	e.Secrets = secretsFunc(func(_ context.Context, id string) (string, error) { return "Bearer " + id, nil })
	got, err := e.MCPServers(t.Context())
	if err != nil || len(got) != 1 || got[0].Headers["Authorization"] != "Bearer docs-token" {
		t.Errorf("MCPServers() = %+v, %v; want the secret read into the header", got, err)
	}

	// A secret that cannot be read leaves that server unusable, not the
	// function unable to start.
	e = NewEnv(lambda(secretHeader))
	e.Secrets = secretsFunc(func(context.Context, string) (string, error) { return "", errors.New("AccessDeniedException") })
	got, err = e.MCPServers(t.Context())
	if err != nil || len(got) != 1 || got[0].Unusable == nil || !strings.Contains(got[0].Unusable.Error(), "AccessDenied") || got[0].Headers != nil {
		t.Errorf("MCPServers(unreadable secret) = %+v, %v; want the server kept unusable, no error", got, err)
	}
}
