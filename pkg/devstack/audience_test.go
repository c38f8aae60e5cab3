package devstack

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/clientagent/clientagent/pkg/auth"
)

// Issue 24, point 8: the local stack checks a token's audience as the JWT
// authorizer does on AWS. A token signed with the stack's own token key,
// with its issuer and a valid expiry, but for "some-other-service" (or for
// no audience) is 401; the stack's own token passes.
func TestTokenAudience(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, c := stack(t, nil, func(cfg *Config) { cfg.DataDir = dir })
	master, err := os.ReadFile(filepath.Join(dir, "signing.key"))
	if err != nil {
		t.Fatal(err)
	}
	sign := func(aud jwt.ClaimStrings) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
			Subject: "dev", Issuer: "clientagent-local", Audience: aud, ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)),
		}).SignedString(auth.DeriveKey(master, auth.PurposeJWT))
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	tests := []struct {
		name, token string
		want        int
	}{
		{"the stack's token", c.token, http.StatusOK},
		{"our audience", sign(jwt.ClaimStrings{auth.DefaultAudience}), http.StatusOK},
		{"another service's audience", sign(jwt.ClaimStrings{"some-other-service"}), http.StatusUnauthorized},
		{"no audience", sign(nil), http.StatusUnauthorized},
	}
	for _, tc := range tests {
		other := &client{t: t, base: st.URL(), token: tc.token}
		if got := other.do("GET", "/v1/conversations", nil, nil); got != tc.want {
			t.Errorf("%s: GET /v1/conversations = %d, want %d", tc.name, got, tc.want)
		}
	}
}
