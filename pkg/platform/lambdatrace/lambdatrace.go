// Package lambdatrace sets up a Lambda function's tracing (issue 16,
// docs/deploy.md): the tracer provider of the function's OTEL_* variables,
// signing for X-Ray's OTLP endpoint, and a handler wrapper exporting each
// invocation's spans before Lambda freezes the process.
package lambdatrace

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"go.opentelemetry.io/otel/attribute"

	"github.com/clientagent/clientagent/pkg/awsconfig"
	"github.com/clientagent/clientagent/pkg/telemetry"
)

// Tracing is the tracer provider of a Lambda function: telemetry.FromEnv, with service.name the function's
// name unless OTEL_SERVICE_NAME says otherwise. When the traces endpoint
// is X-Ray's OTLP endpoint (https://xray.<region>.amazonaws.com/v1/traces)
// the exporter signs its requests with SigV4 (service xray) with the
// function role's credentials: that endpoint accepts nothing else, and the
// role needs xray:PutTraceSegments. Without an endpoint it is the no-op
// provider and costs nothing.
func Tracing(ctx context.Context, getenv func(string) string) (*telemetry.Tracing, error) {
	name := getenv("AWS_LAMBDA_FUNCTION_NAME")
	opts := telemetry.Options{ServiceName: name}
	if name != "" {
		opts.Attributes = []attribute.KeyValue{attribute.String("faas.name", name), attribute.String("cloud.provider", "aws"), attribute.String("cloud.region", getenv("AWS_REGION"))}
	}
	if region, ok := telemetry.XRayRegion(telemetry.TracesEndpoint(getenv)); ok {
		cfg, err := awsconfig.Load(ctx, awsconfig.Options{Region: region})
		if err != nil {
			return nil, fmt.Errorf("X-Ray OTLP endpoint: aws config: %w", err)
		}
		opts.HTTPClient = telemetry.SigV4Client(cfg.Credentials, region, telemetry.XRayService)
	}
	t, err := telemetry.FromEnv(ctx, getenv, opts)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	return t, nil
}

// FlushEach returns Lambda handler h (any handler lambda.Start takes) so
// that each invocation exports its spans before it returns: Lambda freezes
// the process between invocations, so spans left in the batch would go out
// late or never. With tracing off it returns h as it is. A streaming
// handler (platform.StreamingURL) must not be passed: the wrapper reads the
// whole response.
func FlushEach(h any, t *telemetry.Tracing) any {
	if !t.Enabled() {
		return h
	}
	return flushing{next: lambda.NewHandler(h), tracing: t}
}

// flushTimeout bounds the export at the end of an invocation.
const flushTimeout = 2 * time.Second

type flushing struct {
	next    lambda.Handler
	tracing *telemetry.Tracing
}

func (f flushing) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	out, err := f.next.Invoke(ctx, payload)
	// The export gets its own short deadline: the invocation's may be spent.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer cancel()
	if ferr := f.tracing.Flush(fctx); ferr != nil {
		// Spans are worth less than the answer: log and go on.
		slog.Default().WarnContext(ctx, "export spans", "error", ferr.Error())
	}
	return out, err
}
