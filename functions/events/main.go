// Command events is the Lambda function behind the events Function URL
// (InvokeMode RESPONSE_STREAM, docs/deploy.md): GET
// /v1/conversations/{cid}/events (docs/api/openapi.yaml) as Server-Sent Events, streamed
// as written, and no other route. API Gateway's HTTP API cannot stream,
// and no JWT authorizer stands in front of a Function URL, so the function
// checks the bearer token itself against the issuer and audiences of the
// HTTP API's authorizer (auth.JWKS: CLIENTAGENT_JWT_ISSUER,
// CLIENTAGENT_JWT_AUDIENCE). It has the record and the event log in Valkey
// and nothing else: no S3, no Step Functions, no model, no A2A invoker.
package main

import (
	"context"
	"fmt"

	"github.com/clientagent/clientagent/pkg/api"
	"github.com/clientagent/clientagent/pkg/auth"
	"github.com/clientagent/clientagent/pkg/platform"
)

func main() {
	platform.Start(func(ctx context.Context, env *platform.Env) (any, error) {
		h, err := env.Handlers()
		if err != nil {
			return nil, err
		}
		store, ok := h.Store.(api.Streams)
		if !ok {
			return nil, fmt.Errorf("the store %T cannot count streams", h.Store)
		}
		jwks, err := auth.JWKSFromEnv(env.Getenv)
		if err != nil {
			return nil, err
		}
		jwks.Logger = env.Logger
		server := &api.Server{
			Store:  h.Store,
			Events: h.Events,
			// At most api.DefaultMaxStreams open streams per user, counted
			// in Valkey across instances (429 past it).
			Streams: store,
			Auth:    jwks,
			Limits:  h.Limits,
			Logger:  env.Logger,
		}
		return platform.StreamingURL(server.EventsHandler()), nil
	})
}
