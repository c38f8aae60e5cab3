package a2acall

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/clientagent/clientagent/pkg/telemetry"
	"github.com/clientagent/clientagent/pkg/tool"
)

// a2a-go v0.3.3's JSON-RPC transport loses what an agent said when a call
// goes wrong: a JSON-RPC error becomes a bare sentinel ("internal error")
// unless data.error is a string, a non-200 answer becomes "unexpected HTTP
// status: 502 Bad Gateway" with the body unread, and a 200 that is not JSON
// becomes a decoder error. captureTransport keeps the response status,
// content type and the head of the body of each call, so errorText can
// report the agent's own words.

// captureLimit bounds the bytes kept from a response body. JSON-RPC errors
// and error pages are small; a larger body is a result, not an error.
const captureLimit = 64 << 10

// httpCapture records the last HTTP response of one invocation.
type httpCapture struct {
	mu          sync.Mutex
	status      string
	code        int
	contentType string
	body        []byte
}

type captureKey struct{}

func withCapture(ctx context.Context) (context.Context, *httpCapture) {
	c := &httpCapture{}
	return context.WithValue(ctx, captureKey{}, c), c
}

// captureTransport is an http.RoundTripper recording responses into the
// httpCapture found in the request's context. It also sends the W3C
// traceparent of the request context's span (the turn's execute_tool span,
// pkg/turn), so a specialist that speaks OpenTelemetry joins the turn's trace.
type captureTransport struct{ base http.RoundTripper }

func (t captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if trace.SpanContextFromContext(req.Context()).IsValid() {
		req = req.Clone(req.Context()) // a RoundTripper must not change its request
		telemetry.Inject(req.Context(), req.Header)
	}
	resp, err := t.base.RoundTrip(req)
	c, _ := req.Context().Value(captureKey{}).(*httpCapture)
	if err != nil || c == nil {
		return resp, err
	}
	c.mu.Lock()
	c.status, c.code, c.contentType, c.body = resp.Status, resp.StatusCode, resp.Header.Get("Content-Type"), nil
	c.mu.Unlock()
	if resp.StatusCode != http.StatusOK {
		// a2a-go closes a non-200 body unread: read its head now.
		head, rerr := io.ReadAll(io.LimitReader(resp.Body, captureLimit))
		c.mu.Lock()
		c.body = head
		c.mu.Unlock()
		if rerr != nil {
			return resp, nil
		}
		resp.Body = readCloser{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
		return resp, nil
	}
	resp.Body = readCloser{&teeHead{r: resp.Body, c: c}, resp.Body}
	return resp, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// teeHead copies the first captureLimit bytes read into the capture.
type teeHead struct {
	r io.Reader
	c *httpCapture
}

func (t *teeHead) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.c.mu.Lock()
		if room := captureLimit - len(t.c.body); room > 0 {
			t.c.body = append(t.c.body, p[:min(n, room)]...)
		}
		t.c.mu.Unlock()
	}
	return n, err
}

// rpcError is a JSON-RPC error object as an agent sent it.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e rpcError) String() string {
	s := fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message)
	if d := bytes.TrimSpace(e.Data); len(d) > 0 && string(d) != "null" {
		var str string
		if json.Unmarshal(d, &str) == nil {
			s += " (" + str + ")"
		} else {
			s += " (data: " + string(d) + ")"
		}
	}
	return s
}

// describe returns what the agent said in the captured response, or "" when
// the capture holds nothing more telling than err itself.
func (c *httpCapture) describe() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.code == 0 {
		return ""
	}
	var env struct {
		Error *rpcError `json:"error"`
	}
	if json.Unmarshal(c.body, &env) == nil && env.Error != nil {
		if c.code != http.StatusOK {
			return "HTTP " + c.status + ": " + env.Error.String()
		}
		return env.Error.String()
	}
	if c.code != http.StatusOK {
		return "HTTP " + c.status + ": " + tool.Snippet(c.body)
	}
	if mt, _, _ := mime.ParseMediaType(c.contentType); mt != "" && mt != "application/json" && !json.Valid(c.body) {
		return fmt.Sprintf("unexpected response (Content-Type %s): %s", c.contentType, tool.Snippet(c.body))
	}
	if len(c.body) < captureLimit && !json.Valid(c.body) {
		return "response is not valid JSON: " + tool.Snippet(c.body)
	}
	return ""
}
