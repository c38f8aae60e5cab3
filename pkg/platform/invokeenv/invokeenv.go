// Package invokeenv wires the invokers of the tools' calls: the A2A
// invoker (pkg/agents/a2acall) and, when MCP servers are configured, the
// MCP one, behind a tool.Router. It is apart from pkg/platform so that only
// what runs calls — the invoke function and the local stack — links the A2A
// client and gRPC (functions/deps_test.go). Like pkg/platform it holds no
// logic beyond wiring.
package invokeenv

import (
	"context"

	"github.com/clientagent/clientagent/pkg/agents/a2acall"
	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/mcp"
	"github.com/clientagent/clientagent/pkg/platform"
	"github.com/clientagent/clientagent/pkg/platform/toolenv"
	"github.com/clientagent/clientagent/pkg/tool"
)

// Router sends each call to the invoker of its kind: the A2A invoker,
// storing what specialists return in arts, and the MCP servers' when cfg
// lists any.
func Router(cfg toolenv.Config, arts artifact.Store) tool.Router {
	r := tool.Router{tool.KindA2A: a2acall.NewInvoker(a2acall.InvokerOptions{Artifacts: arts, HTTPClient: cfg.AgentClient,
		Timeout: cfg.InvokeTimeout, FileOrigins: cfg.FileOrigins, AllowPrivateFiles: cfg.AllowPrivateFiles, Files: cfg.Files,
		Logger: cfg.Logger})}
	if len(cfg.MCP) > 0 {
		r[tool.KindMCP] = mcp.NewInvoker(mcp.InvokerOptions{Servers: cfg.MCP, Artifacts: arts, Timeout: cfg.InvokeTimeout, Logger: cfg.Logger})
	}
	return r
}

// Invoker is the invoke function's invoker, from the environment env
// reads: the agent client of CLIENTAGENT_AGENT_AUTH and the file bounds
// (platform.FilesFromEnv), with servers, the MCP servers of
// CLIENTAGENT_MCP (pkg/platform/mcpenv.Servers).
func Invoker(ctx context.Context, env *platform.Env, arts artifact.Store, servers []mcp.ServerConfig) (tool.Router, error) {
	cfg := toolenv.FromEnv(env)
	cfg.MCP = servers
	var err error
	if cfg.AgentClient, err = env.AgentClient(ctx); err != nil {
		return nil, err
	}
	files, err := platform.FilesFromEnv(env.Getenv)
	if err != nil {
		return nil, err
	}
	cfg.Files = files.Limits
	return Router(cfg, arts), nil
}
