package mcp_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clientagent/clientagent/pkg/mcp"
)

func TestParseConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	yamlPath := filepath.Join(dir, "mcp.yaml")
	os.WriteFile(yamlPath, []byte("servers:\n  - name: docs\n    url: https://example.com/mcp\n    headers: {Authorization: \"secret:docs-token\"}\n    tools:\n      search: {requires_approval: true}\n"), 0o600)
	jsonPath := filepath.Join(dir, "mcp.json")
	os.WriteFile(jsonPath, []byte(`[{"name":"fs","command":"npx","args":["-y","server"]}]`), 0o600)
	yes := true
	tests := []struct {
		name, in string
		want     []mcp.ServerConfig
		wantErr  string
	}{
		{name: "empty", in: ""},
		{name: "inline list", in: `[{"name":"a","url":"http://127.0.0.1:9/mcp","headers":{"X-Key":"k"}}]`,
			want: []mcp.ServerConfig{{Name: "a", URL: "http://127.0.0.1:9/mcp", Headers: map[string]string{"X-Key": "k"}}}},
		{name: "inline object", in: `{"servers":[{"name":"b","command":"node","args":["x.js","stdio"]}]}`,
			want: []mcp.ServerConfig{{Name: "b", Command: "node", Args: []string{"x.js", "stdio"}}}},
		{name: "yaml file", in: yamlPath, want: []mcp.ServerConfig{{Name: "docs", URL: "https://example.com/mcp",
			Headers: map[string]string{"Authorization": "secret:docs-token"}, Tools: map[string]mcp.ToolOverride{"search": {RequiresApproval: &yes}}}}},
		{name: "json file", in: jsonPath, want: []mcp.ServerConfig{{Name: "fs", Command: "npx", Args: []string{"-y", "server"}}}},
		{name: "no name", in: `[{"url":"http://x/mcp"}]`, wantErr: "has no name"},
		{name: "twice", in: `[{"name":"a","url":"http://x/mcp"},{"name":"a","command":"y"}]`, wantErr: "listed twice"},
		{name: "both", in: `[{"name":"a","url":"http://x/mcp","command":"y"}]`, wantErr: "both a url and a command"},
		{name: "neither", in: `[{"name":"a"}]`, wantErr: "needs a url"},
		{name: "bad url", in: `[{"name":"a","url":"ftp://x/mcp"}]`, wantErr: "not an http(s) URL"},
		{name: "unknown field", in: `[{"name":"a","url":"http://x/mcp","header":{}}]`, wantErr: "unknown field"},
		{name: "missing file", in: filepath.Join(dir, "nope.json"), wantErr: "read MCP server list"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mcp.ParseConfig(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseConfig() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseConfig() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseConfig() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadConfigRefusesStdioOnLambda(t *testing.T) {
	t.Parallel()
	env := map[string]string{mcp.EnvVar: `[{"name":"fs","command":"npx"}]`, "AWS_LAMBDA_FUNCTION_NAME": "clientagent-invoke"}
	if _, err := mcp.LoadConfig(func(k string) string { return env[k] }); !errors.Is(err, mcp.ErrStdioOnLambda) {
		t.Fatalf("LoadConfig() on Lambda error = %v, want ErrStdioOnLambda", err)
	}
	delete(env, "AWS_LAMBDA_FUNCTION_NAME")
	if got, err := mcp.LoadConfig(func(k string) string { return env[k] }); err != nil || len(got) != 1 {
		t.Fatalf("LoadConfig() locally = %v, %v, want the stdio server", got, err)
	}
}

type fakeSecrets map[string]string

func (f fakeSecrets) SecretString(_ context.Context, id string) (string, error) {
	v, ok := f[id]
	if !ok {
		return "", errors.New("ResourceNotFoundException")
	}
	return v, nil
}

func TestResolve(t *testing.T) {
	t.Parallel()
	servers := []mcp.ServerConfig{{Name: "docs", URL: "https://x/mcp", Headers: map[string]string{"Authorization": "secret:arn:aws:secretsmanager:eu-west-1:1:secret:tok", "X-Plain": "p"}}}
	got, err := mcp.Resolve(t.Context(), servers, fakeSecrets{"arn:aws:secretsmanager:eu-west-1:1:secret:tok": "Bearer s3cr3t\n"})
	if err != nil {
		t.Fatalf("Resolve() error = %v", err)
	}
	want := map[string]string{"Authorization": "Bearer s3cr3t", "X-Plain": "p"}
	if diff := cmp.Diff(want, got[0].Headers); diff != "" {
		t.Errorf("Resolve() headers mismatch (-want +got):\n%s", diff)
	}
	if servers[0].Headers["Authorization"] == "Bearer s3cr3t" {
		t.Error("Resolve() changed its input")
	}
	if _, err := mcp.Resolve(t.Context(), servers, nil); err == nil || !strings.Contains(err.Error(), "no secret reader") {
		t.Errorf("Resolve(nil secrets) error = %v, want no secret reader", err)
	}
	if _, err := mcp.Resolve(t.Context(), servers, fakeSecrets{}); err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("Resolve(missing secret) error = %v, want an error without the value", err)
	}
}

func TestCapabilityFromTool(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	sc := mcp.ServerConfig{Name: "my.server", URL: "http://x/mcp", Tools: map[string]mcp.ToolOverride{"rm": {RequiresApproval: &no}, "read": {RequiresApproval: &yes}}}
	tests := []struct {
		tool         sdk.Tool
		wantName     string
		wantDesc     string
		wantApproval bool
	}{
		{sdk.Tool{Name: "get-sum", Title: "Get Sum", Description: "Adds two numbers."}, "my_server_get-sum", "Get Sum: Adds two numbers.", false},
		{sdk.Tool{Name: "drop", Description: "Drops a table.", Annotations: &sdk.ToolAnnotations{DestructiveHint: &yes}}, "my_server_drop", "Drops a table.", true},
		{sdk.Tool{Name: "peek", Annotations: &sdk.ToolAnnotations{Title: "Peek", DestructiveHint: &yes, ReadOnlyHint: true}}, "my_server_peek", "Peek", false},
		{sdk.Tool{Name: "rm", Annotations: &sdk.ToolAnnotations{DestructiveHint: &yes}}, "my_server_rm", "rm", false},
		{sdk.Tool{Name: "read"}, "my_server_read", "read", true},
	}
	for _, tt := range tests {
		c := mcp.CapabilityFromTool(sc, &tt.tool)
		if c.Tool != tt.wantName || c.Description != tt.wantDesc || c.RequiresApproval != tt.wantApproval || c.MCPServer != "my.server" || c.SkillID != tt.tool.Name {
			t.Errorf("CapabilityFromTool(%s) = tool %q desc %q approval %v server %q skill %q, want %q %q %v", tt.tool.Name, c.Tool, c.Description, c.RequiresApproval, c.MCPServer, c.SkillID, tt.wantName, tt.wantDesc, tt.wantApproval)
		}
		if string(c.InputSchema) != `{"type":"object","properties":{}}` {
			t.Errorf("CapabilityFromTool(%s).InputSchema = %s, want the empty object schema", tt.tool.Name, c.InputSchema)
		}
	}
}
