package keepalive_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/clientagent/clientagent/pkg/keepalive"
)

// dials counts the connections a burst of concurrent requests opens, over
// several bursts: a transport that keeps its connections dials about as
// many as one burst has requests; one that drops all but two idle
// connections per host dials most of them again in every burst.
func dials(t *testing.T, rt http.RoundTripper, bursts, concurrency int) int64 {
	t.Helper()
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := &http.Client{Transport: rt}
	for range bursts {
		var wg sync.WaitGroup
		for range concurrency {
			wg.Go(func() {
				resp, err := c.Get(srv.URL)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			})
		}
		wg.Wait()
	}
	return opened.Load()
}

// The shared transport keeps the connections a burst of concurrent calls
// opened for the next burst; Go's default keeps two and dials the rest
// again (the measure that this test's bound is not too loose).
func TestTransportKeepsConnectionsOfConcurrentCalls(t *testing.T) {
	t.Parallel()
	const bursts, concurrency = 5, 20
	got := dials(t, keepalive.New(), bursts, concurrency)
	if got > 2*concurrency {
		t.Errorf("keepalive.New(): %d connections for %d bursts of %d concurrent calls, want at most %d", got, bursts, concurrency, 2*concurrency)
	}
	std := http.DefaultTransport.(*http.Transport).Clone()
	t.Logf("connections for %d bursts of %d concurrent calls: %d, Go's default transport %d", bursts, concurrency, got, dials(t, std, bursts, concurrency))
}

func TestClientSharesTheTransport(t *testing.T) {
	t.Parallel()
	if c := keepalive.Client(); c.Transport != keepalive.Transport {
		t.Errorf("Client().Transport = %v, want the shared Transport", c.Transport)
	}
	if keepalive.New() == keepalive.Transport {
		t.Error("New() returned the shared transport, want one of its own")
	}
}
