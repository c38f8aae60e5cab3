// Command llmstep is the Lambda function of the turn loop's LLMStep
// step (statemachine/loop.asl.json) and the turn's FailTurn (turn.asl.json), and the target of the
// stack's rule on execution status changes; the logic is
// turn.Handlers.LLMStep and turnlambda.ExecutionEnded: the record, the
// tool catalogue, the model (pkg/llm/llmconfig) and the audit log (FailTurn
// closes a batch). It has no A2A invoker.
package main

import (
	"context"

	"github.com/clientagent/clientagent/pkg/llm/llmconfig"
	"github.com/clientagent/clientagent/pkg/platform"
	"github.com/clientagent/clientagent/pkg/platform/awsenv"
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
		if h.LLM, _, err = llmconfig.FromEnvContext(ctx, env.Getenv); err != nil {
			return nil, err
		}
		aws, err := awsenv.Load(ctx)
		if err != nil {
			return nil, err
		}
		h.Audit = aws.Audit(env.Getenv)
		return turnlambda.LLMStepOrEvent(h), nil
	})
}
