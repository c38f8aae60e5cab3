package platform

import (
	"strings"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/turn"
)

func TestLimitsFromEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		check   func(t *testing.T, maxCalls, budget, conc int, await time.Duration)
		wantErr bool
	}{
		{"defaults are docs/design.md's", nil, func(t *testing.T, maxCalls, budget, conc int, await time.Duration) {
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

// Issue 13: a Lambda function builds only its role's part. Env.Handlers has
// what every step uses, and nothing a role must add itself; it does not
// contact Valkey, so a store that is down at cold start is a step's
// TransientError rather than a function that cannot start.
func TestEnvHandlers(t *testing.T) {
	t.Parallel()
	env := func(kv map[string]string) *Env { return NewEnv(func(k string) string { return kv[k] }) }
	h, err := env(map[string]string{"VALKEY_URL": "redis://127.0.0.1:1/0"}).Handlers()
	if err != nil {
		t.Fatalf("Handlers() with an unreachable server = %v, want no error (no contact at cold start)", err)
	}
	if h.Store == nil || h.Logger == nil || h.Limits != turn.DefaultLimits() || h.CallTimeout != InvokeTimeout {
		t.Errorf("Handlers() = %+v, want the store, the logger, the default limits and InvokeTimeout", h)
	}
	if h.LLM != nil || h.Catalogs != nil || h.Invoker != nil || h.Audit != nil {
		t.Errorf("Handlers() = %+v, want no model, catalogue, invoker or audit log (each role adds its own)", h)
	}

	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no URL", nil, "VALKEY_URL"},
		{"bad URL", map[string]string{"VALKEY_URL": "http://nope"}, "valkey"},
		{"bad limits", map[string]string{"VALKEY_URL": "redis://127.0.0.1:1/0", "CLIENTAGENT_MAX_LLM_CALLS": "many"}, "CLIENTAGENT_MAX_LLM_CALLS"},
	}
	for _, tt := range tests {
		if _, err := env(tt.env).Handlers(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Handlers() = %v, want an error naming %s", tt.name, err, tt.want)
		}
	}
}
