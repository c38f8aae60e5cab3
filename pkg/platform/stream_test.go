package platform

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// A handler behind StreamingURL finds an http.Flusher, and what it writes
// reaches the response body before it returns: the first line is read
// while the handler still waits to write the second.
func TestStreamingURL(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := w.(http.Flusher)
		if !ok {
			http.Error(w, "no flusher", http.StatusNotImplemented)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "data: one\n")
		f.Flush()
		<-release
		io.WriteString(w, "data: "+r.URL.Path+"\n")
	})
	req := &events.LambdaFunctionURLRequest{RawPath: "/v1/conversations/c_1/events"}
	req.RequestContext.DomainName = "abcdefg.lambda-url.us-east-1.on.aws"
	req.RequestContext.HTTP.Method = http.MethodGet
	resp, err := StreamingURL(h)(t.Context(), req)
	if err != nil {
		t.Fatalf("StreamingURL(h)() error = %v", err)
	}
	if resp.StatusCode != http.StatusOK || resp.Headers["Content-Type"] != "text/event-stream" {
		t.Fatalf("StreamingURL(h)() = %d %v, want 200 text/event-stream", resp.StatusCode, resp.Headers)
	}
	// The Runtime API reads resp: a JSON prelude, 8 NUL bytes, the body.
	br := bufio.NewReader(resp)
	prelude, err := br.ReadBytes(0)
	if err != nil {
		t.Fatal(err)
	}
	var p struct{ StatusCode int }
	if err := json.Unmarshal(bytes.TrimSuffix(prelude, []byte{0}), &p); err != nil || p.StatusCode != http.StatusOK {
		t.Fatalf("prelude %q: %v, want statusCode 200", prelude, err)
	}
	if _, err := br.Discard(7); err != nil {
		t.Fatal(err)
	}
	first := make(chan string, 1)
	go func() {
		line, _ := br.ReadString('\n')
		first <- line
	}()
	select {
	case line := <-first:
		if line != "data: one\n" {
			t.Errorf("first line = %q, want data: one", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first line did not arrive before the handler returned")
	}
	close(release)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "data: /v1/conversations/c_1/events\n" {
		t.Errorf("rest = %q, %v; want the second line", rest, err)
	}
}
