package platform

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/agentauth"
	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/livepub"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/platform/lambdalog"
	"github.com/clientagent/clientagent/pkg/platform/lambdatrace"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/record/valkey/valkeyiam"
	"github.com/clientagent/clientagent/pkg/telemetry"
	"github.com/clientagent/clientagent/pkg/turn"
)

// flushLive posts the live events an invocation queued before it returns:
// a function is frozen between invocations, and its queue with it.
type flushLive struct {
	next lambda.Handler
	live *livepub.Publisher
}

// liveFlushTimeout bounds that wait; what is left is posted at the next
// invocation (or lost with the instance: clients re-read the turn).
const liveFlushTimeout = 2 * time.Second

func (f flushLive) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	out, err := f.next.Invoke(ctx, payload)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), liveFlushTimeout)
	defer cancel()
	if ferr := f.live.Flush(fctx); ferr != nil {
		slog.Default().WarnContext(ctx, "live events not flushed", "error", ferr.Error())
	}
	return out, err
}

// InvokeTimeout bounds one specialist call of a Lambda function (the
// invoke function's own timeout is longer: infra/).
const InvokeTimeout = 5 * time.Minute

// Env builds, at a Lambda function's cold start, the parts of the platform
// that the function's role uses, and nothing else (docs/design.md §12 rule 1): a
// step's turn.Handlers get only the fields its handler reaches. It reads:
//
//	VALKEY_URL           rediss://… of the ElastiCache Serverless cache (required)
//	VALKEY_AUTH=iam, VALKEY_USER, VALKEY_CACHE_NAME  sign in with IAM auth tokens (valkeyiam.FromEnv)
//	CLIENTAGENT_AGENT_AUTH=sigv4   sign card fetches and A2A calls (agentauth.ClientFromEnv)
//	CLIENTAGENT_CONVERSATION_QUOTA, CLIENTAGENT_MAX_FILE_SIZE, CLIENTAGENT_FILE_TIMEOUT …  file bounds (FilesFromEnv)
//	CLIENTAGENT_MAX_LLM_CALLS …    the turn limits (LimitsFromEnv)
//	CLIENTAGENT_GUARDIAN …         the guardian, in the functions that check (pkg/platform/guardianenv)
//	AWS_LAMBDA_LOG_LEVEL           the log level (pkg/platform/lambdalog)
//	OTEL_EXPORTER_OTLP_TRACES_ENDPOINT …  one trace per turn (pkg/platform/lambdatrace)
//
// The S3 pieces (artifacts, the audit log) are pkg/platform/awsenv's, the
// model is pkg/llm/llmconfig's, the tool catalogue (CLIENTAGENT_AGENTS,
// CLIENTAGENT_MCP, CLIENTAGENT_WORKFLOWS_DIR) pkg/platform/toolenv's with
// pkg/platform/mcpenv's servers, and the invoker pkg/platform/invokeenv's,
// so that a function without them does not link them. An Env is for one
// goroutine: the cold start.
type Env struct {
	Getenv func(string) string
	Logger *slog.Logger
	// Tracing is the function's tracer provider (Start sets it from
	// OTEL_*: lambdatrace.Tracing); nil: none.
	Tracing *telemetry.Tracing

	rdb         redis.UniversalClient
	agentClient *http.Client
	agentAuth   bool               // agentClient was made
	live        *livepub.Publisher // CLIENTAGENT_LIVE_*: nil without an Event API
}

// NewEnv is the Env of the environment getenv reads.
func NewEnv(getenv func(string) string) *Env {
	return &Env{Getenv: getenv, Logger: lambdalog.New(getenv)}
}

