package functions_test

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/clientagent/clientagent/pkg/valkeytest"
)

// streamingContentType is what aws-lambda-go posts a Function URL's
// streamed response as: a JSON prelude (status, headers), eight NUL bytes,
// then the body as the handler writes it.
const streamingContentType = "application/vnd.awslambda.http-integration-response"

// oidcIssuer is an OpenID Connect issuer in the test, over TLS: the
// discovery document and a key set of one RSA key. The functions trust its
// certificate through SSL_CERT_FILE, as they trust a real issuer's through
// the system's roots.
type oidcIssuer struct {
	url      string
	certFile string
	key      *rsa.PrivateKey
}

func newOIDCIssuer(tb testing.TB) *oidcIssuer {
	tb.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	is := &oidcIssuer{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": is.url, "jwks_uri": is.url + "/.well-known/jwks.json"})
	})
	mux.HandleFunc("GET /.well-known/jwks.json", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "kid": "test-key", "use": "sig", "alg": "RS256",
			"n": base64.RawURLEncoding.EncodeToString(key.N.Bytes()),
			"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
		}}})
	})
	srv := httptest.NewTLSServer(mux)
	tb.Cleanup(srv.Close)
	is.url = srv.URL
	is.certFile = filepath.Join(tb.TempDir(), "issuer.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(is.certFile, pemBytes, 0o600); err != nil {
		tb.Fatal(err)
	}
	return is
}

// token is an hour's RS256 token of the issuer for sub and aud.
func (is *oidcIssuer) token(tb testing.TB, sub, aud string) string {
	tb.Helper()
	now := time.Now()
	t := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{
		"iss": is.url, "aud": aud, "sub": sub, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	})
	t.Header["kid"] = "test-key"
	s, err := t.SignedString(is.key)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// eventsEnv is the environment infra/ gives the events function: Valkey
// and the HTTP API authorizer's issuer and audiences.
func eventsEnv(valkey string, is *oidcIssuer) map[string]string {
	return map[string]string{
		"CLIENTAGENT_ENV":          "test",
		"VALKEY_URL":               valkey,
		"CLIENTAGENT_JWT_ISSUER":   is.url,
		"CLIENTAGENT_JWT_AUDIENCE": "clientagent-web,clientagent-cli",
		"SSL_CERT_FILE":            is.certFile,
	}
}

// streamedResponse is a Function URL streaming response, split.
type streamedResponse struct {
	StatusCode int               `json:"statusCode"`
	Headers    map[string]string `json:"headers"`
	Body       []byte            `json:"-"`
}

// stream invokes f with ev and reads its streamed response: posted chunked,
// as an http-integration-response, the prelude before eight NUL bytes.
func stream(tb testing.TB, f *function, ev []byte) streamedResponse {
	tb.Helper()
	r := f.invoke(ev)
	if r.Err {
		tb.Fatalf("%s(%s) failed: %s\nits output:\n%s", f.name, ev, r.Body, f.out)
	}
	if r.ContentType != streamingContentType || !r.Chunked {
		tb.Errorf("%s posted its response as %q (chunked %v), want %s, chunked: a streamed response", f.name, r.ContentType, r.Chunked, streamingContentType)
	}
	prelude, body, ok := bytes.Cut(r.Body, make([]byte, 8))
	if !ok {
		tb.Fatalf("%s response %q has no prelude (JSON, then 8 NUL bytes)", f.name, r.Body)
	}
	var resp streamedResponse
	if err := json.Unmarshal(prelude, &resp); err != nil {
		tb.Fatalf("%s response prelude %q: %v", f.name, prelude, err)
	}
	resp.Body = body
	return resp
}

