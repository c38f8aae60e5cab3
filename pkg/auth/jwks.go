package auth

import (
	"context"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// ErrKeysUnavailable is wrapped by JWKS.Subject when the issuer's keys
// could not be fetched: the token was not checked, so the caller may answer
// "try again" rather than "who are you".
var ErrKeysUnavailable = errors.New("auth: the issuer's signing keys are unavailable")

// Defaults of the JWKS fields left zero.
const (
	// DefaultJWKSTTL is how long fetched keys are used before they are
	// fetched again.
	DefaultJWKSTTL = time.Hour
	// DefaultJWKSMinRefresh is the least time between two fetches, however
	// many tokens name a key id the set lacks: a stream of made-up key ids
	// must not turn into a stream of requests to the issuer.
	DefaultJWKSMinRefresh = 15 * time.Second
	// DefaultLeeway is the clock skew allowed on exp and nbf.
	DefaultLeeway = 30 * time.Second
	// jwksFetchTimeout bounds the discovery and JWKS requests together.
	jwksFetchTimeout = 5 * time.Second
	// maxJWKSBody bounds the discovery document and the key set.
	maxJWKSBody = 1 << 20
	// maxTokenLen bounds a bearer token; real ones are a few KB.
	maxTokenLen = 16 << 10
	// minRSABits refuses keys too short to trust.
	minRSABits = 2048
)

// JWKS verifies bearer JWTs of an OpenID Connect issuer itself, the way the
// HTTP API's JWT authorizer does, for a function no authorizer stands in
// front of (the events function behind its Function URL). A token passes
// when it is signed RS256 by a key of the issuer's key set (the header's
// kid names it; "none", HS256 and every other alg are refused), its iss is
// Issuer exactly, its aud holds one of Audiences — or, when it has no aud,
// its client_id is one of them (Cognito's access tokens carry client_id,
// as API Gateway accepts) —, its exp is present and not past and its nbf
// not future (both within Leeway, as JSON numbers), and it has a sub.
//
// The key set is found through the issuer's discovery document
// (Issuer + "/.well-known/openid-configuration", whose issuer must be
// Issuer and whose jwks_uri must be https), kept for TTL, and fetched again
// early when a token names a key id the set lacks (the issuer rotated its
// keys), at most once per MinRefresh. When a fetch fails, the keys fetched
// before stay in use. Fetches are serialized: the events function serves
// one request at a time. Use a JWKS by pointer, from any goroutine.
type JWKS struct {
	// Issuer is the https issuer URL the tokens name (iss).
	Issuer string
	// Audiences are the accepted aud (or client_id) values; at least one.
	Audiences []string
	// Client fetches the discovery document and the key set (nil:
	// http.DefaultClient); each fetch has its own deadline.
	Client *http.Client
	// TTL, MinRefresh and Leeway: zero means DefaultJWKSTTL,
	// DefaultJWKSMinRefresh and DefaultLeeway.
	TTL        time.Duration
	MinRefresh time.Duration
	Leeway     time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Logger records failed fetches (nil: slog.Default()); a token that
	// does not pass is the caller's 401, not logged here.
	Logger *slog.Logger

	mu      sync.Mutex
	keys    map[string]*rsa.PublicKey // by kid
	fetched time.Time                 // when keys were fetched
	tried   time.Time                 // the last fetch, whatever its outcome
}

// JWKSFromEnv is the JWKS of the environment:
//
//	CLIENTAGENT_JWT_ISSUER    the https issuer URL (the HTTP API authorizer's)
//	CLIENTAGENT_JWT_AUDIENCE  the accepted audiences, comma-separated
//
// Both are required. It makes no request: the keys are fetched at the
// first token.
func JWKSFromEnv(getenv func(string) string) (*JWKS, error) {
	j := &JWKS{Issuer: strings.TrimSpace(getenv("CLIENTAGENT_JWT_ISSUER"))}
	for _, a := range strings.Split(getenv("CLIENTAGENT_JWT_AUDIENCE"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			j.Audiences = append(j.Audiences, a)
		}
	}
	if err := j.validate(); err != nil {
		return nil, err
	}
	return j, nil
}

// validate checks the configuration.
func (j *JWKS) validate() error {
	u, err := url.Parse(j.Issuer)
	switch {
	case j.Issuer == "":
		return errors.New("CLIENTAGENT_JWT_ISSUER must be set (the https URL of the JWT issuer)")
	case err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("CLIENTAGENT_JWT_ISSUER %q: want an https URL", j.Issuer)
	case len(j.Audiences) == 0:
		return errors.New("CLIENTAGENT_JWT_AUDIENCE must be set (the accepted audiences, comma-separated)")
	}
	return nil
}

// Subject verifies the request's bearer token and returns its sub. A
// missing or invalid token is ErrUnauthenticated; keys that could not be
// fetched are an error wrapping ErrKeysUnavailable.
func (j *JWKS) Subject(r *http.Request) (string, error) {
	tok, ok := bearer(r)
	if !ok || len(tok) > maxTokenLen {
		return "", ErrUnauthenticated
	}
	var fetchErr error
	var claims oidcClaims
	_, err := jwt.ParseWithClaims(tok, &claims, func(t *jwt.Token) (any, error) {
		// WithValidMethods has refused every other alg; this keeps an RSA
		// key from ever meeting another method.
		if t.Method != jwt.SigningMethodRS256 {
			return nil, errors.New("not RS256")
		}
		kid, _ := t.Header["kid"].(string)
		if kid == "" {
			return nil, errors.New("no kid")
		}
		k, err := j.key(r.Context(), kid)
		if errors.Is(err, ErrKeysUnavailable) {
			fetchErr = err
		}
		return k, err
	},
		jwt.WithValidMethods([]string{jwt.SigningMethodRS256.Alg()}),
		jwt.WithIssuer(j.Issuer),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(j.leeway()),
		jwt.WithTimeFunc(j.now),
	)
	if fetchErr != nil {
		return "", fetchErr
	}
	if err != nil || claims.Subject == "" || !claims.audienceIn(j.Audiences) {
		return "", ErrUnauthenticated
	}
	return claims.Subject, nil
}

// oidcClaims are the claims JWKS reads: the registered ones, with the time
// claims required to be JSON numbers (localClaims), and client_id.
type oidcClaims struct {
	jwt.RegisteredClaims
	ClientID string
}

func (c *oidcClaims) UnmarshalJSON(b []byte) error {
	var l localClaims
	if err := json.Unmarshal(b, &l); err != nil {
		return err
	}
	var x struct {
		ClientID any `json:"client_id"`
	}
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	id, ok := x.ClientID.(string)
	if x.ClientID != nil && !ok {
		return errors.New("claim client_id is not a string")
	}
	c.RegisteredClaims, c.ClientID = l.RegisteredClaims, id
	return nil
}

// audienceIn reports whether aud holds one of want, or, when there is no
// aud, client_id is one of them (API Gateway's rule).
func (c *oidcClaims) audienceIn(want []string) bool {
	if len(c.Audience) == 0 {
		return c.ClientID != "" && slices.Contains(want, c.ClientID)
	}
	for _, a := range c.Audience {
		if a != "" && slices.Contains(want, a) {
			return true
		}
	}
	return false
}

// key returns the key kid names, fetching the key set when it is stale or
// lacks kid and the last fetch is at least MinRefresh old.
func (j *JWKS) key(ctx context.Context, kid string) (*rsa.PublicKey, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := j.now()
	if k, ok := j.keys[kid]; ok && now.Sub(j.fetched) < j.ttl() {
		return k, nil
	}
	if j.tried.IsZero() || now.Sub(j.tried) >= j.minRefresh() {
		j.tried = now
		keys, err := j.fetch(ctx)
		switch {
		case err == nil:
			j.keys, j.fetched = keys, now
		case j.keys == nil:
			j.logger().WarnContext(ctx, "jwks fetch", "issuer", j.Issuer, "error", err.Error())
			return nil, fmt.Errorf("%w: %v", ErrKeysUnavailable, err)
		default:
			j.logger().WarnContext(ctx, "jwks fetch; the keys fetched before stay in use", "issuer", j.Issuer, "error", err.Error())
		}
	} else if j.keys == nil {
		return nil, fmt.Errorf("%w: the last fetch failed less than %v ago", ErrKeysUnavailable, j.minRefresh())
	}
	if k, ok := j.keys[kid]; ok {
		return k, nil
	}
	return nil, fmt.Errorf("no key %q in the issuer's key set", kid)
}

// fetch reads the issuer's discovery document and then its key set.
func (j *JWKS) fetch(ctx context.Context) (map[string]*rsa.PublicKey, error) {
	ctx, cancel := context.WithTimeout(ctx, jwksFetchTimeout)
	defer cancel()
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := j.getJSON(ctx, strings.TrimSuffix(j.Issuer, "/")+"/.well-known/openid-configuration", &doc); err != nil {
		return nil, err
	}
	if doc.Issuer != j.Issuer {
		return nil, fmt.Errorf("the discovery document's issuer is %q, want %q", doc.Issuer, j.Issuer)
	}
	if u, err := url.Parse(doc.JWKSURI); err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("jwks_uri %q: want an https URL", doc.JWKSURI)
	}
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := j.getJSON(ctx, doc.JWKSURI, &set); err != nil {
		return nil, err
	}
	keys := map[string]*rsa.PublicKey{}
	for _, k := range set.Keys {
		// Keys for other uses or algorithms, or unreadable ones, are not
		// ours to verify with; the rest of the set still counts.
		if pub, ok := k.rs256(); ok {
			keys[k.Kid] = pub
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s has no RS256 signing key", doc.JWKSURI)
	}
	return keys, nil
}

func (j *JWKS) getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("get %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	c := j.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get %s: status %d", u, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBody+1))
	if err != nil {
		return fmt.Errorf("get %s: %w", u, err)
	}
	if len(b) > maxJWKSBody {
		return fmt.Errorf("get %s: more than %d bytes", u, maxJWKSBody)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("get %s: %w", u, err)
	}
	return nil
}

