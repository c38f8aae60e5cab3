// Package mcpenv gives a Lambda function's platform.Env the reader of the
// MCP servers' secret headers: a header value "secret:<arn-or-name>" or
// "secret:<arn-or-name>#<field>" in CLIENTAGENT_MCP is read from AWS Secrets
// Manager (pkg/awssecrets) once per cold start, with the function's role.
// Every function that builds the tool catalogue or calls tools (api,
// llmstep, validate, append, invoke) loads it; it lives apart from
// pkg/platform.Env so that the functions that do neither (await, events)
// do not link the Secrets Manager client (docs/design.md §12 rule 1).
package mcpenv

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/clientagent/clientagent/pkg/awsconfig"
	"github.com/clientagent/clientagent/pkg/awssecrets"
	"github.com/clientagent/clientagent/pkg/mcp"
	"github.com/clientagent/clientagent/pkg/platform"
	"github.com/clientagent/clientagent/pkg/tool"
)

// Catalogs is env.Catalogs once Load has set the reader of the MCP
// servers' secret headers: the tool catalogue of a function that builds it.
func Catalogs(ctx context.Context, env *platform.Env) (*tool.Catalogs, error) {
	if err := Load(ctx, env); err != nil {
		return nil, err
	}
	return env.Catalogs(ctx)
}

// Load sets env.Secrets to a Secrets Manager reader when a server of
// CLIENTAGENT_MCP has a secret header, and leaves it alone otherwise (no
// AWS configuration is loaded then). Call it before env.Catalogs and
// invokeenv.Invoker, which read the secrets (Env.MCPServers). No request is made
// here. A configuration error (bad JSON, a stdio server) is returned as
// Env.MCPServers would return it.
func Load(ctx context.Context, env *platform.Env) error {
	if env.Secrets != nil {
		return nil
	}
	servers, err := mcp.LoadConfig(env.Getenv)
	if err != nil {
		return err
	}
	secrets, err := Secrets(ctx, servers)
	if err != nil {
		return err
	}
	if secrets != nil {
		env.Secrets = secrets
	}
	return nil
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
	return awssecrets.NewReader(secretsmanager.NewFromConfig(cfg)), nil
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
