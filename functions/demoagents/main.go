// Command demoagents is the Lambda that serves the demo A2A specialists
// (pkg/demoagents) behind an API Gateway HTTP API or a Function URL.
//
// Environment:
//
//	PUBLIC_URL              external base URL of this function (agent card URLs); empty: taken from each request's Host
//	PUBLICATIONS_FILE       optional JSONL file for the publish ledger (on Lambda only /tmp is writable)
//	ARTIFACT_FETCH_TIMEOUT  timeout for fetching input artifacts from their signed URLs (Go duration, default 30s)
//	ARTIFACT_MAX_BYTES      largest input artifact fetched (default 20 MiB)
package main

import (
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/clientagent/clientagent/pkg/demoagents"
	"github.com/clientagent/clientagent/pkg/lambdahttp"
)

func main() {
	logger := slog.New(slog.NewJSONHandler(os.Stdout, nil))
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
	ledger := demoagents.NewMemoryLedger()
	if p := os.Getenv("PUBLICATIONS_FILE"); p != "" {
		l, err := demoagents.NewLedger(p)
		if err != nil {
			logger.Error("open publications file", "error", err)
			os.Exit(1)
		}
		ledger = l
	}
	h := demoagents.Handler(os.Getenv("PUBLIC_URL"), demoagents.Options{
		HTTPClient:    &http.Client{Timeout: timeout},
		Publications:  ledger,
		MaxInputBytes: maxBytes,
		Logger:        logger,
	})
	lambda.Start(lambdahttp.New(h).Handle)
}
