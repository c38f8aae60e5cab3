// Package auth finds the calling user of an API request: on AWS the `sub`
// the HTTP API's JWT authorizer already checked, on one machine a JWT the
// local stack signed itself. It must not know about conversations.
package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// ErrUnauthenticated is returned when a request carries no valid identity.
var ErrUnauthenticated = errors.New("auth: missing or invalid token")

// Authenticator returns the user (JWT subject) a request acts for.
type Authenticator interface {
	Subject(r *http.Request) (string, error)
}

// Local verifies HS256 JWTs signed with a key of the local stack and mints
// them for `clientagent token`. Tokens are signed with a key derived from
// Key for this purpose alone (DeriveKey(Key, PurposeJWT)), so the stack's
// other signatures made from the same Key (artifact links) can never pass
// for a token, nor a token for them.
type Local struct {
	Key    []byte
	Issuer string
	// Audience is the aud a token must carry and Mint writes (default
	// DefaultAudience): as on AWS, where the JWT authorizer checks aud, a
	// token minted for another service is refused.
	Audience string
	TTL      time.Duration

	verified verifiedTokens
	now      func() time.Time // the clock of Subject; nil: time.Now (tests set it)
}

func (l *Local) clock() time.Time {
	if l.now != nil {
		return l.now()
	}
	return time.Now()
}

// verifiedTokens remembers the tokens Subject verified, until each
// expires: a page sends the same token with each of its requests, and
// parsing and checking it again was 2% of the local stack's CPU at 20
// turns at once. A token is its signature too, so the same string verifies
// the same way until its exp; at most maxVerified are kept.
type verifiedTokens struct {
	mu     sync.Mutex
	tokens map[string]verifiedToken
}

type verifiedToken struct {
	subject string
	expires time.Time
}

const maxVerified = 4096

func (v *verifiedTokens) get(tok string, now time.Time) (string, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	t, ok := v.tokens[tok]
	if !ok {
		return "", false
	}
	if !now.Before(t.expires) {
		delete(v.tokens, tok)
		return "", false
	}
	return t.subject, true
}

func (v *verifiedTokens) put(tok string, t verifiedToken) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.tokens == nil || len(v.tokens) >= maxVerified {
		v.tokens = map[string]verifiedToken{}
	}
	v.tokens[tok] = t
}

// DefaultAudience is the local stack's token audience.
const DefaultAudience = "clientagent-local-api"

func (l *Local) audience() string {
	if l.Audience != "" {
		return l.Audience
	}
	return DefaultAudience
}

// PurposeJWT is the DeriveKey purpose of the local stack's token key.
const PurposeJWT = "clientagent/jwt/v1"

// DeriveKey returns the key for one purpose derived from a master key
// (HMAC-SHA256(key, purpose)): each signature the stack makes uses a key of
// its own, and knowing one derived key reveals neither the master key nor
// another purpose's key.
func DeriveKey(key []byte, purpose string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

func (l *Local) signingKey() []byte { return DeriveKey(l.Key, PurposeJWT) }

// LoadOrCreateKey reads the local signing key from path, creating a random
// one (mode 0600) on first use, so tokens survive restarts of the stack.
func LoadOrCreateKey(path string) ([]byte, error) {
	if b, err := os.ReadFile(path); err == nil && len(b) >= 32 {
		return b, nil
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("generate signing key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create key dir: %w", err)
	}
	if err := os.WriteFile(path, key, 0o600); err != nil {
		return nil, fmt.Errorf("write signing key: %w", err)
	}
	return key, nil
}

func (l *Local) issuer() string {
	if l.Issuer != "" {
		return l.Issuer
	}
	return "clientagent-local"
}

// Mint signs a token for user.
func (l *Local) Mint(user string) (string, error) {
	if user == "" {
		return "", errors.New("auth: empty user")
	}
	ttl := l.TTL
	if ttl == 0 {
		ttl = 30 * 24 * time.Hour
	}
	now := time.Now()
	claims := jwt.RegisteredClaims{
		Subject:   user,
		Issuer:    l.issuer(),
		Audience:  jwt.ClaimStrings{l.audience()},
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(l.signingKey())
}

// Subject verifies the request's bearer token: HS256 with the token key,
// our issuer, our audience (a token without aud is refused too), an expiry
// in the future, and exp, nbf and iat (when present)
// JSON numbers — a string such as "exp":"9999999999" is refused, where the
// JWT library would read it as a number.
func (l *Local) Subject(r *http.Request) (string, error) {
	tok, ok := bearer(r)
	if !ok {
		return "", ErrUnauthenticated
	}
	if sub, ok := l.verified.get(tok, l.clock()); ok {
		return sub, nil
	}
	var claims localClaims
	_, err := jwt.ParseWithClaims(tok, &claims, func(*jwt.Token) (any, error) { return l.signingKey(), nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithIssuer(l.issuer()), jwt.WithAudience(l.audience()), jwt.WithExpirationRequired(), jwt.WithTimeFunc(l.clock))
	if err != nil || claims.Subject == "" {
		return "", ErrUnauthenticated
	}
	l.verified.put(tok, verifiedToken{subject: claims.Subject, expires: claims.ExpiresAt.Time})
	return claims.Subject, nil
}

// localClaims are the registered claims, with the time claims required to
// be JSON numbers (RFC 7519 §2 NumericDate).
type localClaims struct {
	jwt.RegisteredClaims
}

func (c *localClaims) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	for _, k := range []string{"exp", "nbf", "iat"} {
		v, ok := raw[k]
		if !ok {
			continue
		}
		// A JSON number, not a string holding one (which json.Number, and so
		// jwt.NumericDate, would accept) nor null.
		var f float64
		if err := json.Unmarshal(v, &f); err != nil || bytes.HasPrefix(bytes.TrimSpace(v), []byte("null")) {
			return fmt.Errorf("claim %s is not a number", k)
		}
	}
	return json.Unmarshal(b, &c.RegisteredClaims)
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const p = "Bearer "
	if len(h) <= len(p) || !strings.EqualFold(h[:len(p)], p) {
		return "", false
	}
	return strings.TrimSpace(h[len(p):]), true
}

// Claims reads the JWT claims the AWS HTTP API authorizer verified for a
// request (supplied by the Lambda adapter).
type Claims func(r *http.Request) (map[string]string, bool)

// Gateway trusts the HTTP API JWT authorizer: API Gateway rejects a bad
// token before the function runs, so the function only reads `sub`.
type Gateway struct{ Claims Claims }

// Subject returns the authorizer's `sub` claim.
func (g Gateway) Subject(r *http.Request) (string, error) {
	c, ok := g.Claims(r)
	if !ok || c["sub"] == "" {
		return "", ErrUnauthenticated
	}
	return c["sub"], nil
}
