package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/clientagent/clientagent/pkg/agents"
	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/artifact/s3store"
	"github.com/clientagent/clientagent/pkg/audit"
	"github.com/clientagent/clientagent/pkg/llm/llmconfig"
	"github.com/clientagent/clientagent/pkg/record/valkey"
)

// Lambda is what every Lambda function of the platform builds once, at
// cold start, from its environment:
//
//	VALKEY_URL           rediss://… of the ElastiCache Serverless cache (required)
//	ARTIFACT_BUCKET      the S3 bucket of artifacts (required)
//	AUDIT_BUCKET         the S3 bucket of the audit log (versioned, never expires)
//	CLIENTAGENT_AGENTS   specialist base URLs, comma-separated
//	CLIENTAGENT_WORKFLOWS_DIR   a folder of workflow templates (default: the built-in examples)
//	CLIENTAGENT_ALLOW_PRIVATE_FILE_URLS=1  let specialists return files on private addresses
//	CLIENTAGENT_LLM, CLIENTAGENT_MODEL, OPENAI_BASE_URL …  the model (pkg/llm/llmconfig)
//	CLIENTAGENT_MAX_LLM_CALLS …                            the turn limits (LimitsFromEnv)
type Lambda struct {
	*Platform
	Artifacts artifact.Store
	Logger    *slog.Logger
}

// FromEnv builds the platform for a Lambda function.
func FromEnv(ctx context.Context) (*Lambda, error) {
	log := LambdaLogger(os.Getenv)
	url := os.Getenv("VALKEY_URL")
	bucket := os.Getenv("ARTIFACT_BUCKET")
	if url == "" || bucket == "" {
		return nil, errors.New("VALKEY_URL and ARTIFACT_BUCKET must be set")
	}
	rdb, _, err := valkey.Open(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("valkey: %w", err)
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("aws config: %w", err)
	}
	s3c := s3.NewFromConfig(awsCfg)
	arts := s3store.New(s3c, bucket, os.Getenv("ARTIFACT_PREFIX"))
	var auditLog audit.Log
	if b := os.Getenv("AUDIT_BUCKET"); b != "" {
		auditLog = audit.S3{API: s3c, Bucket: b}
	}
	model, _, err := llmconfig.FromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	limits, err := LimitsFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	p, err := New(Config{
		Agents:          agents.ParseAgentList(os.Getenv("CLIENTAGENT_AGENTS")),
		Limits:          limits,
		InvokeTimeout:   5 * time.Minute,
		PublicFilesOnly: os.Getenv("CLIENTAGENT_ALLOW_PRIVATE_FILE_URLS") == "",
		Audit:           auditLog,
		WorkflowsDir:    os.Getenv("CLIENTAGENT_WORKFLOWS_DIR"),
		Logger:          log,
	}, rdb, arts, model)
	if err != nil {
		return nil, err
	}
	return &Lambda{Platform: p, Artifacts: arts, Logger: log}, nil
}

// LambdaLogger logs JSON to stdout at the level Lambda's log controls set
// (AWS_LAMBDA_LOG_LEVEL: TRACE, DEBUG, INFO, WARN, ERROR, FATAL; the
// stack sets it per environment), INFO when unset. Lambda drops records
// below that level anyway; not producing them saves the work.
func LambdaLogger(getenv func(string) string) *slog.Logger {
	level := slog.LevelInfo
	switch strings.ToUpper(getenv("AWS_LAMBDA_LOG_LEVEL")) {
	case "TRACE", "DEBUG":
		level = slog.LevelDebug
	case "WARN":
		level = slog.LevelWarn
	case "ERROR", "FATAL":
		level = slog.LevelError
	}
	return slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: level}))
}

// StartLambda builds the platform from the environment once, at cold start,
// and serves the handler handler picks from it (a turn.Handlers method).
// It does not return.
func StartLambda(handler func(*Lambda) any) {
	p, err := FromEnv(context.Background())
	if err != nil {
		slog.Error("cold start", "error", err)
		os.Exit(1)
	}
	lambda.Start(handler(p))
}
