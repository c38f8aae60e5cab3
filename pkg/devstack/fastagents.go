package devstack

import (
	"context"
)

// StartFast starts a stack whose demo specialists are the fast ones
// (demoagents.FastHandler: the same cards at the same URLs, answering at
// once with a tiny artifact and keeping nothing), for load runs against
// the peer frameworks (`clientagent dev --fast-agents`, docs/benchmarks.md).
// The platform reaches them over A2A exactly as it reaches the demo ones.
//
// The stack's handler is swapped before StartFast returns, so only a
// request sent to a fixed Config.Addr before that (the web page of an
// earlier stack, say) can still meet a demo agent.
func StartFast(ctx context.Context, cfg Config) (*Stack, error) {
	cfg.FastAgents = true
	return Start(ctx, cfg)
}
