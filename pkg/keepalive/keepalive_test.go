package keepalive_test

import (
	"bytes"
	"context"
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

// writes counts the writes a transport makes on its connections for one
// POST of a body of n bytes.
func writes(t *testing.T, tr *http.Transport, n int) int64 {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	var count atomic.Int64
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, writes: &count}, nil
	}
	resp, err := (&http.Client{Transport: tr}).Post(srv.URL, "application/json", bytes.NewReader(make([]byte, n)))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return count.Load()
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// A request the size of a model's prompt goes out in one write (Go's
// default transport writes its head and first 4 KB, then the rest).
func TestRequestGoesOutInOneWrite(t *testing.T) {
	t.Parallel()
	const body = 24 << 10
	if got := writes(t, keepalive.New(), body); got != 1 {
		t.Errorf("keepalive.New(): %d writes for a %d-byte POST, want 1", got, body)
	}
	std := http.DefaultTransport.(*http.Transport).Clone()
	t.Logf("Go's default transport: %d writes for the same POST", writes(t, std, body))
}
