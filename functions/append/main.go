// Command append is the Lambda function of the turn state machine's Append step
// (statemachine/turn.asl.json); the logic is turn.Handlers.Append, which
// reads the record and the tool catalogue (the agent cards, cached in
// Valkey) and writes the record.
package main

import (
	"context"

	"github.com/clientagent/clientagent/pkg/platform"
	"github.com/clientagent/clientagent/pkg/platform/guardianenv"
	"github.com/clientagent/clientagent/pkg/platform/mcpenv"
	"github.com/clientagent/clientagent/pkg/turn/turnlambda"
)

func main() {
	platform.Start(func(ctx context.Context, env *platform.Env) (any, error) {
		h, err := env.Handlers()
		if err != nil {
			return nil, err
		}
		// The guardian (issue 19): nil unless CLIENTAGENT_GUARDIAN is set.
		if h.Guardian, err = guardianenv.Load(ctx, env); err != nil {
			return nil, err
		}
		// MCP servers' secret headers (CLIENTAGENT_MCP): read from Secrets Manager.
		if err = mcpenv.Load(ctx, env); err != nil {
			return nil, err
		}
		if h.Catalogs, err = env.Catalogs(ctx); err != nil {
			return nil, err
		}
		return turnlambda.JSON(h.Append), nil
	})
}
