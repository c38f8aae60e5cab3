// Command append is the Lambda function of the turn loop's Append step
// (statemachine/loop.asl.json); the logic is turn.Handlers.Append, which
// reads the record and the tool catalogue (the agent cards, cached in
// Valkey) and writes the record.
package main

import (
	"context"

	"github.com/clientagent/clientagent/pkg/platform"
	"github.com/clientagent/clientagent/pkg/platform/guardianenv"
	"github.com/clientagent/clientagent/pkg/platform/mcpenv"
	"github.com/clientagent/clientagent/pkg/platform/toolenv"
	"github.com/clientagent/clientagent/pkg/turn/turnlambda"
)

func main() {
	platform.Start(func(ctx context.Context, env *platform.Env) (any, error) {
		h, err := guardianenv.Handlers(ctx, env) // the guardian (issue 19) of CLIENTAGENT_GUARDIAN
		if err != nil {
			return nil, err
		}
		// The catalogue, with the MCP servers' secret headers read from Secrets Manager.
		servers, err := mcpenv.Servers(ctx, env)
		if err != nil {
			return nil, err
		}
		if h.Catalogs, err = toolenv.Catalogs(ctx, env, servers); err != nil {
			return nil, err
		}
		return turnlambda.JSON(h.Append), nil
	})
}
