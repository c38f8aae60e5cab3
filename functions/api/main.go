// Command api is the Lambda function behind the HTTP API (docs/api/openapi.yaml): API
// Gateway's JWT authorizer checks the token, this function reads `sub`. It
// has the record, the tool catalogue, the artifacts in S3, Step Functions,
// and FailTurn's path for a dead execution (turn.Handlers.RecordFailure:
// the record, the catalogue, the audit log); no model and no A2A invoker.
// It also serves clientagent as an A2A agent (pkg/a2aserver) at /v1/a2a,
// behind the same JWT authorizer, as a client of this same API in process.
package main

import (
	"context"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/clientagent/clientagent/pkg/a2aserver"
	"github.com/clientagent/clientagent/pkg/api"
	"github.com/clientagent/clientagent/pkg/auth"
	"github.com/clientagent/clientagent/pkg/lambdahttp"
	"github.com/clientagent/clientagent/pkg/livepub"
	"github.com/clientagent/clientagent/pkg/platform"
	"github.com/clientagent/clientagent/pkg/platform/awsenv"
	"github.com/clientagent/clientagent/pkg/platform/mcpenv"
	"github.com/clientagent/clientagent/pkg/platform/toolenv"
	"github.com/clientagent/clientagent/pkg/schemacheck"
)

func main() {
	schemacheck.Use() // this function checks tool arguments against their schemas
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
		cats, err := toolenv.Catalogs(ctx, env, servers)
		if err != nil {
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
			Live:              h.Live,
			Tracing:           env.Tracing,
			Logger:            env.Logger,
		}
		// Where clients subscribe when the stack has an AppSync Events API
		// (GET /v1/info; docs/deploy.md "Live events on AWS").
		if lc, ok, err := livepub.ConfigFromEnv(env.Getenv); err != nil {
			return nil, err
		} else if ok {
			info := api.DefaultInfo
			info.Events = &api.EventsInfo{Delivery: "appsync", RealtimeURL: lc.RealtimeURL(), Host: lc.Host(), Namespace: lc.Namespace}
			server.Info = &info
		}
		rdb, err := env.Valkey()
		if err != nil {
			return nil, err
		}
		// API Gateway ends a request after 30 s and buffers responses: a
		// blocking message/send answers a working task after 20 s (the
		// caller polls tasks/get), and the card offers no streaming.
		a2a := (&a2aserver.Server{API: server.Handler(), Auth: server.Auth, Catalogs: cats, Redis: rdb,
			Path: "/v1/a2a", MaxWait: 20 * time.Second, Logger: env.Logger}).Handler()
		mux := http.NewServeMux()
		mux.Handle("/v1/a2a", a2a)
		mux.Handle("/v1/a2a/", a2a)
		mux.Handle("/", server.Handler())
		return lambdahttp.New(mux).Handle, nil
	})
}
