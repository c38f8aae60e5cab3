// Command invoke is the Lambda function of the turn loop's Invoke step
// (statemachine/loop.asl.json); the logic is turn.Handlers.Invoke: the
// record, the tool catalogue, the A2A invoker with the artifacts in S3, and
// the audit log of executed calls. It has no model.
package main

import (
	"context"

	"github.com/clientagent/clientagent/pkg/platform"
	"github.com/clientagent/clientagent/pkg/platform/awsenv"
	"github.com/clientagent/clientagent/pkg/platform/invokeenv"
	"github.com/clientagent/clientagent/pkg/platform/mcpenv"
	"github.com/clientagent/clientagent/pkg/platform/toolenv"
	"github.com/clientagent/clientagent/pkg/turn/turnlambda"
)

func main() {
	platform.Start(func(ctx context.Context, env *platform.Env) (any, error) {
		h, err := env.Handlers()
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
		s3arts, err := aws.Artifacts(env.Getenv)
		if err != nil {
			return nil, err
		}
		arts, err := env.WithQuota(s3arts)
		if err != nil {
			return nil, err
		}
		if h.Invoker, err = invokeenv.Invoker(ctx, env, arts, servers); err != nil {
			return nil, err
		}
		h.Audit = aws.Audit(env.Getenv)
		return turnlambda.JSON(h.Invoke), nil
	})
}
