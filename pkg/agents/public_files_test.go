package agents

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A specialist may not make the platform read its own network: with
// PublicFilesOnly, a returned file URL on loopback (directly or through a
// redirect from elsewhere) is refused.
func TestPublicFilesOnly(t *testing.T) {
	t.Parallel()
	secret := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("internal secret"))
	}))
	t.Cleanup(secret.Close)

	open := NewInvoker(InvokerOptions{})
	body, _, err := open.download(t.Context(), secret.URL+"/x")
	if err != nil {
		t.Fatalf("download() without PublicFilesOnly = %v, want the local file", err)
	}
	body.Close()

	guarded := NewInvoker(InvokerOptions{PublicFilesOnly: true})
	_, _, err = guarded.download(t.Context(), secret.URL+"/x")
	if err == nil || !strings.Contains(err.Error(), "not a public address") {
		t.Errorf("download() of a loopback URL = %v, want it refused", err)
	}
}
