// Package livepubtest is an in-process fake of an AWS AppSync Events API,
// wire-compatible with what clientagent uses of it: the HTTP publish
// (POST /event, SigV4-signed for the service appsync, at most 5 events of
// at most 240 KB, each a JSON string) and the WebSocket subscribe
// (subprotocols aws-appsync-event-ws and header-<base64url authorization>,
// connection_init/connection_ack, subscribe/subscribe_success or
// subscribe_error, data, ka, unsubscribe). Subscribers are authorized as
// the stack's namespace handler does (infra/events.go): a channel's second
// segment must be the caller's sub.
package livepubtest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/coder/websocket"

	"github.com/clientagent/clientagent/pkg/livepub"
	"github.com/clientagent/clientagent/pkg/livesub"
)

// Fake is the Event API. Verify checks a subscriber's JWT and returns its
// sub; Credentials are the only ones whose SigV4 signature a publish may
// carry.
type Fake struct {
	Verify      func(token string) (sub string, err error)
	Credentials aws.Credentials
	Region      string
	// KeepAlive is how often a connection gets "ka" (zero: 1 s).
	KeepAlive time.Duration

	srv *httptest.Server

	mu         sync.Mutex
	subs       map[*sub]bool
	published  []Published
	refused    []string
	subscribed []string
}

// Published is one event the fake took, on its channel.
type Published struct {
	Channel string
	Event   string
}

type sub struct {
	channel string
	id      string
	send    func(message) error
}

// New starts a fake on a loopback port, closed with the test.
func New(t testing.TB, verify func(token string) (string, error), creds aws.Credentials) *Fake {
	f := &Fake{Verify: verify, Credentials: creds, Region: "us-east-1", subs: map[*sub]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /event", f.publish)
	mux.HandleFunc("GET /event/realtime", f.realtime)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// Config is the livepub.Config of the fake (both domains on its port).
func (f *Fake) Config() livepub.Config {
	return livepub.Config{HTTPDomain: f.srv.URL, RealtimeDomain: f.srv.URL, Namespace: livepub.DefaultNamespace}
}

// Published returns what was published so far.
func (f *Fake) Published() []Published {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Published(nil), f.published...)
}

// Subscribed returns the channels subscribed to so far.
func (f *Fake) Subscribed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.subscribed...)
}

// Refused returns why each refused subscription or publish was refused.
func (f *Fake) Refused() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.refused...)
}

func (f *Fake) refuse(why string) {
	f.mu.Lock()
	f.refused = append(f.refused, why)
	f.mu.Unlock()
}

// channelPath is a channel as AppSync takes it: /namespace/segments, at
// most 5 segments of 1-50 of A-Z, a-z, 0-9 and '-' (a subscription's last
// may be '*').
var channelPath = regexp.MustCompile(`^(/[A-Za-z0-9-]{1,50}){1,5}$`)

func (f *Fake) publish(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := f.checkSignature(r, body); err != nil {
		f.refuse("publish: " + err.Error())
		writeJSON(w, http.StatusUnauthorized, map[string]any{"errors": []livesub.ProtoError{{ErrorType: "UnauthorizedException", Message: err.Error()}}})
		return
	}
	var req struct {
		Channel string   `json:"channel"`
		Events  []string `json:"events"`
	}
	if err := json.Unmarshal(body, &req); err != nil || !channelPath.MatchString(req.Channel) || len(req.Events) == 0 || len(req.Events) > livepub.MaxBatch {
		f.refuse(fmt.Sprintf("publish: bad request (channel %q, %d events, %v)", req.Channel, len(req.Events), err))
		writeJSON(w, http.StatusBadRequest, map[string]any{"errors": []livesub.ProtoError{{ErrorType: "BadRequestException", Message: "a channel and 1-5 events"}}})
		return
	}
	var ok, failed []map[string]any
	for i, e := range req.Events {
		if len(e) > livepub.MaxEventSize || !json.Valid([]byte(e)) {
			failed = append(failed, map[string]any{"index": i, "code": 400, "message": "not a JSON value of at most 240 KB"})
			continue
		}
		ok = append(ok, map[string]any{"index": i, "identifier": fmt.Sprintf("%s-%d", req.Channel, i)})
		f.deliver(req.Channel, e)
	}
	writeJSON(w, http.StatusOK, map[string]any{"successful": ok, "failed": failed})
}