// Valkey is the client of VALKEY_URL, made once. It does not contact the
// server: a store that is down at cold start is the first step's
// TransientError, which the state machine retries, not a function that
// cannot start.
func (e *Env) Valkey() (redis.UniversalClient, error) {
	if e.rdb != nil {
		return e.rdb, nil
	}
	u := e.Getenv("VALKEY_URL")
	if u == "" {
		return nil, fmt.Errorf("VALKEY_URL must be set")
	}
	// On AWS the stack sets VALKEY_AUTH=iam: each connection signs in as
	// the function's own ElastiCache user with an IAM token.
	opts, err := valkeyiam.FromEnv(context.Background(), e.Getenv)
	if err != nil {
		return nil, err
	}
	rdb, err := valkey.NewClient(u, opts...)
	if err != nil {
		return nil, err
	}
	e.rdb = rdb
	return rdb, nil
}

// Handlers are the step handlers with what every step uses: the record
// store in Valkey, the turn limits and the logger. The caller adds what
// its role's handler reaches (Catalogs, Audit, LLM, the invoker of
// pkg/platform/invokeenv); the rest
// stays nil.
func (e *Env) Handlers() (*turn.Handlers, error) {
	rdb, err := e.Valkey()
	if err != nil {
		return nil, err
	}
	limits, err := LimitsFromEnv(e.Getenv)
	if err != nil {
		return nil, err
	}
	prices, err := llm.LoadPrices(e.Getenv("CLIENTAGENT_PRICES"))
	if err != nil {
		return nil, fmt.Errorf("CLIENTAGENT_PRICES: %w", err)
	}
	store := valkey.New(rdb, valkey.Options{})
	h := NewHandlers(store, HandlerOptions{Limits: limits, CallTimeout: InvokeTimeout, Prices: prices, Logger: e.Logger})
	h.Tracing = e.Tracing
	if e.live == nil {
		if e.live, err = livepub.FromEnv(context.Background(), e.Getenv, store, e.Logger); err != nil {
			return nil, err
		}
	}
	if e.live != nil {
		h.Live = e.live
	}
	return h, nil
}

// Live is the publisher of live events to the deployment's AppSync Events
// API (livepub.FromEnv; nil without one), made by Handlers.
func (e *Env) Live() *livepub.Publisher { return e.live }

// WithQuota bounds arts to CLIENTAGENT_CONVERSATION_QUOTA bytes per
// conversation, counted in Valkey (FilesFromEnv): the functions that store
// files (api for uploads, invoke for specialists' files) wrap their store
// with it.
func (e *Env) WithQuota(arts artifact.Store) (artifact.Store, error) {
	files, err := FilesFromEnv(e.Getenv)
	if err != nil {
		return nil, err
	}
	rdb, err := e.Valkey()
	if err != nil {
		return nil, err
	}
	return files.WithQuota(arts, rdb, 0), nil
}

// AgentClient is the HTTP client of card fetches and A2A calls that
// CLIENTAGENT_AGENT_AUTH asks for (nil: Go's default), made once.
func (e *Env) AgentClient(ctx context.Context) (*http.Client, error) {
	if !e.agentAuth {
		c, err := agentauth.ClientFromEnv(ctx, e.Getenv)
		if err != nil {
			return nil, err
		}
		e.agentClient, e.agentAuth = c, true
	}
	return e.agentClient, nil
}

// Start builds a function's handler once, at cold start, from the
// process's environment, and serves it with lambda.Start. A handler that
// cannot be built (a configuration error) is logged, and the process
// exits: Lambda reports Runtime.ExitError. It does not return.
func Start(build func(ctx context.Context, env *Env) (any, error)) {
	env := NewEnv(os.Getenv)
	slog.SetDefault(env.Logger)
	var err error
	if env.Tracing, err = lambdatrace.Tracing(context.Background(), env.Getenv); err != nil {
		env.Logger.Error("cold start", "error", err)
		os.Exit(1)
	}
	h, err := build(context.Background(), env)
	if err != nil {
		env.Logger.Error("cold start", "error", err)
		os.Exit(1)
	}
	if _, streaming := h.(func(context.Context, *events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error)); !streaming {
		h = lambdatrace.FlushEach(h, env.Tracing)
		if env.live != nil {
			h = flushLive{next: lambda.NewHandler(h), live: env.live}
		}
	}
	lambda.Start(h)
}
