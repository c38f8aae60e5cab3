// Package otlphttp is a span exporter speaking OTLP/HTTP with protobuf
// bodies (POST <endpoint> with an ExportTraceServiceRequest), the only
// OTLP encoding X-Ray's OTLP endpoint accepts. It exists instead of
// OpenTelemetry's otlptracehttp, which imports the collector's gRPC service
// stubs and with them gRPC into every function (docs/benchmarks.md); the
// spans are written in the protobuf encoding by hand (wire.go), so no
// function links the protobuf runtime for its traces. It reads the standard OTEL_EXPORTER_OTLP_*
// headers, timeout and compression variables (ConfigFromEnv); it does not
// do TLS client certificates or gRPC. It must not sign requests itself:
// the HTTP client it is given does (X-Ray's SigV4).
package otlphttp

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/clientagent/clientagent/pkg/keepalive"
)

// Defaults of the Config fields left zero.
const (
	DefaultTimeout = 10 * time.Second
	// backoffBase is the first retry delay; it doubles per retry.
	backoffBase = 100 * time.Millisecond
	maxBackoff  = 2 * time.Second
)

// Config configures an Exporter; only URL is required.
type Config struct {
	// URL is the traces endpoint, e.g. http://127.0.0.1:4318/v1/traces.
	URL string
	// HTTPClient sends the requests (nil: a default client).
	HTTPClient *http.Client
	// Headers are added to every request (OTEL_EXPORTER_OTLP_HEADERS).
	Headers map[string]string
	// Timeout bounds one export, retries included.
	Timeout time.Duration
	// Gzip compresses the bodies.
	Gzip bool
}

// ConfigFromEnv is the Config of the traces endpoint url with what the
// environment getenv reads adds: OTEL_EXPORTER_OTLP_[TRACES_]HEADERS
// (k=v pairs, comma-separated, values URL-encoded), ..._TIMEOUT
// (milliseconds) and ..._COMPRESSION (gzip or none), the traces-specific
// variable winning.
func ConfigFromEnv(endpoint string, getenv func(string) string) (Config, error) {
	cfg := Config{URL: endpoint}
	get := func(name string) (string, string) {
		for _, n := range []string{"OTEL_EXPORTER_OTLP_TRACES_" + name, "OTEL_EXPORTER_OTLP_" + name} {
			if v := strings.TrimSpace(getenv(n)); v != "" {
				return n, v
			}
		}
		return "", ""
	}
	if n, v := get("HEADERS"); v != "" {
		cfg.Headers = map[string]string{}
		for _, pair := range strings.Split(v, ",") {
			k, val, ok := strings.Cut(pair, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				return Config{}, fmt.Errorf("%s: %q is not key=value", n, pair)
			}
			dk, err1 := url.PathUnescape(k)
			dv, err2 := url.PathUnescape(strings.TrimSpace(val))
			if err := errors.Join(err1, err2); err != nil {
				return Config{}, fmt.Errorf("%s: %w", n, err)
			}
			cfg.Headers[dk] = dv
		}
	}
	if n, v := get("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 0 {
			return Config{}, fmt.Errorf("%s=%q: want milliseconds", n, v)
		}
		cfg.Timeout = time.Duration(ms) * time.Millisecond
	}
	if n, v := get("COMPRESSION"); v != "" {
		switch v {
		case "gzip":
			cfg.Gzip = true
		case "none":
		default:
			return Config{}, fmt.Errorf("%s=%q: want gzip or none", n, v)
		}
	}
	return cfg, nil
}

// Exporter is an sdktrace.SpanExporter posting OTLP/HTTP protobuf; it is
// safe for concurrent use.
type Exporter struct {
	cfg     Config
	stopped atomic.Bool
}

var _ sdktrace.SpanExporter = (*Exporter)(nil)

// New returns the exporter of cfg.
func New(cfg Config) (*Exporter, error) {
	if u, err := url.Parse(cfg.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("OTLP traces endpoint %q: want an http(s) URL", cfg.URL)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = keepalive.Client()
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	return &Exporter{cfg: cfg}, nil
}

// ExportSpans sends spans in one request, retrying what the OTLP
// specification calls retryable (429, 502, 503, 504, transport errors)
// with backoff, or the server's Retry-After, within the Config's timeout.
func (e *Exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.stopped.Load() || len(spans) == 0 {
		return nil
	}
	body, err := Encode(spans)
	if err != nil {
		return fmt.Errorf("OTLP export: encode: %w", err)
	}
	if e.cfg.Gzip {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write(body)
		if err := zw.Close(); err != nil {
			return fmt.Errorf("OTLP export: gzip: %w", err)
		}
		body = b.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	delay := backoffBase
	for {
		retryAfter, err := e.post(ctx, body)
		if err == nil {
			return nil
		}
		var final *finalError
		if errors.As(err, &final) {
			return fmt.Errorf("OTLP export: %w", err)
		}
		wait := delay
		if retryAfter >= 0 {
			wait = retryAfter
		}
		delay = min(2*delay, maxBackoff)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("OTLP export: %w (last: %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// finalError is an answer not worth retrying.
type finalError struct{ msg string }

func (e *finalError) Error() string { return e.msg }

// post makes one request; retryAfter is the server's Retry-After (-1 for none).
func (e *Exporter) post(ctx context.Context, body []byte) (retryAfter time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return -1, &finalError{msg: err.Error()}
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "clientagent-otlp")
	if e.cfg.Gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	for k, v := range e.cfg.Headers {
		req.Header.Set(k, v)
	}
	res, err := e.cfg.HTTPClient.Do(req)
	if err != nil {
		return -1, err
	}
	defer res.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(res.Body, 1<<10))
	// A 2xx may carry a partial success (rejected spans); spans are worth
	// less than the work, so it is not looked at.
	switch {
	case res.StatusCode >= 200 && res.StatusCode < 300:
		return -1, nil
	case res.StatusCode == http.StatusTooManyRequests, res.StatusCode == http.StatusBadGateway,
		res.StatusCode == http.StatusServiceUnavailable, res.StatusCode == http.StatusGatewayTimeout:
		retryAfter = -1
		if s, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil && s >= 0 {
			retryAfter = time.Duration(s) * time.Second
		}
		return retryAfter, fmt.Errorf("HTTP %d", res.StatusCode)
	default:
		// The body may be protobuf (a Status); only a text one is worth showing.
		text := ""
		if strings.HasPrefix(res.Header.Get("Content-Type"), "text/") || strings.Contains(res.Header.Get("Content-Type"), "json") {
			text = ": " + strings.TrimSpace(string(msg))
		}
		return -1, &finalError{msg: fmt.Sprintf("HTTP %d%s", res.StatusCode, text)}
	}
}

// Shutdown stops exporting; spans handed in later are dropped.
func (e *Exporter) Shutdown(context.Context) error {
	e.stopped.Store(true)
	return nil
}
