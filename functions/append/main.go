// Command append is the Lambda function of the turn state machine's Append step
// (statemachine/turn.asl.json); the logic is turn.Handlers.Append.
package main

import "github.com/clientagent/clientagent/pkg/platform"

func main() {
	platform.StartLambda(func(p *platform.Lambda) any { return p.Handlers.Append })
}
