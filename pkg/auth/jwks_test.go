package auth

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// testKeys are RSA keys made once for every test (2048-bit generation is
// slow enough to share).
var testKeys = sync.OnceValue(func() [3]*rsa.PrivateKey {
	var ks [3]*rsa.PrivateKey
	for i := range ks {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		ks[i] = k
	}
	return ks
})

// issuer is an OpenID Connect issuer in process: the discovery document
// and a key set the test may change, over TLS, counting key-set fetches.
type issuer struct {
	srv     *httptest.Server
	fetches atomic.Int64

	mu     sync.Mutex
	keys   map[string]*rsa.PublicKey
	docIss string // the discovery document's issuer ("" → the server's URL)
	down   bool   // answer 503
}

func newIssuer(t *testing.T, keys map[string]*rsa.PublicKey) *issuer {
	t.Helper()
	is := &issuer{keys: keys}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		is.mu.Lock()
		defer is.mu.Unlock()
		if is.down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		iss := is.docIss
		if iss == "" {
			iss = is.srv.URL
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": iss, "jwks_uri": is.srv.URL + "/keys.json"})
	})
	mux.HandleFunc("GET /keys.json", func(w http.ResponseWriter, r *http.Request) {
		is.fetches.Add(1)
		is.mu.Lock()
		defer is.mu.Unlock()
		if is.down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		set := []map[string]string{
			// Keys JWKS must skip: an encryption key and an EC key.
			{"kty": "RSA", "kid": "enc", "use": "enc", "n": "AQAB", "e": "AQAB"},
			{"kty": "EC", "kid": "ec", "crv": "P-256", "x": "AA", "y": "AA"},
		}
		for kid, k := range is.keys {
			set = append(set, map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
				"n": base64.RawURLEncoding.EncodeToString(k.N.Bytes()),
				"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.E)).Bytes())})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": set})
	})
	is.srv = httptest.NewTLSServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

func (is *issuer) set(f func(is *issuer)) {
	is.mu.Lock()
	defer is.mu.Unlock()
	f(is)
}

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

var testNow = time.Date(2026, 3, 12, 19, 4, 0, 0, time.UTC)

func newJWKS(is *issuer, c *clock) *JWKS {
	return &JWKS{Issuer: is.srv.URL, Audiences: []string{"web", "cli"}, Client: is.srv.Client(), Now: c.Now, Logger: slog.New(slog.DiscardHandler)}
}

// claims are a valid token's claims for is, changed by edit.
func claimsFor(is *issuer, edit func(jwt.MapClaims)) jwt.MapClaims {
	c := jwt.MapClaims{"iss": is.srv.URL, "aud": "web", "sub": "alice",
		"iat": testNow.Unix(), "exp": testNow.Add(3 * time.Hour).Unix()}
	if edit != nil {
		edit(c)
	}
	return c
}

