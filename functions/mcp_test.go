package functions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clientagent/clientagent/pkg/valkeytest"
)

const mcpSecretARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:clientagent-test/docs-mcp-AbCdEf"

// mcpServer is a streamable HTTP MCP server with one tool, "search", that
// answers only requests carrying the Authorization header auth; it counts
// the requests it refused.
func mcpServer(t *testing.T, auth string) (url string, refused *atomic.Int32) {
	t.Helper()
	srv := sdk.NewServer(&sdk.Implementation{Name: "docs", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "search", Description: "Searches the docs.", InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "found"}}}, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	refused = &atomic.Int32{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != auth {
			refused.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp", refused
}

// Issue 17: an MCP server's auth header comes from Secrets Manager on AWS.
// The api function, with CLIENTAGENT_MCP naming a field of a JSON secret
// in a header, reads the secret once at cold start and lists the server's
// tools in GET /v1/catalog; the server saw the header.
func TestMCPSecretHeader(t *testing.T) {
	t.Parallel()
	aws := newFakeAWS(t)
	aws.secrets[mcpSecretARN] = `{"token":"Bearer docs-s3cr3t","other":"x"}`
	url, refused := mcpServer(t, "Bearer docs-s3cr3t")
	env := stepEnv(valkeyURL(t), aws, nil)
	env["CLIENTAGENT_MCP"] = fmt.Sprintf(`[{"name":"docs","url":%q,"headers":{"Authorization":"secret:%s#token"}}]`, url, mcpSecretARN)
	fns := startAll(t, env, "api")

	var cat struct {
		Skills []struct {
			Name        string `json:"name"`
			Unavailable bool   `json:"unavailable"`
		} `json:"skills"`
	}
	request(t, fns["api"], event(t, "apigw-v2-get-catalog.json", map[string]string{"USER": valkeytest.ID(t, "user")}), http.StatusOK, &cat)
	found := false
	for _, s := range cat.Skills {
		if s.Name == "docs_search" {
			found = !s.Unavailable
		}
	}
	if !found {
		t.Errorf("GET /v1/catalog skills = %+v, want docs_search available", cat.Skills)
	}
	if n := refused.Load(); n > 0 {
		t.Errorf("the MCP server refused %d requests for their Authorization header", n)
	}
	if n := aws.reads(mcpSecretARN); n != 1 {
		t.Errorf("GetSecretValue(%s) calls = %d, want 1 (at cold start)", mcpSecretARN, n)
	}
	if strings.Contains(fns["api"].out.String(), "docs-s3cr3t") {
		t.Errorf("the function logged the secret's value:\n%s", fns["api"].out)
	}
}

// A secret header that cannot be read does not stop the cold start: the
// function starts, with that server unusable (its tools unavailable, a
// call of one failing with the reason), and its log names the server, the
// header and the secret. Every function that builds the catalogue or calls
// tools reads it.
func TestMCPSecretHeaderUnreadable(t *testing.T) {
	t.Parallel()
	aws := newFakeAWS(t)
	url, _ := mcpServer(t, "unused")
	env := stepEnv(valkeyURL(t), aws, nil)
	env["CLIENTAGENT_MCP"] = fmt.Sprintf(`[{"name":"docs","url":%q,"headers":{"Authorization":"secret:%s"}}]`, url, mcpSecretARN)
	for _, name := range []string{"api", "llmstep", "validate", "invoke", "append"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := startFunction(t, name, env)
			select {
			case <-f.ready:
			case <-f.exited:
				t.Fatalf("%s exited (%v) with an unreadable secret header, output %q; want it to start", name, f.waitErr, f.out.String())
			case <-time.After(90 * time.Second):
				t.Fatalf("%s neither asked for an event nor exited", name)
			}
			// The log reaches the buffer through a pipe a moment later.
			out := f.out.String()
			for end := time.Now().Add(30 * time.Second); !strings.Contains(out, mcpSecretARN) && time.Now().Before(end); out = f.out.String() {
				time.Sleep(20 * time.Millisecond)
			}
			for _, want := range []string{"MCP server unusable", `MCP server \"docs\"`, "Authorization", mcpSecretARN, "ResourceNotFoundException"} {
				if !strings.Contains(out, want) {
					t.Errorf("%s started with output %q; want its warning to name %s", name, out, want)
				}
			}
		})
	}
}
