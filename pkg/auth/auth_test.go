package auth

import (
	"bytes"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestLocalRoundTrip(t *testing.T) {
	t.Parallel()
	l := &Local{Key: []byte("0123456789abcdef0123456789abcdef")}
	tok, err := l.Mint("alice")
	if err != nil {
		t.Fatal(err)
	}
	other := &Local{Key: []byte("another-key-another-key-another-")}
	expired := &Local{Key: l.Key, TTL: -time.Minute}
	old, _ := expired.Mint("alice")
	tests := []struct {
		name, header, want string
		ok                 bool
	}{
		{"valid", "Bearer " + tok, "alice", true},
		{"missing", "", "", false},
		{"not bearer", "Basic abc", "", false},
		{"garbage", "Bearer abc.def.ghi", "", false},
		{"expired", "Bearer " + old, "", false},
	}
	for _, tc := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		got, err := l.Subject(r)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%s: Subject() = %q, %v; want %q ok=%v", tc.name, got, err, tc.want, tc.ok)
		}
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	if _, err := other.Subject(r); err == nil {
		t.Errorf("Subject() with another key accepted the token")
	}
}

// A token whose exp, nbf or iat is not a JSON number is refused, even when
// the string holds a number the JWT library would accept ("exp":"…").
func TestLocalRefusesNonNumericTimeClaims(t *testing.T) {
	t.Parallel()
	l := &Local{Key: []byte("0123456789abcdef0123456789abcdef")}
	future := time.Now().Add(time.Hour).Unix()
	sign := func(claims jwt.MapClaims) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(l.signingKey())
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	base := func(extra map[string]any) jwt.MapClaims {
		c := jwt.MapClaims{"sub": "alice", "iss": "clientagent-local", "aud": DefaultAudience, "exp": future}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	tests := []struct {
		name   string
		claims jwt.MapClaims
		ok     bool
	}{
		{"numbers", base(map[string]any{"iat": time.Now().Unix() - 60, "nbf": time.Now().Unix() - 60}), true},
		{"exp a numeric string", base(map[string]any{"exp": strconv.FormatInt(future, 10)}), false},
		{"exp a word", base(map[string]any{"exp": "tomorrow"}), false},
		{"exp an object", base(map[string]any{"exp": map[string]any{"n": future}}), false},
		{"exp null", base(map[string]any{"exp": nil}), false},
		{"nbf a string", base(map[string]any{"nbf": "0"}), false},
		{"iat a string", base(map[string]any{"iat": "0"}), false},
		{"iat a boolean", base(map[string]any{"iat": true}), false},
		{"no exp", jwt.MapClaims{"sub": "alice", "iss": "clientagent-local"}, false},
	}
	for _, tc := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+sign(tc.claims))
		got, err := l.Subject(r)
		if (err == nil) != tc.ok || (tc.ok && got != "alice") {
			t.Errorf("%s: Subject() = %q, %v; want ok=%v", tc.name, got, err, tc.ok)
		}
	}
}

// Tokens are signed with a key derived for tokens alone: a token signed with
// the stack's master key itself (the key the artifact links derive theirs
// from) is refused, and the token key is neither the master key nor the
// link key.
func TestLocalSignsWithAPurposeKey(t *testing.T) {
	t.Parallel()
	master := []byte("0123456789abcdef0123456789abcdef")
	l := &Local{Key: master}
	raw, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Subject: "alice", Issuer: "clientagent-local", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)),
	}).SignedString(master)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+raw)
	if got, err := l.Subject(r); err == nil {
		t.Errorf("Subject(token signed with the master key) = %q, want refused", got)
	}
	tok, _ := l.Mint("alice")
	if _, err := jwt.Parse(tok, func(*jwt.Token) (any, error) { return master, nil }); err == nil {
		t.Errorf("a minted token verifies with the master key; want a derived key")
	}
	if k := DeriveKey(master, PurposeJWT); bytes.Equal(k, master) || bytes.Equal(k, DeriveKey(master, "clientagent/artifact-links/v1")) {
		t.Errorf("DeriveKey(%s) is the master or the link key", PurposeJWT)
	}
}

