// Command api is the Lambda function behind the HTTP API (API.md): API
// Gateway's JWT authorizer checks the token, this function reads `sub`.
package main

import (
	"context"
	"log"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/clientagent/clientagent/pkg/api"
	"github.com/clientagent/clientagent/pkg/auth"
	"github.com/clientagent/clientagent/pkg/lambdahttp"
	"github.com/clientagent/clientagent/pkg/platform"
)

func main() {
	ctx := context.Background()
	p, err := platform.FromEnv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	server := &api.Server{
		Store:             p.Store,
		Artifacts:         p.Artifacts,
		Executions:        sfn.NewFromConfig(cfg),
		StateMachineARN:   os.Getenv("STATE_MACHINE_ARN"),
		Catalogs:          p.Catalogs,
		Auth:              auth.Gateway{Claims: lambdahttp.JWTClaims},
		Limits:            p.Handlers.Limits,
		MaxUpload:         4 << 20, // binary bodies arrive base64-encoded within Lambda's 6 MB payload
		MaxText:           16000,
		RedirectArtifacts: true,
		Failures:          p.Handlers,
		Logger:            p.Logger,
	}
	lambda.Start(lambdahttp.New(server.Handler()).Handle)
}
