package devstack

import (
	"sync"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/llm/openai"
	"github.com/clientagent/clientagent/pkg/llm/openai/openaitest"
)

// Concurrent turns reuse the stack's connections to the model and to the
// specialists (pkg/keepalive): bursts of turns at once open about as many
// connections as one burst has calls in flight, not a connection for
// nearly every call, as Go's default of two idle connections per host
// would.
func TestConcurrentTurnsReuseConnections(t *testing.T) {
	t.Parallel()
	model := openaitest.Start(t, oneToolModel)
	ag := &slowAgent{delay: 20 * time.Millisecond} // the calls of a burst overlap
	url := serveAgent(t, ag)
	_, c := stack(t, openai.New(openai.Config{BaseURL: model.URL, Model: "gpt-4o-mini"}), func(cfg *Config) { cfg.Agents = []string{url} })
	const bursts, concurrency = 5, 10
	cards := ag.conns.Load() // the card fetch at start
	for b := range bursts {
		var wg sync.WaitGroup
		for range concurrency {
			wg.Go(func() {
				cid := c.newConversation()
				if v := c.wait(cid, c.send(cid, "hello")); v.Status != "succeeded" {
					t.Errorf("burst %d: turn = %s %q, want succeeded", b+1, v.Status, v.Reply)
				}
			})
		}
		wg.Wait()
	}
	if n := ag.ran(); n != bursts*concurrency {
		t.Fatalf("the specialist ran %d calls, want %d", n, bursts*concurrency)
	}
	if got := ag.conns.Load() - cards; got > 2*concurrency {
		t.Errorf("the specialist accepted %d connections for %d bursts of %d concurrent calls, want at most %d", got, bursts, concurrency, 2*concurrency)
	}
	if got := model.Connections(); got > 2*concurrency {
		t.Errorf("the model accepted %d connections for %d bursts of %d concurrent turns (2 calls each), want at most %d", got, bursts, concurrency, 2*concurrency)
	}
	t.Logf("connections: specialist %d, model %d, for %d turns", ag.conns.Load()-cards, model.Connections(), bursts*concurrency)
}
