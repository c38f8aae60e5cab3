// Command api is the Lambda function behind the HTTP API (API.md): API
// Gateway's JWT authorizer checks the token, this function reads `sub`. It
// has the record, the tool catalogue, the artifacts in S3, Step Functions,
// and FailTurn's path for a dead execution (turn.Handlers.RecordFailure:
// the record, the catalogue, the audit log); no model and no A2A invoker.
package main

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/clientagent/clientagent/pkg/api"
	"github.com/clientagent/clientagent/pkg/auth"
	"github.com/clientagent/clientagent/pkg/lambdahttp"
	"github.com/clientagent/clientagent/pkg/platform"
	"github.com/clientagent/clientagent/pkg/platform/awsenv"
)

func main() {
	platform.Start(func(ctx context.Context, env *platform.Env) (any, error) {
		h, err := env.Handlers()
		if err != nil {
			return nil, err
		}
		cats, err := env.Catalogs(ctx)
		if err != nil {
			return nil, err
		}
		aws, err := awsenv.Load(ctx)
		if err != nil {
			return nil, err
		}
		arts, err := aws.Artifacts(env.Getenv)
		if err != nil {
			return nil, err
		}
		h.Catalogs, h.Audit = cats, aws.Audit(env.Getenv)
		server := &api.Server{
			Store:             h.Store,
			Artifacts:         arts,
			Executions:        sfn.NewFromConfig(aws.Config),
			StateMachineARN:   env.Getenv("STATE_MACHINE_ARN"),
			Catalogs:          cats,
			Auth:              auth.Gateway{Claims: lambdahttp.JWTClaims},
			Limits:            h.Limits,
			MaxUpload:         4 << 20, // binary bodies arrive base64-encoded within Lambda's 6 MB payload
			MaxText:           16000,
			RedirectArtifacts: true,
			Failures:          h,
			Cancels:           h,
			Events:            h.Events,
			Logger:            env.Logger,
		}
		return lambdahttp.New(server.Handler()).Handle, nil
	})
}