func signRS(t *testing.T, m jwt.SigningMethod, kid string, key *rsa.PrivateKey, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func subject(j *JWKS, token string) (string, error) {
	r := httptest.NewRequest("GET", "/v1/conversations/c_1/events", nil)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return j.Subject(r)
}

func TestJWKSSubject(t *testing.T) {
	t.Parallel()
	ks := testKeys()
	is := newIssuer(t, map[string]*rsa.PublicKey{"k1": &ks[0].PublicKey})
	c := &clock{t: testNow}
	j := newJWKS(is, c)
	rs := func(edit func(jwt.MapClaims)) string {
		return signRS(t, jwt.SigningMethodRS256, "k1", ks[0], claimsFor(is, edit))
	}
	// alg confusion: HS256 keyed with the public key's bytes, as a
	// verifier that hands its RSA key to any method would check it.
	pubDER := x509.MarshalPKCS1PublicKey(&ks[0].PublicKey)
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, claimsFor(is, nil))
	hs.Header["kid"] = "k1"
	hsTok, _ := hs.SignedString(pubDER)
	none := jwt.NewWithClaims(jwt.SigningMethodNone, claimsFor(is, nil))
	none.Header["kid"] = "k1"
	noneTok, _ := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	// A signature made with another key under the known kid.
	forged := signRS(t, jwt.SigningMethodRS256, "k1", ks[1], claimsFor(is, nil))
	valid := rs(nil)
	tampered := valid[:strings.LastIndex(valid, ".")] + "." + base64.RawURLEncoding.EncodeToString(make([]byte, 256))

	tests := []struct {
		name, token, want string
	}{
		{"valid", valid, "alice"},
		{"aud list holding one of ours", rs(func(c jwt.MapClaims) { c["aud"] = []string{"other", "cli"} }), "alice"},
		{"Cognito access token: client_id, no aud", rs(func(c jwt.MapClaims) { delete(c, "aud"); c["client_id"] = "cli" }), "alice"},
		{"expired within the leeway", rs(func(c jwt.MapClaims) { c["exp"] = testNow.Add(-10 * time.Second).Unix() }), "alice"},
		{"nbf within the leeway", rs(func(c jwt.MapClaims) { c["nbf"] = testNow.Add(10 * time.Second).Unix() }), "alice"},

		{"no token", "", ""},
		{"garbage", "abc.def.ghi", ""},
		{"wrong audience", rs(func(c jwt.MapClaims) { c["aud"] = "someone-else" }), ""},
		{"empty audience list", rs(func(c jwt.MapClaims) { c["aud"] = []string{} }), ""},
		{"wrong client_id, no aud", rs(func(c jwt.MapClaims) { delete(c, "aud"); c["client_id"] = "other" }), ""},
		{"aud wins over client_id", rs(func(c jwt.MapClaims) { c["aud"] = "other"; c["client_id"] = "web" }), ""},
		{"neither aud nor client_id", rs(func(c jwt.MapClaims) { delete(c, "aud") }), ""},
		{"wrong issuer", rs(func(c jwt.MapClaims) { c["iss"] = "https://evil.example.com" }), ""},
		{"issuer with a trailing slash", rs(func(c jwt.MapClaims) { c["iss"] = is.srv.URL + "/" }), ""},
		{"expired", rs(func(c jwt.MapClaims) { c["exp"] = testNow.Add(-time.Minute).Unix() }), ""},
		{"no exp", rs(func(c jwt.MapClaims) { delete(c, "exp") }), ""},
		{"exp as a string", rs(func(c jwt.MapClaims) { c["exp"] = "9999999999" }), ""},
		{"not yet valid", rs(func(c jwt.MapClaims) { c["nbf"] = testNow.Add(time.Minute).Unix() }), ""},
		{"no sub", rs(func(c jwt.MapClaims) { delete(c, "sub") }), ""},
		{"client_id not a string", rs(func(c jwt.MapClaims) { delete(c, "aud"); c["client_id"] = 7 }), ""},
		{"signed by another key", forged, ""},
		{"signature replaced", tampered, ""},
		{"alg none", noneTok, ""},
		{"HS256 keyed with the public key", hsTok, ""},
		{"RS512", signRS(t, jwt.SigningMethodRS512, "k1", ks[0], claimsFor(is, nil)), ""},
		{"PS256", signRS(t, jwt.SigningMethodPS256, "k1", ks[0], claimsFor(is, nil)), ""},
		{"no kid", signRS(t, jwt.SigningMethodRS256, "", ks[0], claimsFor(is, nil)), ""},
		{"an encryption key's kid", signRS(t, jwt.SigningMethodRS256, "enc", ks[0], claimsFor(is, nil)), ""},
	}
	for _, tt := range tests {
		got, err := subject(j, tt.token)
		if got != tt.want {
			t.Errorf("%s: Subject() = %q, %v; want %q", tt.name, got, err, tt.want)
		}
		if tt.want == "" && !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%s: Subject() error = %v, want ErrUnauthenticated", tt.name, err)
		}
	}
	if n := is.fetches.Load(); n > 2 {
		t.Errorf("key set fetched %d times for one issuer's tokens, want at most 2 (the first, one unknown kid)", n)
	}
}

// A token naming a key id the cached set lacks makes JWKS fetch the set
// again (the issuer rotated its keys) — at most once per MinRefresh.
func TestJWKSUnknownKid(t *testing.T) {
	t.Parallel()
	ks := testKeys()
	is := newIssuer(t, map[string]*rsa.PublicKey{"k1": &ks[0].PublicKey})
	c := &clock{t: testNow}
	j := newJWKS(is, c)
	tok := func(kid string, key *rsa.PrivateKey) string {
		return signRS(t, jwt.SigningMethodRS256, kid, key, claimsFor(is, nil))
	}
	check := func(step, token, want string, fetches int64) {
		t.Helper()
		got, err := subject(j, token)
		if got != want {
			t.Errorf("%s: Subject() = %q, %v; want %q", step, got, err, want)
		}
		if n := is.fetches.Load(); n != fetches {
			t.Errorf("%s: %d key set fetches, want %d", step, n, fetches)
		}
	}
	check("first token", tok("k1", ks[0]), "alice", 1)
	check("cached", tok("k1", ks[0]), "alice", 1)
	check("unknown kid within MinRefresh of the first fetch: no fetch", tok("nosuch", ks[1]), "", 1)
	c.advance(DefaultJWKSMinRefresh)
	check("unknown kid: fetched again, still unknown", tok("nosuch", ks[1]), "", 2)
	check("unknown kid again within MinRefresh: no fetch", tok("nosuch", ks[1]), "", 2)

	// The issuer rotates: k2 appears. After MinRefresh a k2 token makes
	// JWKS fetch the new set.
	is.set(func(is *issuer) { is.keys["k2"] = &ks[1].PublicKey })
	check("new kid within MinRefresh of the last fetch", tok("k2", ks[1]), "", 2)
	c.advance(DefaultJWKSMinRefresh)
	check("new kid after MinRefresh", tok("k2", ks[1]), "alice", 3)
	check("old kid still in the set", tok("k1", ks[0]), "alice", 3)

	// k1 is withdrawn: once the set is stale (TTL), it is fetched again and
	// k1 tokens fail.
	is.set(func(is *issuer) { delete(is.keys, "k1") })
	check("withdrawn kid before TTL", tok("k1", ks[0]), "alice", 3)
	c.advance(DefaultJWKSTTL)
	check("withdrawn kid after TTL", tok("k1", ks[0]), "", 4)
	check("remaining kid", tok("k2", ks[1]), "alice", 4)
}

