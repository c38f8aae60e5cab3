package devstack

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Issue 14: the stack signs tokens and artifact links with two keys derived
// separately from its signing key, so neither the key itself nor one
// purpose's signature passes for the other: a JWT signed with the raw
// signing key is 401, a link signed with it is 403, while the stack's own
// token and links work.
func TestTokensAndLinksUseSeparateKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, c := stack(t, nil, func(cfg *Config) { cfg.DataDir = dir })
	key, err := os.ReadFile(filepath.Join(dir, "signing.key"))
	if err != nil {
		t.Fatal(err)
	}
	cid := c.newConversation()
	aid := c.upload(cid, "a.txt", "text/plain", "hello")

	raw, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{
		Subject: "dev", Issuer: "clientagent-local", ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour)),
	}).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	rawClient := &client{t: t, base: st.URL(), token: raw}
	if code := rawClient.do("GET", "/v1/conversations", nil, nil); code != http.StatusUnauthorized {
		t.Errorf("GET with a JWT signed by the raw signing key = %d, want 401", code)
	}

	var link struct {
		URL string `json:"url"`
	}
	if code := c.do("GET", "/v1/conversations/"+cid+"/artifacts/"+aid+"?redirect=false", nil, &link); code != http.StatusOK || link.URL == "" {
		t.Fatalf("GET artifact link = %d %+v, want 200 with a url", code, link)
	}
	get := func(u string) int {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(link.URL); code != http.StatusOK {
		t.Errorf("GET the stack's own link = %d, want 200", code)
	}
	exp := time.Now().Add(time.Minute).Unix()
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s/%s\n%d", cid, aid, exp)
	forged := fmt.Sprintf("%s/files/%s/%s?exp=%d&sig=%s", st.URL(), cid, aid, exp, hex.EncodeToString(m.Sum(nil)))
	if code := get(forged); code != http.StatusForbidden {
		t.Errorf("GET a link signed with the raw signing key = %d, want 403", code)
	}
}