// jwk is one key of a JSON Web Key Set (RFC 7517), the RSA fields only.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	N   string `json:"n"`
	E   string `json:"e"`
}

// rs256 is the RSA public key of an RS256 signing key with a kid.
func (k jwk) rs256() (*rsa.PublicKey, bool) {
	if k.Kty != "RSA" || k.Kid == "" || (k.Use != "" && k.Use != "sig") || (k.Alg != "" && k.Alg != "RS256") {
		return nil, false
	}
	nb, err := base64.RawURLEncoding.DecodeString(k.N)
	if err != nil {
		return nil, false
	}
	eb, err := base64.RawURLEncoding.DecodeString(k.E)
	if err != nil || len(eb) == 0 || len(eb) > 4 {
		return nil, false
	}
	n := new(big.Int).SetBytes(nb)
	e := int(new(big.Int).SetBytes(eb).Int64())
	if n.BitLen() < minRSABits || e < 3 || e%2 == 0 {
		return nil, false
	}
	return &rsa.PublicKey{N: n, E: e}, true
}

func (j *JWKS) now() time.Time {
	if j.Now != nil {
		return j.Now()
	}
	return time.Now()
}

func (j *JWKS) ttl() time.Duration        { return orDefault(j.TTL, DefaultJWKSTTL) }
func (j *JWKS) minRefresh() time.Duration { return orDefault(j.MinRefresh, DefaultJWKSMinRefresh) }
func (j *JWKS) leeway() time.Duration     { return orDefault(j.Leeway, DefaultLeeway) }

func (j *JWKS) logger() *slog.Logger {
	if j.Logger != nil {
		return j.Logger
	}
	return slog.Default()
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
