// Package lambdalog is the logger of the Lambda functions. It is apart from
// pkg/platform so that a function which builds nothing of the platform (the
// demo agents) links nothing of it.
package lambdalog

import (
	"log/slog"
	"os"
	"strings"
)

// New logs JSON to stdout at the level Lambda's log controls set
// (AWS_LAMBDA_LOG_LEVEL: TRACE, DEBUG, INFO, WARN, ERROR, FATAL; the
// stack sets it per environment), INFO when unset. Lambda drops records
// below that level anyway; not producing them saves the work.
func New(getenv func(string) string) *slog.Logger {
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
