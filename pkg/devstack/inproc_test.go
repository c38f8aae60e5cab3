package devstack

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/keepalive"
)

// sentRequests is an agent client's transport that records the URL of
// every request it sends over the network.
type sentRequests struct {
	mu   sync.Mutex
	urls []string
}

func (s *sentRequests) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.urls = append(s.urls, r.URL.String())
	s.mu.Unlock()
	return keepalive.Transport.RoundTrip(r)
}

func (s *sentRequests) to(host string) (n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range s.urls {
		if p, err := url.Parse(u); err == nil && p.Host == host {
			n++
		}
	}
	return n
}

// The stack serves the demo specialists itself, so its A2A client
// reaches them in process (docs/architecture.md, "The demo specialists
// are called in process"): a turn calls both of the Popelnase turn's
// specialists and fetches their cards without one request over the
// network, while a specialist elsewhere is still reached through the
// stack's agent client.
func TestDemoSpecialistsAreCalledInProcess(t *testing.T) {
	t.Parallel()
	_, elsewhere := startSlowAgent(t, time.Millisecond)
	sent := &sentRequests{}
	st, c := stack(t, nil, func(cfg *Config) {
		cfg.Agents = []string{elsewhere}
		cfg.AgentClient = &http.Client{Transport: sent}
	})
	cid := c.newConversation()
	v := c.wait(cid, c.send(cid, "Create a PNG image with the word Popelnase"))
	if v.Status != "succeeded" || len(v.Artifacts) != 2 {
		t.Fatalf("turn = %s with %d artifacts, want succeeded with the SVG and the PNG", v.Status, len(v.Artifacts))
	}
	own, other := strings.TrimPrefix(st.URL(), "http://"), strings.TrimPrefix(elsewhere, "http://")
	if n := sent.to(own); n != 0 {
		t.Errorf("%d requests to the stack's own demo specialists went over the network, want none", n)
	}
	if sent.to(other) == 0 {
		t.Errorf("no request reached the specialist at %s through the stack's agent client", elsewhere)
	}
}
