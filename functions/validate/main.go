// Command validate is the Lambda function of the turn loop's Validate step
// (statemachine/loop.asl.json); the logic is turn.Handlers.Validate: the
// record, the tool catalogue and the audit log of the user's decisions. It
// has no model and no A2A client. It is one of the two functions that check
// tool arguments against their schemas (pkg/schemacheck; api is the other).
package main

import (
	"context"

	"github.com/clientagent/clientagent/pkg/platform"
	"github.com/clientagent/clientagent/pkg/platform/awsenv"
	"github.com/clientagent/clientagent/pkg/platform/guardianenv"
	"github.com/clientagent/clientagent/pkg/platform/mcpenv"
	"github.com/clientagent/clientagent/pkg/platform/toolenv"
	"github.com/clientagent/clientagent/pkg/schemacheck"
	"github.com/clientagent/clientagent/pkg/turn/turnlambda"
)

func main() {
	schemacheck.Use() // this function checks tool arguments against their schemas
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
		aws, err := awsenv.Load(ctx)
		if err != nil {
			return nil, err
		}
		h.Audit = aws.Audit(env.Getenv)
		return turnlambda.JSON(h.Validate), nil
	})
}
