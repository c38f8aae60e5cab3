package mcp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clientagent/clientagent/pkg/keepalive"
)

// clientInfo is how clientagent introduces itself to MCP servers.
var clientInfo = &sdk.Implementation{Name: "clientagent", Version: "1"}

// connect opens a session to server s. watch keeps the HTTP transport's
// standalone stream open, so the server can notify a kept session; a
// session for one listing or one call does not need it. The caller closes
// the session.
func connect(ctx context.Context, s ServerConfig, hc *http.Client, opts *sdk.ClientOptions, watch bool) (*sdk.ClientSession, error) {
	if s.Unusable != nil {
		return nil, fmt.Errorf("not configured: %w", s.Unusable)
	}
	if opts == nil {
		opts = &sdk.ClientOptions{}
	}
	if opts.ElicitationHandler == nil {
		// Every session advertises elicitation, as the calls' sessions do:
		// a server may offer some tools only to clients that can elicit.
		opts.ElicitationHandler = func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			return &sdk.ElicitResult{Action: "decline"}, nil
		}
	}
	if opts.Capabilities == nil {
		// No roots: clientagent has no file system to offer. Elicitation is
		// added when opts has a handler.
		opts.Capabilities = &sdk.ClientCapabilities{}
	}
	client := sdk.NewClient(clientInfo, opts)
	var t sdk.Transport
	if s.Stdio() {
		cmd := exec.Command(s.Command, s.Args...)
		cmd.Env = os.Environ()
		for k, v := range s.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stderr = io.Discard
		t = &sdk.CommandTransport{Command: cmd, TerminateDuration: time.Second}
	} else {
		if hc == nil {
			hc = keepalive.Client()
		}
		c := *hc
		base := c.Transport
		if base == nil {
			base = keepalive.Transport
		}
		c.Transport = headerTransport{base: base, headers: s.Headers}
		t = &sdk.StreamableClientTransport{Endpoint: s.URL, HTTPClient: &c, MaxRetries: -1, DisableStandaloneSSE: !watch}
	}
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		return nil, fmt.Errorf("connect to MCP server %s (%s): %w", s.Name, s.Endpoint(), err)
	}
	return cs, nil
}

// headerTransport adds a server's configured headers (its auth) to every
// request of its session.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.headers) == 0 {
		return t.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}
