package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	testMCPSecretARN  = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:clientagent/docs-mcp-AbCdEf"
	testMCPSecretName = "clientagent/search-mcp"
)

// testMCPServers is an mcpServers setting as cdk.json holds it: a secret
// by ARN (a field of a JSON secret), one by name named twice, and a plain
// header.
var testMCPServers = []any{
	map[string]any{"name": "docs", "url": "https://docs.example.com/mcp",
		"headers": map[string]any{"Authorization": "secret:" + testMCPSecretARN + "#token", "X-Team": "platform"},
		"tools":   map[string]any{"delete_page": map[string]any{"requires_approval": true}}},
	map[string]any{"name": "search", "url": "https://search.example.com/mcp",
		"headers": map[string]any{"Authorization": "secret:" + testMCPSecretName, "X-Api-Key": "secret:" + testMCPSecretName}},
}

func init() {
	// staging from cdk.json with MCP servers set as an environment's block would.
	configs["mcp"] = fromCDKJSON("staging", map[string]any{CtxMCPServers: testMCPServers})
}

// Issue 17: MCP servers per environment. The functions that list or call
// MCP tools get CLIENTAGENT_MCP and may read exactly the secrets its
// headers name; without servers no function gets either.
func TestMCPServers(t *testing.T) {
	t.Parallel()
	nameARN := map[string]any{"Fn::Join": []any{"", []any{"arn:", map[string]any{"Ref": "AWS::Partition"}, ":secretsmanager:",
		map[string]any{"Ref": "AWS::Region"}, ":", map[string]any{"Ref": "AWS::AccountId"}, ":secret:" + testMCPSecretName + "-??????"}}}
	wantSecrets := []any{testMCPSecretARN, nameARN}
	byJSON := func(a, b any) int { return strings.Compare(mustJSON(a), mustJSON(b)) }
	slices.SortFunc(wantSecrets, byJSON)
	wantList, _ := json.Marshal(testMCPServers)
	for _, config := range []string{"mcp", "dev", "bedrock"} {
		s := synth(t, config)
		configured := len(s.props.MCPServers) > 0
		if configured != (config == "mcp") {
			t.Fatalf("%s: mcpServers = %+v", config, s.props.MCPServers)
		}
		names := functionNames()
		if s.props.DemoAgents {
			names = append(names, FnDemoAgents)
		}
		for _, name := range names {
			_, fn := s.function(t, name)
			reaches := configured && slices.Contains(MCPFunctions, name)
			list, hasList := envOf(fn)["CLIENTAGENT_MCP"].(string)
			if hasList != reaches {
				t.Errorf("%s: %s has CLIENTAGENT_MCP %v, want %v", config, name, hasList, reaches)
			}
			if hasList {
				var got, want any
				if err := json.Unmarshal([]byte(list), &got); err != nil {
					t.Errorf("%s: %s CLIENTAGENT_MCP %q: %v", config, name, list, err)
				}
				_ = json.Unmarshal(wantList, &want)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: %s CLIENTAGENT_MCP (-want +got):\n%s", config, name, diff)
				}
			}
			var got []any
			for _, r := range allowed(s.roleStatements(t, fn, "Role"), "secretsmanager:GetSecretValue") {
				var v any
				_ = json.Unmarshal([]byte(r), &v)
				got = append(got, v)
			}
			slices.SortFunc(got, byJSON)
			want := []any(nil)
			if reaches {
				want = wantSecrets
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: %s may secretsmanager:GetSecretValue on (-want +got):\n%s", config, name, diff)
			}
		}
		if !configured {
			for _, st := range s.resources("AWS::IAM::Policy") {
				if strings.Contains(mustJSON(st), "MCPHeaderSecrets") {
					t.Errorf("%s: a policy has MCPHeaderSecrets without mcpServers", config)
				}
			}
		}
	}
}

