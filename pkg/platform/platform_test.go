package platform

import (
	"log/slog"
	"testing"
	"time"
)

func TestLimitsFromEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		check   func(t *testing.T, maxCalls, budget, conc int, await time.Duration)
		wantErr bool
	}{
		{"defaults are the spec's", nil, func(t *testing.T, maxCalls, budget, conc int, await time.Duration) {
			if maxCalls != 12 || await != 24*time.Hour {
				t.Errorf("defaults = %d calls, await %s; want 12 and 24h", maxCalls, await)
			}
		}, false},
		{"overrides", map[string]string{"CLIENTAGENT_MAX_LLM_CALLS": "5", "CLIENTAGENT_TOKEN_BUDGET": "9000", "CLIENTAGENT_MAX_CONCURRENCY": "2", "CLIENTAGENT_AWAIT_TIMEOUT": "30m"},
			func(t *testing.T, maxCalls, budget, conc int, await time.Duration) {
				if maxCalls != 5 || budget != 9000 || conc != 2 || await != 30*time.Minute {
					t.Errorf("LimitsFromEnv() = %d %d %d %s, want 5 9000 2 30m", maxCalls, budget, conc, await)
				}
			}, false},
		{"not a number", map[string]string{"CLIENTAGENT_MAX_LLM_CALLS": "many"}, nil, true},
		{"negative", map[string]string{"CLIENTAGENT_TOKEN_BUDGET": "-1"}, nil, true},
		{"bad duration", map[string]string{"CLIENTAGENT_AWAIT_TIMEOUT": "soon"}, nil, true},
		{"too short", map[string]string{"CLIENTAGENT_AWAIT_TIMEOUT": "10ms"}, nil, true},
		{"bad turn timeout", map[string]string{"CLIENTAGENT_TURN_TIMEOUT": "-5m"}, nil, true},
		{"bad failure cap", map[string]string{"CLIENTAGENT_MAX_FAILURES": "x"}, nil, true},
	}
	// Seed 004 budgets (issue 12): the turn's wall-clock budget and the
	// re-plan cap come from configuration.
	l, err := LimitsFromEnv(func(k string) string {
		return map[string]string{"CLIENTAGENT_TURN_TIMEOUT": "90s", "CLIENTAGENT_MAX_FAILURES": "4"}[k]
	})
	if err != nil || l.TurnTimeout != 90*time.Second || l.MaxFailures != 4 {
		t.Errorf("LimitsFromEnv(budgets) = %s, %d, %v; want 90s and 4", l.TurnTimeout, l.MaxFailures, err)
	}
	if d, _ := LimitsFromEnv(func(string) string { return "" }); d.TurnTimeout != 15*time.Minute || d.MaxFailures != 2 {
		t.Errorf("default budgets = %s, %d; want 15m and 2", d.TurnTimeout, d.MaxFailures)
	}
	for _, tc := range tests {
		l, err := LimitsFromEnv(func(k string) string { return tc.env[k] })
		if (err != nil) != tc.wantErr {
			t.Errorf("%s: LimitsFromEnv() error = %v, want error %v", tc.name, err, tc.wantErr)
			continue
		}
		if tc.check != nil {
			tc.check(t, l.MaxLLMCalls, l.TokenBudget, l.MaxConcurrency, l.AwaitTimeout)
		}
	}
}

// Issue 7: the stack sets Lambda's application log level per environment
// (AWS_LAMBDA_LOG_LEVEL); the functions log at that level.
func TestLambdaLogger(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env  string
		want slog.Level
	}{
		{"", slog.LevelInfo}, {"DEBUG", slog.LevelDebug}, {"trace", slog.LevelDebug},
		{"INFO", slog.LevelInfo}, {"WARN", slog.LevelWarn}, {"ERROR", slog.LevelError}, {"FATAL", slog.LevelError},
	}
	for _, tt := range tests {
		l := LambdaLogger(func(k string) string {
			if k == "AWS_LAMBDA_LOG_LEVEL" {
				return tt.env
			}
			return ""
		})
		for _, lv := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError} {
			if got, want := l.Enabled(t.Context(), lv), lv >= tt.want; got != want {
				t.Errorf("LambdaLogger(%q).Enabled(%v) = %v, want %v", tt.env, lv, got, want)
			}
		}
	}
}
