package devstack

import (
	"context"
	"net/http"
	"strings"

	"github.com/clientagent/clientagent/pkg/demoagents"
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
	st, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	demo, fast := st.srv.Handler, demoagents.FastHandler(st.url)
	st.srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/agents/") {
			fast.ServeHTTP(w, r)
			return
		}
		demo.ServeHTTP(w, r)
	})
	return st, nil
}
