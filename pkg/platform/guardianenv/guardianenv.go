// Package guardianenv wires the guardian (pkg/guardian) of a Lambda
// function from its environment, for the functions that check: llmstep
// (the user's message), validate (tool calls) and append (tool results).
// It lives apart from pkg/platform.Env so that the other functions link
// neither the guardian's A2A client nor Bedrock (docs/design.md §12 rule 1).
//
//	CLIENTAGENT_GUARDIAN            empty (none), rules:<file>, a2a:<agent URL>[#skill],
//	                                bedrock:<guardrail id>:<version>
//	CLIENTAGENT_GUARDIAN_CHECKS, CLIENTAGENT_GUARDIAN_FAIL_OPEN, CLIENTAGENT_GUARDIAN_TIMEOUT
//	                                the policy (guardian.PolicyFromEnv)
package guardianenv

import (
	"context"
	"net/http"
	"strings"

	"github.com/clientagent/clientagent/pkg/guardian"
	"github.com/clientagent/clientagent/pkg/guardian/guardianconfig"
	"github.com/clientagent/clientagent/pkg/platform"
	"github.com/clientagent/clientagent/pkg/turn"
)

// Handlers are env.Handlers with the guardian Load gives: the handlers of
// a function that checks.
func Handlers(ctx context.Context, env *platform.Env) (*turn.Handlers, error) {
	h, err := env.Handlers()
	if err != nil {
		return nil, err
	}
	// nil unless CLIENTAGENT_GUARDIAN is set.
	if h.Guardian, err = Load(ctx, env); err != nil {
		return nil, err
	}
	return h, nil
}

// Load is the function's guardian.Checker, nil when CLIENTAGENT_GUARDIAN
// is empty (a nil Checker checks nothing). A guardian agent is called
// with the platform's agent client, so CLIENTAGENT_AGENT_AUTH=sigv4 signs
// requests to a guardian behind a Lambda Function URL as it does the
// specialists'. A bedrock guardian uses the function's AWS configuration
// and role. No outbound call is made here.
func Load(ctx context.Context, env *platform.Env) (*guardian.Checker, error) {
	var hc *http.Client
	if strings.HasPrefix(strings.TrimSpace(env.Getenv(guardian.EnvGuardian)), "a2a:") {
		var err error
		if hc, err = env.AgentClient(ctx); err != nil {
			return nil, err
		}
	}
	return guardianconfig.FromEnv(ctx, env.Getenv, guardianconfig.Options{AgentClient: hc})
}
