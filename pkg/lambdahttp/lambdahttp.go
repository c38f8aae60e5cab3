// Package lambdahttp serves an http.Handler from Lambda events of an API
// Gateway HTTP API (payload format 2.0) or a Lambda Function URL, which
// share one event shape. Binary bodies travel base64-encoded both ways.
// It must not know about routes or authentication; the original event is
// available to handlers through Event(r.Context()) (e.g. for JWT claims).
package lambdahttp

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// Adapter turns events into requests for one handler.
type Adapter struct {
	h http.Handler
}

// New returns an Adapter serving h.
func New(h http.Handler) *Adapter { return &Adapter{h: h} }

type eventKey struct{}

// Event returns the Lambda event a request was built from.
func Event(ctx context.Context) (events.APIGatewayV2HTTPRequest, bool) {
	ev, ok := ctx.Value(eventKey{}).(events.APIGatewayV2HTTPRequest)
	return ev, ok
}

// Handle serves one event. Only a malformed event is an error; whatever
// the handler answers (including 5xx) is a response.
func (a *Adapter) Handle(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	req, err := NewRequest(ctx, ev)
	if err != nil {
		return events.APIGatewayV2HTTPResponse{}, err
	}
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	return Response(rec.Result().StatusCode, rec.Header(), rec.Body.Bytes()), nil
}

// NewRequest builds the http.Request of ev, carrying ev in its context.
func NewRequest(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (*http.Request, error) {
	path := ev.RawPath
	if path == "" {
		path = ev.RequestContext.HTTP.Path
	}
	if path == "" {
		path = "/"
	}
	target := path
	if ev.RawQueryString != "" {
		target += "?" + ev.RawQueryString
	}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil, fmt.Errorf("lambda event %s: bad path %q: %w", ev.RequestContext.RequestID, target, err)
	}
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		body, err = base64.StdEncoding.DecodeString(ev.Body)
		if err != nil {
			return nil, fmt.Errorf("lambda event %s: body is not base64: %w", ev.RequestContext.RequestID, err)
		}
	}
	method := ev.RequestContext.HTTP.Method
	if method == "" {
		method = http.MethodGet
	}
	ctx = context.WithValue(ctx, eventKey{}, ev)
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("lambda event %s: %w", ev.RequestContext.RequestID, err)
	}
	req.URL = u
	req.RequestURI = target
	for k, v := range ev.Headers {
		req.Header.Set(k, v)
	}
	if len(ev.Cookies) > 0 {
		req.Header.Set("Cookie", strings.Join(ev.Cookies, "; "))
	}
	// Like net/http's server: the host lives in req.Host, not the header.
	req.Host = req.Header.Get("Host")
	req.Header.Del("Host")
	if req.Host == "" {
		req.Host = ev.RequestContext.DomainName
	}
	u.Host = req.Host
	req.ContentLength = int64(len(body))
	req.RemoteAddr = ev.RequestContext.HTTP.SourceIP
	if p := ev.RequestContext.HTTP.Protocol; p != "" {
		if major, minor, ok := http.ParseHTTPVersion(p); ok {
			req.Proto, req.ProtoMajor, req.ProtoMinor = p, major, minor
		}
	}
	return req, nil
}

// Response builds the event response: Set-Cookie headers become cookies,
// other multi-valued headers are comma-joined, and a body that is not
// text is base64-encoded.
func Response(status int, h http.Header, body []byte) events.APIGatewayV2HTTPResponse {
	out := events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: map[string]string{}}
	for k, vs := range h {
		if k == "Set-Cookie" {
			out.Cookies = append(out.Cookies, vs...)
			continue
		}
		out.Headers[k] = strings.Join(vs, ",")
	}
	if isText(h.Get("Content-Type"), body) {
		out.Body = string(body)
	} else {
		out.Body = base64.StdEncoding.EncodeToString(body)
		out.IsBase64Encoded = true
	}
	return out
}

// isText reports whether a body can travel as a JSON string unchanged.
func isText(contentType string, body []byte) bool {
	if len(body) == 0 {
		return true
	}
	if !utf8.Valid(body) {
		return false
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		// No or bad type: text only if it looks like it.
		return contentType == "" && !bytes.ContainsRune(body, 0)
	}
	switch {
	case strings.HasPrefix(mt, "text/"),
		strings.HasSuffix(mt, "+json"), strings.HasSuffix(mt, "+xml"),
		mt == "application/json", mt == "application/xml", mt == "application/javascript",
		mt == "application/x-www-form-urlencoded", mt == "text/event-stream":
		return true
	}
	return false
}

// JWTClaims returns the claims the HTTP API's JWT authorizer verified for
// the request (API Gateway checked the token before the function ran).
func JWTClaims(r *http.Request) (map[string]string, bool) {
	ev, ok := Event(r.Context())
	if !ok || ev.RequestContext.Authorizer == nil || ev.RequestContext.Authorizer.JWT == nil {
		return nil, false
	}
	return ev.RequestContext.Authorizer.JWT.Claims, true
}

// RequestBase is the scheme and host a request reached its handler at,
// behind a Function URL or API Gateway (X-Forwarded-Proto) or served
// directly: the base of the URLs a handler publishes about itself (agent
// cards, file links).
func RequestBase(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "https" || p == "http" {
		scheme = p
	}
	return scheme + "://" + r.Host
}