// stdio servers are refused at synth, as the functions refuse them at
// cold start; so is what would stop every cold start.
func TestValidateMCPServers(t *testing.T) {
	t.Parallel()
	http := func(url string, headers map[string]string) MCPServer {
		return MCPServer{Name: "docs", URL: url, Headers: headers}
	}
	tests := []struct {
		name    string
		servers []MCPServer
		want    string // "" for valid
	}{
		{"none", nil, ""},
		{"http", []MCPServer{http("https://docs.example.com/mcp", map[string]string{"Authorization": "secret:" + testMCPSecretARN, "X-Key": "secret:team/key#api_key"})}, ""},
		{"stdio", []MCPServer{{Name: "fs", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem"}}}, "stdio MCP servers run on the local stack only"},
		{"stdio with a url", []MCPServer{{Name: "fs", URL: "https://x.example/mcp", Command: "npx"}}, "give it a url (streamable HTTP)"},
		{"no url", []MCPServer{{Name: "docs"}}, "not an http(s) URL"},
		{"not http", []MCPServer{http("ftp://docs.example.com/mcp", nil)}, "not an http(s) URL"},
		{"no name", []MCPServer{{URL: "https://docs.example.com/mcp"}}, "no name"},
		{"twice", []MCPServer{http("https://a.example/mcp", nil), http("https://b.example/mcp", nil)}, "listed twice"},
		{"bad secret", []MCPServer{http("https://docs.example.com/mcp", map[string]string{"Authorization": "secret:not a secret"})}, "not a Secrets Manager secret's ARN or name"},
		{"empty field", []MCPServer{http("https://docs.example.com/mcp", map[string]string{"Authorization": "secret:team/key#"})}, "not a Secrets Manager secret's ARN or name"},
		{"empty secret", []MCPServer{http("https://docs.example.com/mcp", map[string]string{"Authorization": "secret:"})}, "not a Secrets Manager secret's ARN or name"},
	}
	for _, tc := range tests {
		p := baseProps()
		p.MCPServers = tc.servers
		err := p.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("Validate(%s) = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// mcpServers reads the same from cdk.json (a list) and from `-c` (a JSON
// string), refuses unknown keys, and is empty in cdk.json's environments.
func TestPropsFromContextMCPServers(t *testing.T) {
	t.Parallel()
	asString, _ := json.Marshal(testMCPServers)
	var want []MCPServer
	for _, v := range []any{testMCPServers, string(asString)} {
		p, err := PropsFromContext(func(k string) any { return map[string]any{CtxMCPServers: v}[k] })
		if err != nil {
			t.Fatalf("PropsFromContext(%T) error = %v", v, err)
		}
		if len(p.MCPServers) != 2 || p.MCPServers[0].Headers["Authorization"] != "secret:"+testMCPSecretARN+"#token" {
			t.Errorf("PropsFromContext(%T) MCPServers = %+v", v, p.MCPServers)
		}
		if want == nil {
			want = p.MCPServers
		} else if diff := cmp.Diff(want, p.MCPServers); diff != "" {
			t.Errorf("PropsFromContext(string) differs from the list (-list +string):\n%s", diff)
		}
	}
	for _, bad := range []any{`[{"name":"docs","url":"https://x.example/mcp","header":{}}]`, `{"name":"docs"}`, float64(1)} {
		if _, err := PropsFromContext(func(k string) any { return map[string]any{CtxMCPServers: bad}[k] }); err == nil {
			t.Errorf("PropsFromContext(mcpServers=%v) error = nil, want one", bad)
		}
	}

	ctx, err := ReadCDKJSONContext(filepath.Join("..", "cdk.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range []string{"dev", "staging", "prod"} {
		block, _ := ctx[CtxEnvironments].(map[string]any)[env].(map[string]any)
		if l, ok := block[CtxMCPServers].([]any); !ok || len(l) != 0 {
			t.Errorf("cdk.json %s: %s = %v, want [] (no MCP servers by default)", env, CtxMCPServers, block[CtxMCPServers])
		}
	}
}