// deliver records e and sends it to the channel's subscribers, in the
// order it was published.
func (f *Fake) deliver(channel, e string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.published = append(f.published, Published{channel, e})
	raw, _ := json.Marshal(e)
	for s := range f.subs {
		if matches(s.channel, channel) {
			_ = s.send(message{Type: "data", ID: s.id, Event: raw})
		}
	}
}

// matches reports whether a subscription to pattern gets channel: the
// same path, or a prefix ending in /*.
func matches(pattern, channel string) bool {
	if p, ok := strings.CutSuffix(pattern, "/*"); ok {
		return strings.HasPrefix(channel, p+"/")
	}
	return pattern == channel
}

// checkSignature re-signs the request with the fake's credentials over the
// headers it names as signed, and compares.
func (f *Fake) checkSignature(r *http.Request, body []byte) error {
	authz := r.Header.Get("Authorization")
	if !strings.HasPrefix(authz, "AWS4-HMAC-SHA256 ") {
		return fmt.Errorf("not signed with SigV4")
	}
	want := "/" + f.Region + "/appsync/aws4_request"
	if !strings.Contains(authz, f.Credentials.AccessKeyID+"/") || !strings.Contains(authz, want) {
		return fmt.Errorf("signed for another key, region or service (want %s)", want)
	}
	_, signed, _ := strings.Cut(authz, "SignedHeaders=")
	signed, _, _ = strings.Cut(signed, ",")
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return fmt.Errorf("X-Amz-Date: %w", err)
	}
	c, _ := http.NewRequest(r.Method, "https://"+r.Host+r.URL.RequestURI(), nil)
	for _, h := range strings.Split(signed, ";") {
		if h != "host" {
			c.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
		}
	}
	c.Host = r.Host
	c.ContentLength = r.ContentLength
	hash := r.Header.Get("X-Amz-Content-Sha256")
	if hash != sha256Hex(body) {
		return fmt.Errorf("X-Amz-Content-Sha256 is not the body's")
	}
	c.Header.Del("Authorization")
	if err := v4.NewSigner().SignHTTP(r.Context(), f.Credentials, c, hash, "appsync", f.Region, at); err != nil {
		return err
	}
	if c.Header.Get("Authorization") != authz {
		return fmt.Errorf("signature does not match")
	}
	return nil
}

