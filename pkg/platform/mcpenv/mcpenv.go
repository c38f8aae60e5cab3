// Package mcpenv gives a Lambda function the MCP servers of
// CLIENTAGENT_MCP with their secret headers read: a header value
// "secret:<arn-or-name>" or "secret:<arn-or-name>#<field>" is read from AWS
// Secrets Manager (pkg/awssecrets) once per cold start, with the
// function's role. Every function that builds the tool catalogue or calls
// tools (api, llmstep, validate, append, invoke) asks for them; it lives
// apart from pkg/platform.Env so that the functions that do neither
// (await, events) do not link the Secrets Manager client nor the MCP SDK
// (docs/design.md §12 rule 1).
package mcpenv

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/clientagent/clientagent/pkg/awsconfig"
	"github.com/clientagent/clientagent/pkg/awssecrets"
	"github.com/clientagent/clientagent/pkg/mcp"
	"github.com/clientagent/clientagent/pkg/platform"
)

// Servers are the servers of CLIENTAGENT_MCP with their secret headers
// read, for toolenv.Catalogs and invokeenv.Invoker. A stdio server is an
// error: a function cannot keep a child process (mcp.ErrStdioOnLambda). A
// Secrets Manager reader is made only when a header names a secret, and no
// request is made before one is read.
func Servers(ctx context.Context, env *platform.Env) ([]mcp.ServerConfig, error) {
	servers, err := mcp.LoadConfig(env.Getenv)
	if err != nil {
		return nil, err
	}
	secrets, err := Secrets(ctx, servers)
	if err != nil {
		return nil, err
	}
	return Resolve(ctx, env.Logger, servers, secrets)
}

// Resolve reads the secret headers of servers with secrets (nil: a secret
// header is a configuration error). A server whose secret cannot be read
// does not stop the function: it is kept as unusable (mcp.ResolveEach),
// so its tools are unavailable and a call of one fails saying why, while
// every other tool works; the next cold start reads the secret again.
func Resolve(ctx context.Context, log *slog.Logger, servers []mcp.ServerConfig, secrets mcp.Secrets) ([]mcp.ServerConfig, error) {
	if secrets == nil {
		// No reader at all is the function's wiring, not a secret: an error.
		servers, err := mcp.Resolve(ctx, servers, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", mcp.EnvVar, err)
		}
		return servers, nil
	}
	servers = mcp.ResolveEach(ctx, servers, secrets)
	for _, s := range servers {
		if s.Unusable != nil && log != nil {
			log.ErrorContext(ctx, "MCP server unusable: its tools are unavailable", "server", s.Name, "error", s.Unusable.Error())
		}
	}
	return servers, nil
}

// Secrets is a Secrets Manager reader with the default AWS configuration
// when a header of servers names a secret, or nil. The local stack uses it
// too (cmd/clientagent), with the caller's AWS credentials.
func Secrets(ctx context.Context, servers []mcp.ServerConfig) (mcp.Secrets, error) {
	if !namesSecret(servers) {
		return nil, nil
	}
	cfg, err := awsconfig.Load(ctx, awsconfig.Options{})
	if err != nil {
		return nil, fmt.Errorf("%s: secret headers: load AWS config: %w", mcp.EnvVar, err)
	}
	return awssecrets.NewReader(awssecrets.NewClient(cfg)), nil
}

// namesSecret reports whether a header of servers names a secret.
func namesSecret(servers []mcp.ServerConfig) bool {
	for _, s := range servers {
		for _, v := range s.Headers {
			if strings.HasPrefix(v, mcp.SecretPrefix) {
				return true
			}
		}
	}
	return false
}
