// Package inproc carries HTTP requests to a handler of the same process
// without a socket: the local stack's A2A client reaches the demo
// specialists it serves itself this way (docs/architecture.md, "The demo
// specialists are called in process").
//
// The request is the client's own, as a server would receive it; the
// handler's response streams back through a pipe as it writes and flushes.
// Everything else of HTTP holds: the handler sees the request's context
// end when the client gives up or closes the body early, and the client
// sees the status, headers and body the handler wrote. What goes away is
// the loopback connection: its writes, reads and wake-ups, and HTTP/1.1's
// encoding and parsing on both sides (about 4% of the local stack's CPU
// per reference turn, docs/benchmarks.md).
package inproc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/clientagent/clientagent/pkg/gopool"
	"github.com/clientagent/clientagent/pkg/keepalive"
)

// Transport serves the requests for Host under Prefix with Handler in
// process and passes every other request to Next.
type Transport struct {
	// Host is host:port as the URLs of the handler's resources name it.
	Host string
	// Prefix is the path the handler serves ("/agents/"); "" is every path.
	Prefix string
	// Handler serves what Host and Prefix match.
	Handler http.Handler
	// Next carries every other request (nil: keepalive.Transport).
	Next http.RoundTripper
}

// Client is base (nil: a new client) with its requests for host under
// prefix served by h in process, all others as base sends them.
func Client(base *http.Client, host, prefix string, h http.Handler) *http.Client {
	c := &http.Client{}
	if base != nil {
		*c = *base
	}
	c.Transport = &Transport{Host: host, Prefix: prefix, Handler: h, Next: c.Transport}
	return c
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" || req.URL.Host != t.Host || !strings.HasPrefix(req.URL.Path, t.Prefix) {
		next := t.Next
		if next == nil {
			next = keepalive.Transport
		}
		return next.RoundTrip(req)
	}
	return serve(t.Handler, req)
}

// serve runs h on req in a goroutine and returns the response once h has
// written its header (or its first bytes, or returned).
func serve(h http.Handler, req *http.Request) (*http.Response, error) {
	client := req.Context()
	ctx, cancel := context.WithCancel(client)
	in := serverRequest(ctx, req)
	pr, pw := io.Pipe()
	w := &responseWriter{header: http.Header{}, pw: pw, ready: make(chan struct{}), head: req.Method == http.MethodHead}
	w.buf = buffers.Get().(*bufio.Writer)
	w.buf.Reset(pw)
	// A client that gives up unblocks a handler writing to it, as a
	// closed connection would, and its reads end with the cause.
	stop := context.AfterFunc(client, func() { pr.CloseWithError(context.Cause(client)) })
	// On a kept goroutine: a specialist's request handling (a2a-go's
	// JSON-RPC server) grows a new goroutine's stack several times.
	gopool.Go(func() {
		defer cancel() // as net/http: the request's context ends with the handler
		defer func() {
			if req.Body != nil {
				req.Body.Close() // RoundTrip's contract: the request body is closed
			}
			if p := recover(); p != nil {
				w.fail(fmt.Errorf("inproc: handler for %s panicked: %v", req.URL.Path, p))
			} else {
				w.finish()
			}
			w.release()
		}()
		h.ServeHTTP(w, in)
	})
	select {
	case <-w.ready:
	case <-client.Done():
		cancel()
		return nil, context.Cause(client)
	}
	if w.err != nil {
		stop()
		pr.Close()
		return nil, w.err
	}
	resp := &http.Response{
		Status:        strconv.Itoa(w.code) + " " + http.StatusText(w.code),
		StatusCode:    w.code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          &body{PipeReader: pr, end: func() { stop(); cancel() }},
		ContentLength: -1,
		Request:       req,
	}
	if n, err := strconv.ParseInt(w.sent.Get("Content-Length"), 10, 64); err == nil && n >= 0 {
		resp.ContentLength = n
	}
	return resp, nil
}

// serverRequest is req as a server receives it: a path-only URL, the
// request URI, the host and a body (never nil), under ctx.
func serverRequest(ctx context.Context, req *http.Request) *http.Request {
	in := req.Clone(ctx)
	in.URL = &url.URL{Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery}
	in.RequestURI = req.URL.RequestURI()
	if in.Host == "" {
		in.Host = req.URL.Host
	}
	in.Proto, in.ProtoMajor, in.ProtoMinor = "HTTP/1.1", 1, 1
	in.RemoteAddr = "127.0.0.1:0" // the same process
	in.Close = false
	if in.Body == nil {
		in.Body = http.NoBody
	}
	if in.ContentLength > 0 && in.Header.Get("Content-Length") == "" {
		in.Header.Set("Content-Length", strconv.FormatInt(in.ContentLength, 10))
	}
	return in
}

// body is the response body: closing it early ends the handler's
// context, and its writes fail as on a closed connection.
type body struct {
	*io.PipeReader
	end func()
}

func (b *body) Close() error {
	b.end()
	return b.PipeReader.Close()
}

// responseWriter is the handler's side: the header is sent (ready) at
// WriteHeader, the first Write or Flush, or the handler's return; the
// body goes through a buffer to the pipe, flushed by Flush and at the end.
type responseWriter struct {
	header http.Header
	sent   http.Header
	code   int
	buf    *bufio.Writer
	pw     *io.PipeWriter
	ready  chan struct{}
	once   sync.Once
	head   bool
	err    error // a panic before the header was sent
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	if w.code != 0 || code < 200 {
		return // a second header is ignored, as net/http does; 1xx are not sent
	}
	w.code = code
	w.sent = w.header.Clone()
	w.once.Do(func() { close(w.ready) })
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		if _, ok := w.header["Content-Type"]; !ok && len(p) > 0 {
			w.header.Set("Content-Type", http.DetectContentType(p))
		}
		w.WriteHeader(http.StatusOK)
	}
	if w.head {
		return len(p), nil
	}
	if w.code == http.StatusNoContent || w.code == http.StatusNotModified {
		return 0, http.ErrBodyNotAllowed
	}
	return w.buf.Write(p)
}

// Flush sends what was written so far (http.Flusher).
func (w *responseWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush with its error (http.ResponseController).
func (w *responseWriter) FlushError() error {
	w.WriteHeader(http.StatusOK)
	return w.buf.Flush()
}

// buffers are the responses' write buffers, each a handler's until it
// returns (a ResponseWriter is not used after its handler returned, as
// with net/http, which pools its buffers so too): a specialist's answer
// is mostly far smaller than its buffer, and a new buffer per call was
// the largest allocation of an A2A call in process (docs/benchmarks.md).
var buffers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, keepalive.BufferSize) }}

// release gives the buffer back once the handler has returned and its
// response has ended.
func (w *responseWriter) release() {
	w.buf.Reset(nil)
	buffers.Put(w.buf)
	w.buf = nil
}

// finish ends the response of a handler that returned.
func (w *responseWriter) finish() {
	w.WriteHeader(http.StatusOK)
	w.pw.CloseWithError(w.buf.Flush()) // nil: the client reads io.EOF
}

// fail ends the response of a handler that panicked: the client gets an
// error, before the header as RoundTrip's, after it as the body's.
func (w *responseWriter) fail(err error) {
	w.once.Do(func() {
		w.err = err
		close(w.ready)
	})
	w.pw.CloseWithError(err)
}
