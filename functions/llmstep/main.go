// Command llmstep is the Lambda function of the turn state machine's LLMStep
// and FailTurn steps (statemachine/turn.asl.json), and the target of the
// stack's rule on execution status changes; the logic is
// turn.Handlers.LLMStep and turn.Handlers.ExecutionEnded.
package main

import (
	"github.com/clientagent/clientagent/pkg/platform"
	"github.com/clientagent/clientagent/pkg/turn"
)

func main() {
	platform.StartLambda(func(p *platform.Lambda) any { return turn.LLMStepOrEvent(p.Handlers) })
}
