package lambdalog

import (
	"log/slog"
	"testing"
)

// Issue 7: the stack sets Lambda's application log level per environment
// (AWS_LAMBDA_LOG_LEVEL); the functions log at that level.
func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env  string
		want slog.Level
	}{
		{"", slog.LevelInfo}, {"DEBUG", slog.LevelDebug}, {"trace", slog.LevelDebug},
		{"INFO", slog.LevelInfo}, {"WARN", slog.LevelWarn}, {"ERROR", slog.LevelError}, {"FATAL", slog.LevelError},
	}
	for _, tt := range tests {
		l := New(func(k string) string {
			if k == "AWS_LAMBDA_LOG_LEVEL" {
				return tt.env
			}
			return ""
		})
		for _, lv := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError} {
			if got, want := l.Enabled(t.Context(), lv), lv >= tt.want; got != want {
				t.Errorf("New(%q).Enabled(%v) = %v, want %v", tt.env, lv, got, want)
			}
		}
	}
}
