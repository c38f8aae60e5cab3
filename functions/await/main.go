// Command await is the Lambda function of the turn state machine's Await step
// (statemachine/turn.asl.json); the logic is turn.Handlers.Await.
package main

import "github.com/clientagent/clientagent/pkg/platform"

func main() {
	platform.StartLambda(func(p *platform.Lambda) any { return p.Handlers.Await })
}