// realtime is the WebSocket endpoint. The handshake's authorization is
// checked at connection_init (AppSync answers connection_error), each
// subscription's own authorization at subscribe.
func (f *Fake) realtime(w http.ResponseWriter, r *http.Request) {
	var header string
	hasProto := false
	for _, v := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(v, ",") {
			p = strings.TrimSpace(p)
			if p == livesub.Protocol {
				hasProto = true
			} else if h, ok := strings.CutPrefix(p, "header-"); ok {
				header = h
			}
		}
	}
	if !hasProto {
		http.Error(w, "subprotocol "+livesub.Protocol+" required", http.StatusBadRequest)
		return
	}
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{livesub.Protocol}, InsecureSkipVerify: true})
	if err != nil {
		return
	}
	defer conn.CloseNow()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var wmu sync.Mutex
	send := func(m message) error {
		b, _ := json.Marshal(m)
		wmu.Lock()
		defer wmu.Unlock()
		wctx, c := context.WithTimeout(ctx, 5*time.Second)
		defer c()
		return conn.Write(wctx, websocket.MessageText, b)
	}
	mine := map[string]*sub{}
	defer func() {
		f.mu.Lock()
		for _, s := range mine {
			delete(f.subs, s)
		}
		f.mu.Unlock()
	}()
	ka := f.KeepAlive
	if ka <= 0 {
		ka = time.Second
	}
	for {
		_, b, err := conn.Read(ctx)
		if err != nil {
			return
		}
		var m message
		if json.Unmarshal(b, &m) != nil {
			_ = send(message{Type: "error", Errors: []livesub.ProtoError{{ErrorType: "BadRequestException", Message: "not JSON"}}})
			continue
		}
		switch m.Type {
		case "connection_init":
			if _, err := f.authorize(header); err != nil {
				f.refuse("connection: " + err.Error())
				_ = send(message{Type: "connection_error", Errors: []livesub.ProtoError{{ErrorType: "UnauthorizedException", Message: err.Error()}}})
				return
			}
			_ = send(message{Type: "connection_ack", ConnectionTimeoutMs: int((3 * ka) / time.Millisecond)})
			go func() {
				t := time.NewTicker(ka)
				defer t.Stop()
				for {
					select {
					case <-ctx.Done():
						return
					case <-t.C:
						if send(message{Type: "ka"}) != nil {
							return
						}
					}
				}
			}()
		case "subscribe":
			if err := f.subscribe(m); err != nil {
				f.refuse("subscribe " + m.Channel + ": " + err.Error())
				_ = send(message{Type: "subscribe_error", ID: m.ID, Errors: []livesub.ProtoError{{ErrorType: "UnauthorizedException", Message: err.Error()}}})
				continue
			}
			s := &sub{channel: m.Channel, id: m.ID, send: send}
			f.mu.Lock()
			mine[m.ID] = s
			f.subs[s] = true
			f.subscribed = append(f.subscribed, m.Channel)
			f.mu.Unlock()
			_ = send(message{Type: "subscribe_success", ID: m.ID})
		case "unsubscribe":
			f.mu.Lock()
			if s := mine[m.ID]; s != nil {
				delete(f.subs, s)
				delete(mine, m.ID)
			}
			f.mu.Unlock()
			_ = send(message{Type: "unsubscribe_success", ID: m.ID})
		}
	}
}

// subscribe authorizes subscription m: its own authorization, a valid
// channel, and the namespace handler's rule (/<namespace>/<sub>/…).
func (f *Fake) subscribe(m message) error {
	if m.Authorization == nil {
		return fmt.Errorf("no authorization")
	}
	who, err := f.verify(m.Authorization.Authorization)
	if err != nil {
		return err
	}
	ch, wild := strings.CutSuffix(m.Channel, "/*")
	if !channelPath.MatchString(ch) {
		return fmt.Errorf("invalid channel %q", m.Channel)
	}
	segs := strings.Split(strings.TrimPrefix(ch, "/"), "/")
	if len(segs) < 2 || !wild && len(segs) < 3 || segs[1] != who {
		return fmt.Errorf("channel %s is not the caller's", m.Channel)
	}
	return nil
}

// authorize reads the handshake's base64url authorization header.
func (f *Fake) authorize(header string) (string, error) {
	if header == "" {
		return "", fmt.Errorf("no header- subprotocol")
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(header, "="))
	if err != nil {
		return "", fmt.Errorf("header: %w", err)
	}
	var a livesub.Auth
	if err := json.Unmarshal(b, &a); err != nil {
		return "", fmt.Errorf("header: %w", err)
	}
	if a.Host != strings.TrimPrefix(f.srv.URL, "http://") {
		return "", fmt.Errorf("host %q is not this API's", a.Host)
	}
	return f.verify(a.Authorization)
}

func (f *Fake) verify(token string) (string, error) {
	if token == "" {
		return "", fmt.Errorf("no token")
	}
	if f.Verify == nil {
		return "", fmt.Errorf("no verifier")
	}
	return f.Verify(token)
}
