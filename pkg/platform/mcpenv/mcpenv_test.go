package mcpenv_test

import (
	"errors"
	"testing"

	"github.com/clientagent/clientagent/pkg/mcp"
	"github.com/clientagent/clientagent/pkg/platform"
	"github.com/clientagent/clientagent/pkg/platform/mcpenv"
)

// Load makes a Secrets Manager reader only when a header names a secret,
// and refuses what Env.MCPServers refuses. No request is made.
func TestLoad(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		mcp         string
		wantSecrets bool
		wantErr     error
	}{
		{name: "no servers"},
		{name: "plain headers", mcp: `[{"name":"docs","url":"https://docs.example/mcp","headers":{"X-Team":"a"}}]`},
		{name: "secret header", mcp: `[{"name":"docs","url":"https://docs.example/mcp","headers":{"Authorization":"secret:docs-token#token"}}]`, wantSecrets: true},
		{name: "stdio", mcp: `[{"name":"fs","command":"npx"}]`, wantErr: mcp.ErrStdioOnLambda},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			vars := map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "clientagent-test-api", "AWS_REGION": "us-east-1", mcp.EnvVar: tt.mcp}
			env := platform.NewEnv(func(k string) string { return vars[k] })
			err := mcpenv.Load(t.Context(), env)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Load() error = %v, want %v", err, tt.wantErr)
			}
			if got := env.Secrets != nil; got != tt.wantSecrets {
				t.Errorf("Load() set Secrets = %v, want %v", got, tt.wantSecrets)
			}
		})
	}
}
