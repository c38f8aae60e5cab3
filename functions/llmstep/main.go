// Command llmstep is the Lambda function of the turn state machine's LLMStep step
// (statemachine/turn.asl.json); the logic is turn.Handlers.LLMStep.
package main

import (
	"context"
	"log"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/clientagent/clientagent/pkg/platform"
)

func main() {
	p, err := platform.FromEnv(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	lambda.Start(p.Handlers.LLMStep)
}
