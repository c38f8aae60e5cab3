package inproc_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/inproc"
)

// echo answers with what a server saw of the request.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	w.Header().Set("X-Seen", fmt.Sprintf("%s %s host=%s len=%d cl=%s auth=%s path=%s query=%s",
		r.Method, r.RequestURI, r.Host, r.ContentLength, r.Header.Get("Content-Length"), r.Header.Get("Authorization"), r.URL.Path, r.URL.RawQuery))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"body":%q}`, b)
})

func TestARequestIsServedAsOverTheNetwork(t *testing.T) {
	srv := httptest.NewServer(echo)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	viaNet, inProc := srv.Client(), inproc.Client(nil, host, "/agents/", echo)
	for _, c := range []*http.Client{viaNet, inProc} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/agents/svg/?a=1&b=%20", strings.NewReader(`{"x":1}`))
		req.Header.Set("Authorization", "Bearer k")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		seen := resp.Header.Get("X-Seen")
		want := `POST /agents/svg/?a=1&b=%20 host=` + host + ` len=7 cl=7 auth=Bearer k path=/agents/svg/ query=a=1&b=%20`
		if resp.StatusCode != http.StatusCreated || seen != want || string(b) != `{"body":"{\"x\":1}"}` || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("in process %v: %d %q %q %q, want 201 %q", c == inProc, resp.StatusCode, seen, b, resp.Header.Get("Content-Type"), want)
		}
	}
}

func TestOtherRequestsGoToNext(t *testing.T) {
	var passed []string
	next := roundTrip(func(r *http.Request) (*http.Response, error) {
		passed = append(passed, r.URL.String())
		return &http.Response{StatusCode: http.StatusTeapot, Body: http.NoBody, Request: r}, nil
	})
	c := &http.Client{Transport: &inproc.Transport{Host: "127.0.0.1:8080", Prefix: "/agents/", Handler: echo, Next: next}}
	for _, u := range []string{"http://127.0.0.1:8081/agents/x", "http://127.0.0.1:8080/v1/info", "https://127.0.0.1:8080/agents/x", "http://127.0.0.1:8080/agents/x"} {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if want := []string{"http://127.0.0.1:8081/agents/x", "http://127.0.0.1:8080/v1/info", "https://127.0.0.1:8080/agents/x"}; fmt.Sprint(passed) != fmt.Sprint(want) {
		t.Errorf("passed on %v, want %v (and the last served in process)", passed, want)
	}
}

func TestTheResponseStreamsAsTheHandlerFlushes(t *testing.T) {
	more := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		<-more
		io.WriteString(w, "data: two\n\n")
	})
	c := inproc.Client(nil, "agents.test", "", h)
	resp, err := c.Get("http://agents.test/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make([]byte, len("data: one\n\n"))
	got := make(chan error, 1)
	go func() { _, err := io.ReadFull(resp.Body, first); got <- err }()
	select {
	case err := <-got:
		if err != nil || string(first) != "data: one\n\n" {
			t.Fatalf("first event %q, %v", first, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the flushed event did not arrive while the handler went on")
	}
	close(more)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "data: two\n\n" {
		t.Errorf("rest %q, %v", rest, err)
	}
	if resp.Header.Get("Content-Type") != "text/event-stream" || resp.StatusCode != http.StatusOK {
		t.Errorf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

func TestAClientThatGivesUpEndsTheHandler(t *testing.T) {
	t.Run("before the header", func(t *testing.T) {
		ended := make(chan error, 1)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
			ended <- r.Context().Err()
		})
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://agents.test/wait", nil)
		_, err := inproc.Client(nil, "agents.test", "", h).Do(req)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("RoundTrip: %v, want context.Canceled", err)
		}
		if err := waitFor(ended); !errors.Is(err, context.Canceled) {
			t.Errorf("the handler's context: %v", err)
		}
	})
	t.Run("closing the body early", func(t *testing.T) {
		ended := make(chan error, 1)
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			for {
				_, err := io.WriteString(w, strings.Repeat("x", 1024))
				if err == nil {
					err = http.NewResponseController(w).Flush()
				}
				if err != nil {
					<-r.Context().Done() // ends too, not only the writes
					ended <- err
					return
				}
			}
		})
		resp, err := inproc.Client(nil, "agents.test", "", h).Get("http://agents.test/endless")
		if err != nil {
			t.Fatal(err)
		}
		io.ReadFull(resp.Body, make([]byte, 4096))
		resp.Body.Close()
		if err := waitFor(ended); err == nil {
			t.Error("the handler's writes went on after the body was closed")
		}
	})
}

func TestAPanickingHandlerIsAnError(t *testing.T) {
	before := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic("boom") })
	if _, err := inproc.Client(nil, "agents.test", "", before).Get("http://agents.test/"); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("a panic before the header: %v", err)
	}
	after := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "partial")
		w.(http.Flusher).Flush()
		panic("boom")
	})
	resp, err := inproc.Client(nil, "agents.test", "", after).Get("http://agents.test/")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "partial" || err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("a panic after the header: read %q, %v", b, err)
	}
}

func TestTheRequestBodyIsClosed(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	b := &closeCounter{Reader: strings.NewReader("unread")}
	req, _ := http.NewRequest(http.MethodPost, "http://agents.test/", b)
	resp, err := inproc.Client(nil, "agents.test", "", h).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || b.closed.Load() == 0 {
		t.Errorf("status %d, request body closed %d times", resp.StatusCode, b.closed.Load())
	}
}

func TestAHeadRequestHasNoBody(t *testing.T) {
	resp, err := inproc.Client(nil, "agents.test", "", echo).Head("http://agents.test/x")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if len(b) != 0 || resp.StatusCode != http.StatusCreated {
		t.Errorf("HEAD: %d with %q", resp.StatusCode, b)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type closeCounter struct {
	io.Reader
	closed atomic.Int32
}

func (c *closeCounter) Close() error { c.closed.Add(1); return nil }

func waitFor(ch <-chan error) error {
	select {
	case err := <-ch:
		return err
	case <-time.After(5 * time.Second):
		return errors.New("timed out")
	}
}
