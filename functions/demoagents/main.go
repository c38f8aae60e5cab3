// Command demoagents is the Lambda that serves the demo A2A specialists
// (pkg/demoagents) behind an API Gateway HTTP API or a Function URL.
//
// Environment:
//
//	PUBLIC_URL              external base URL of this function (agent card URLs); empty: taken from each request's Host
//	VALKEY_AUTH=iam, VALKEY_USER, VALKEY_CACHE_NAME  sign in to ElastiCache with IAM auth tokens (pkg/record/valkey/valkeyiam)
//	VALKEY_URL              optional redis:// or rediss:// URL (cluster=true for a cluster); when set, A2A tasks
//	                        and the publish ledger live in Valkey, so an input-required task may be continued on
//	                        any instance and a call id publishes once across instances
//	TASK_TTL                how long a task stays in Valkey after its last change (Go duration, default 24h)
//	PUBLICATIONS_FILE       optional JSONL file for the publish ledger without VALKEY_URL (on Lambda only /tmp is
//	                        writable; it holds per instance only)
//	ARTIFACT_FETCH_TIMEOUT  timeout for fetching input artifacts from their signed URLs (Go duration, default 30s)
//	ARTIFACT_MAX_BYTES      largest input artifact fetched (default 20 MiB)
package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/demoagents"
	"github.com/clientagent/clientagent/pkg/lambdahttp"
	"github.com/clientagent/clientagent/pkg/platform/lambdalog"
	"github.com/clientagent/clientagent/pkg/platform/lambdatrace"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/record/valkey/valkeyiam"
)

func main() {
	logger := lambdalog.New(os.Getenv)
	slog.SetDefault(logger)

	timeout := 30 * time.Second
	if v := os.Getenv("ARTIFACT_FETCH_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			logger.Error("bad ARTIFACT_FETCH_TIMEOUT", "value", v, "error", err)
			os.Exit(1)
		}
		timeout = d
	}
	var maxBytes int64
	if v := os.Getenv("ARTIFACT_MAX_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			logger.Error("bad ARTIFACT_MAX_BYTES", "value", v, "error", err)
			os.Exit(1)
		}
		maxBytes = n
	}
	var taskTTL time.Duration
	if v := os.Getenv("TASK_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			logger.Error("bad TASK_TTL", "value", v, "error", err)
			os.Exit(1)
		}
		taskTTL = d
	}
	ledger := demoagents.NewMemoryLedger()
	var rdb redis.UniversalClient
	if u := os.Getenv("VALKEY_URL"); u != "" {
		// The client lives as long as the Lambda instance; it is never closed.
		opts, err := valkeyiam.FromEnv(context.Background(), os.Getenv)
		if err != nil {
			logger.Error("valkey auth", "error", err)
			os.Exit(1)
		}
		c, _, err := valkey.Open(context.Background(), u, opts...)
		if err != nil {
			logger.Error("open valkey", "error", err)
			os.Exit(1)
		}
		rdb = c
		ledger = demoagents.NewRedisLedger(rdb)
	} else if p := os.Getenv("PUBLICATIONS_FILE"); p != "" {
		l, err := demoagents.NewLedger(p)
		if err != nil {
			logger.Error("open publications file", "error", err)
			os.Exit(1)
		}
		ledger = l
	}
	// A2A calls from a turn carry its traceparent; with OTEL_* set the
	// agents' server spans join the turn's trace.
	tracing, err := lambdatrace.Tracing(context.Background(), os.Getenv)
	if err != nil {
		logger.Error("tracing", "error", err)
		os.Exit(1)
	}
	h := demoagents.Handler(os.Getenv("PUBLIC_URL"), demoagents.Options{
		HTTPClient:    &http.Client{Timeout: timeout},
		Publications:  ledger,
		Redis:         rdb,
		TaskTTL:       taskTTL,
		MaxInputBytes: maxBytes,
		Tracing:       tracing,
		Logger:        logger,
	})
	lambda.Start(lambdatrace.FlushEach(lambdahttp.New(h).Handle, tracing))
}
