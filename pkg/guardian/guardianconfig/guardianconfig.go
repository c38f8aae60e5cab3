// Package guardianconfig chooses and builds the guardian from environment
// variables, for the Lambda mains and the local stack. It lives apart from
// pkg/guardian so that package stays free of the implementations' imports.
// It must not read the environment itself: callers pass getenv.
package guardianconfig

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/clientagent/clientagent/pkg/awsconfig"
	"github.com/clientagent/clientagent/pkg/guardian"
	"github.com/clientagent/clientagent/pkg/guardian/a2aagent"
	"github.com/clientagent/clientagent/pkg/guardian/bedrock"
	"github.com/clientagent/clientagent/pkg/guardian/rules"
)

// Options are what the caller supplies beside the environment.
type Options struct {
	// AgentClient carries the calls to a guardian agent (a2a:): the
	// platform's agent client, which signs requests to Lambda Function URLs
	// when CLIENTAGENT_AGENT_AUTH=sigv4 (nil: Go's default client).
	AgentClient *http.Client
	// Bedrock is the ApplyGuardrail client (bedrock:); nil: one from the
	// default AWS configuration (region and credentials from the usual
	// variables, the Lambda role).
	Bedrock bedrock.API
}

// FromEnv builds the guardian.Checker the environment asks for, nil (no
// guardian, no check, no cost) when CLIENTAGENT_GUARDIAN is empty:
//
//	CLIENTAGENT_GUARDIAN            rules:<file.json|file.yaml>   the built-in rule set (guardian/rules)
//	                                a2a:<agent URL>[#skill]       a guardian agent (guardian/a2aagent)
//	                                bedrock:<guardrail id>:<version>   Bedrock Guardrails (guardian/bedrock)
//	CLIENTAGENT_GUARDIAN_CHECKS     kinds checked: request,tool_call,tool_result (default all)
//	CLIENTAGENT_GUARDIAN_FAIL_OPEN  kinds let through when the guardian fails (default none)
//	CLIENTAGENT_GUARDIAN_TIMEOUT    deadline of one check (Go duration, default 5s)
//
// A rule file is read and compiled here, at cold start, so a bad file
// stops the process rather than failing turns. No outbound call is made.
func FromEnv(ctx context.Context, getenv func(string) string, opts Options) (*guardian.Checker, error) {
	spec := strings.TrimSpace(getenv(guardian.EnvGuardian))
	if spec == "" {
		return nil, nil
	}
	policy, err := guardian.PolicyFromEnv(getenv)
	if err != nil {
		return nil, err
	}
	scheme, rest, _ := strings.Cut(spec, ":")
	switch scheme {
	case "rules":
		s, err := rules.Load(rest)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", guardian.EnvGuardian, err)
		}
		return guardian.New(s, "rules:"+rest, policy), nil
	case "a2a":
		c, err := a2aagent.New(rest, opts.AgentClient)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", guardian.EnvGuardian, err)
		}
		return guardian.New(c, c.Name(), policy), nil
	case "bedrock":
		id, version, ok := strings.Cut(rest, ":")
		if !ok || id == "" || version == "" {
			return nil, fmt.Errorf("%s=%q: want bedrock:<guardrail id>:<version>", guardian.EnvGuardian, spec)
		}
		api := opts.Bedrock
		if api == nil {
			// Loading reads the environment and shared files; credentials
			// are fetched on the first call.
			cfg, err := awsconfig.Load(ctx, awsconfig.Options{})
			if err != nil {
				return nil, fmt.Errorf("%s: load AWS config: %w", guardian.EnvGuardian, err)
			}
			if cfg.Region == "" {
				return nil, fmt.Errorf("%s=bedrock:… needs an AWS region (AWS_REGION)", guardian.EnvGuardian)
			}
			api = bedrock.NewClient(cfg)
		}
		g := bedrock.New(api, id, version)
		return guardian.New(g, g.Name(), policy), nil
	default:
		return nil, fmt.Errorf("%s=%q: want rules:<file>, a2a:<agent URL>[#skill] or bedrock:<guardrail id>:<version>", guardian.EnvGuardian, spec)
	}
}