// Issue 24, point 8: the audience is checked as API Gateway's JWT
// authorizer checks it on AWS. A token for another service (or for none)
// is refused even when our key signed it; the minted one carries ours.
func TestLocalChecksAudience(t *testing.T) {
	t.Parallel()
	l := &Local{Key: []byte("0123456789abcdef0123456789abcdef")}
	exp := time.Now().Add(time.Hour).Unix()
	sign := func(aud any) string {
		c := jwt.MapClaims{"sub": "alice", "iss": "clientagent-local", "exp": exp}
		if aud != nil {
			c["aud"] = aud
		}
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(l.signingKey())
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	minted, err := l.Mint("alice")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, token string
		ok          bool
	}{
		{"minted", minted, true},
		{"ours", sign(DefaultAudience), true},
		{"ours among others", sign([]string{"some-other-service", DefaultAudience}), true},
		{"another service", sign("some-other-service"), false},
		{"others only", sign([]string{"a", "b"}), false},
		{"empty", sign(""), false},
		{"none", sign(nil), false},
	}
	for _, tc := range tests {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+tc.token)
		got, err := l.Subject(r)
		if (err == nil) != tc.ok || (tc.ok && got != "alice") {
			t.Errorf("%s: Subject() = %q, %v; want ok=%v", tc.name, got, err, tc.ok)
		}
	}
	var claims jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(minted, &claims); err != nil || len(claims.Audience) != 1 || claims.Audience[0] != DefaultAudience {
		t.Errorf("minted aud = %v (%v), want [%s]", claims.Audience, err, DefaultAudience)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+minted)
	if _, err := (&Local{Key: l.Key, Audience: "another-stack"}).Subject(r); err == nil {
		t.Errorf("a stack with audience another-stack accepted a token minted for %s", DefaultAudience)
	}
}

// A verified token is remembered until it expires, and then refused as
// any expired token is; a token that failed is never remembered, and one
// stack's verified token is nothing to another's.
func TestLocalRemembersAVerifiedTokenUntilItExpires(t *testing.T) {
	t.Parallel()
	now := time.Now()
	l := &Local{Key: []byte("0123456789abcdef0123456789abcdef"), TTL: time.Hour, now: func() time.Time { return now }}
	tok, err := l.Mint("alice")
	if err != nil {
		t.Fatal(err)
	}
	subject := func(l *Local, tok string) (string, error) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		return l.Subject(r)
	}
	for range 3 {
		if got, err := subject(l, tok); err != nil || got != "alice" {
			t.Fatalf("Subject = %q, %v", got, err)
		}
	}
	if len(l.verified.tokens) != 1 {
		t.Errorf("%d tokens remembered, want 1", len(l.verified.tokens))
	}
	other := &Local{Key: []byte("another-key-another-key-another-")}
	if _, err := subject(other, tok); err == nil {
		t.Error("another stack accepted the token")
	}
	tampered := tok[:len(tok)-2] + "AA"
	if _, err := subject(l, tampered); err == nil {
		t.Error("a token with another signature was accepted")
	}
	if len(l.verified.tokens) != 1 {
		t.Errorf("%d tokens remembered after a failure, want 1", len(l.verified.tokens))
	}
	now = now.Add(time.Hour + time.Second)
	if _, err := subject(l, tok); err == nil {
		t.Error("the remembered token was accepted after its exp")
	}
	if len(l.verified.tokens) != 0 {
		t.Errorf("%d tokens remembered after the expiry, want 0", len(l.verified.tokens))
	}
}

// BenchmarkLocalSubject: a request's token verified afresh, and one
// verified before (the page's every request after its first).
func BenchmarkLocalSubject(b *testing.B) {
	l := &Local{Key: []byte("0123456789abcdef0123456789abcdef")}
	tok, err := l.Mint("alice")
	if err != nil {
		b.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	b.Run("afresh", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			l.verified = verifiedTokens{}
			if _, err := l.Subject(r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("remembered", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := l.Subject(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