// Issue 15: the events function, as built for Lambda, serves the SSE route
// of docs/api/openapi.yaml through a streaming Function URL and checks the bearer JWT
// itself (no authorizer stands in front of a Function URL): no token or a
// token for another audience is 401, any other route or someone else's
// conversation 404 — every answer streamed.
func TestEventsFunctionURL(t *testing.T) {
	t.Parallel()
	is := newOIDCIssuer(t)
	f := startFunction(t, "events", eventsEnv(valkeyURL(t), is))
	f.awaitReady()
	user := valkeytest.ID(t, "user")
	events := "/v1/conversations/c_nosuch/events"
	tests := []struct {
		name, ev string
		vars     map[string]string
		want     int
	}{
		{"no token", "function-url-events-no-token.json", map[string]string{"PATH": events}, http.StatusUnauthorized},
		{"another audience", "function-url-events.json", map[string]string{"PATH": events, "METHOD": "GET", "QUERY": "", "TOKEN": is.token(t, user, "someone-else")}, http.StatusUnauthorized},
		{"not a JWT", "function-url-events.json", map[string]string{"PATH": events, "METHOD": "GET", "QUERY": "", "TOKEN": "abc.def.ghi"}, http.StatusUnauthorized},
		{"no such conversation", "function-url-events.json", map[string]string{"PATH": events, "METHOD": "GET", "QUERY": "", "TOKEN": is.token(t, user, "clientagent-cli")}, http.StatusNotFound},
		{"the API's list route", "function-url-events.json", map[string]string{"PATH": "/v1/conversations", "METHOD": "GET", "QUERY": "", "TOKEN": is.token(t, user, "clientagent-web")}, http.StatusNotFound},
		{"the API's turn route", "function-url-events.json", map[string]string{"PATH": "/v1/conversations/c_nosuch/turns/t_nosuch", "METHOD": "GET", "QUERY": "", "TOKEN": is.token(t, user, "clientagent-web")}, http.StatusNotFound},
		{"outside /v1", "function-url-events.json", map[string]string{"PATH": "/", "METHOD": "GET", "QUERY": "", "TOKEN": is.token(t, user, "clientagent-web")}, http.StatusNotFound},
	}
	for _, tt := range tests {
		resp := stream(t, f, event(t, tt.ev, tt.vars))
		if resp.StatusCode != tt.want {
			t.Errorf("%s: status %d, want %d; headers %v, body %q", tt.name, resp.StatusCode, tt.want, resp.Headers, resp.Body)
		}
	}
}

// Issue 15: the owner's stream through the function as built for Lambda:
// a turn the api function started is on it (turn.started), streamed as
// Server-Sent Events, until the stream's bound (timeout=1 here); another
// user's token gets 404 for the same conversation.
func TestEventsStreamThroughFunctions(t *testing.T) {
	t.Parallel()
	is := newOIDCIssuer(t)
	valkey, aws := valkeyURL(t), newFakeAWS(t)
	api := startFunction(t, "api", stepEnv(valkey, aws, nil))
	f := startFunction(t, "events", eventsEnv(valkey, is))
	api.awaitReady()
	f.awaitReady()
	user := valkeytest.ID(t, "user")
	var conv struct {
		ID string `json:"conversation_id"`
	}
	request(t, api, event(t, "apigw-v2-create-conversation.json", map[string]string{"USER": user}), http.StatusCreated, &conv)
	var started struct {
		TurnID string `json:"turn_id"`
	}
	request(t, api, event(t, "apigw-v2-post-message.json", map[string]string{"USER": user, "CID": conv.ID, "TEXT": "Create a PNG image with the word Popelnase"}),
		http.StatusAccepted, &started)

	vars := map[string]string{"PATH": "/v1/conversations/" + conv.ID + "/events", "METHOD": "GET", "QUERY": "timeout=1",
		"TOKEN": is.token(t, user, "clientagent-web")}
	resp := stream(t, f, event(t, "function-url-events.json", vars))
	body := string(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Headers["Content-Type"], "text/event-stream") {
		t.Fatalf("events = %d %v %q, want 200 text/event-stream", resp.StatusCode, resp.Headers, body)
	}
	if !strings.Contains(body, "event: turn.started\n") || !strings.Contains(body, started.TurnID) {
		t.Errorf("events body = %q, want the turn.started of %s", body, started.TurnID)
	}

	vars["TOKEN"] = is.token(t, valkeytest.ID(t, "other"), "clientagent-web")
	if resp := stream(t, f, event(t, "function-url-events.json", vars)); resp.StatusCode != http.StatusNotFound {
		t.Errorf("events for another user = %d %q, want 404", resp.StatusCode, resp.Body)
	}
}

// Without the issuer the function does not start, and says why.
func TestEventsColdStartWithoutIssuer(t *testing.T) {
	t.Parallel()
	env := eventsEnv(valkeyURL(t), &oidcIssuer{})
	delete(env, "CLIENTAGENT_JWT_ISSUER")
	f := startFunction(t, "events", env)
	select {
	case <-f.exited:
	case <-f.ready:
		t.Fatal("events asked for an event without CLIENTAGENT_JWT_ISSUER")
	case <-time.After(20 * time.Second):
		t.Fatal("events neither exited nor asked for an event")
	}
	if f.waitErr == nil || !strings.Contains(f.out.String(), "CLIENTAGENT_JWT_ISSUER") {
		t.Errorf("events exited with %v, output %q; want a failure naming CLIENTAGENT_JWT_ISSUER", f.waitErr, f.out)
	}
}
