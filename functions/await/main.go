// Command await is the Lambda function of the turn state machine's Await step
// (statemachine/turn.asl.json); the logic is turn.Handlers.Await, which
// reads and writes the record in Valkey and nothing else.
package main

import (
	"context"

	"github.com/clientagent/clientagent/pkg/platform"
	"github.com/clientagent/clientagent/pkg/turn/turnlambda"
)

func main() {
	platform.Start(func(ctx context.Context, env *platform.Env) (any, error) {
		h, err := env.Handlers()
		if err != nil {
			return nil, err
		}
		return turnlambda.JSON(h.Await), nil
	})
}
