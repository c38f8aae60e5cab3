// Package platform wires what every part of clientagent uses from
// configuration: the conversation store, the turn limits and the loop's
// step handlers (Env, for a Lambda function's cold start). The sources of
// tools and the catalogue are pkg/platform/toolenv's, which also builds
// the local stack's whole graph; the invokers of calls are
// pkg/platform/invokeenv's. So a function that builds no catalogue (await,
// events) links neither the A2A types nor the MCP SDK, and one that runs no
// call links no A2A client. It holds no logic of its own beyond wiring.
package platform

import (
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/turn"
)

// LimitsFromEnv reads the turn limits, starting from the defaults of docs/design.md §3.6:
// CLIENTAGENT_MAX_LLM_CALLS, CLIENTAGENT_TOKEN_BUDGET, CLIENTAGENT_MAX_REPEATS,
// CLIENTAGENT_MAX_FAILURES (the re-plan cap), CLIENTAGENT_MAX_CONCURRENCY,
// CLIENTAGENT_COST_BUDGET (US dollars per turn, off by default),
// CLIENTAGENT_AWAIT_TIMEOUT and CLIENTAGENT_TURN_TIMEOUT (Go durations; the
// turn's wall-clock budget, not counting waits for the user, 0 for none).
func LimitsFromEnv(getenv func(string) string) (turn.Limits, error) {
	l := turn.DefaultLimits()
	ints := map[string]*int{
		"CLIENTAGENT_MAX_LLM_CALLS":   &l.MaxLLMCalls,
		"CLIENTAGENT_TOKEN_BUDGET":    &l.TokenBudget,
		"CLIENTAGENT_MAX_REPEATS":     &l.MaxRepeats,
		"CLIENTAGENT_MAX_FAILURES":    &l.MaxFailures,
		"CLIENTAGENT_MAX_CONCURRENCY": &l.MaxConcurrency,
	}
	for k, p := range ints {
		if v := getenv(k); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return l, fmt.Errorf("%s=%q: want a non-negative integer", k, v)
			}
			*p = n
		}
	}
	if v := getenv("CLIENTAGENT_AWAIT_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return l, fmt.Errorf("CLIENTAGENT_AWAIT_TIMEOUT=%q: want a duration of at least 1s, e.g. 30m", v)
		}
		l.AwaitTimeout = d
	}
	if v := getenv("CLIENTAGENT_COST_BUDGET"); v != "" {
		usd, err := strconv.ParseFloat(v, 64)
		if err != nil || usd < 0 {
			return l, fmt.Errorf("CLIENTAGENT_COST_BUDGET=%q: want a non-negative amount of US dollars, e.g. 0.50", v)
		}
		l.CostBudget = int64(usd * 1e6)
	}
	if v := getenv("CLIENTAGENT_TURN_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > 0 && d < time.Second {
			return l, fmt.Errorf("CLIENTAGENT_TURN_TIMEOUT=%q: want 0 (none) or a duration of at least 1s, e.g. 15m", v)
		}
		l.TurnTimeout = d
	}
	return l, nil
}

// HandlerOptions are what every step handler uses beside the store.
type HandlerOptions struct {
	// Limits bound each turn (zero: turn.DefaultLimits).
	Limits turn.Limits
	// CallTimeout bounds one specialist call.
	CallTimeout time.Duration
	// Prices prices LLM calls per model (nil: llm.DefaultPrices).
	Prices llm.Prices
	Logger *slog.Logger
}

// NewHandlers are the step handlers with what every step uses (the store
// and its event log, the limits, the logger); each role adds its own
// dependencies.
func NewHandlers(store record.Store, o HandlerOptions) *turn.Handlers {
	limits := o.Limits
	if limits == (turn.Limits{}) {
		limits = turn.DefaultLimits()
	}
	h := &turn.Handlers{Store: store, Limits: limits, CallTimeout: o.CallTimeout, Prices: o.Prices, Logger: o.Logger}
	if ev, ok := store.(record.EventLog); ok {
		h.Events = ev
	}
	return h
}