// An issuer that cannot be reached: with no keys yet, Subject says the keys
// are unavailable (not a bad token); with keys fetched before, they stay in
// use past their TTL.
func TestJWKSIssuerDown(t *testing.T) {
	t.Parallel()
	ks := testKeys()
	is := newIssuer(t, map[string]*rsa.PublicKey{"k1": &ks[0].PublicKey})
	c := &clock{t: testNow}
	token := signRS(t, jwt.SigningMethodRS256, "k1", ks[0], claimsFor(is, nil))

	cold := newJWKS(is, c)
	is.set(func(is *issuer) { is.down = true })
	if got, err := subject(cold, token); got != "" || !errors.Is(err, ErrKeysUnavailable) {
		t.Errorf("Subject() with the issuer down at the first token = %q, %v; want ErrKeysUnavailable", got, err)
	}
	if got, err := subject(cold, token); got != "" || !errors.Is(err, ErrKeysUnavailable) {
		t.Errorf("Subject() again within MinRefresh = %q, %v; want ErrKeysUnavailable", got, err)
	}

	warm := newJWKS(is, c)
	is.set(func(is *issuer) { is.down = false })
	if got, err := subject(warm, token); got != "alice" {
		t.Fatalf("Subject() = %q, %v; want alice", got, err)
	}
	is.set(func(is *issuer) { is.down = true })
	c.advance(DefaultJWKSTTL + time.Second)
	// The token itself is still valid: it lives three hours.
	if got, err := subject(warm, token); got != "alice" {
		t.Errorf("Subject() with stale keys and the issuer down = %q, %v; want alice (the keys fetched before)", got, err)
	}
}

// The discovery document must name the configured issuer exactly.
func TestJWKSDiscoveryIssuerMismatch(t *testing.T) {
	t.Parallel()
	ks := testKeys()
	is := newIssuer(t, map[string]*rsa.PublicKey{"k1": &ks[0].PublicKey})
	is.set(func(is *issuer) { is.docIss = "https://evil.example.com" })
	j := newJWKS(is, &clock{t: testNow})
	token := signRS(t, jwt.SigningMethodRS256, "k1", ks[0], claimsFor(is, nil))
	if got, err := subject(j, token); got != "" || !errors.Is(err, ErrKeysUnavailable) {
		t.Errorf("Subject() = %q, %v; want ErrKeysUnavailable", got, err)
	}
}

func TestJWKSFromEnv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, issuer, audience string
		wantAud                []string
		ok                     bool
	}{
		{"cognito", "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_abc", "client1", []string{"client1"}, true},
		{"audiences", "https://issuer.example.com/", " web , cli,", []string{"web", "cli"}, true},
		{"no issuer", "", "web", nil, false},
		{"http issuer", "http://issuer.example.com", "web", nil, false},
		{"not a URL", "issuer.example.com", "web", nil, false},
		{"no audience", "https://issuer.example.com", " , ", nil, false},
	}
	for _, tt := range tests {
		env := map[string]string{"CLIENTAGENT_JWT_ISSUER": tt.issuer, "CLIENTAGENT_JWT_AUDIENCE": tt.audience}
		j, err := JWKSFromEnv(func(k string) string { return env[k] })
		if (err == nil) != tt.ok {
			t.Errorf("%s: JWKSFromEnv() error = %v, want ok=%v", tt.name, err, tt.ok)
			continue
		}
		if err == nil && (j.Issuer != tt.issuer || strings.Join(j.Audiences, ",") != strings.Join(tt.wantAud, ",")) {
			t.Errorf("%s: JWKSFromEnv() = %q %q, want %q %q", tt.name, j.Issuer, j.Audiences, tt.issuer, tt.wantAud)
		}
	}
}

var _ Authenticator = (*JWKS)(nil)
