package agents

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A specialist may not make the platform read its own network: by default
// (the local stack included) a returned file URL on loopback is refused,
// directly, by a name, or through a redirect from an allowed origin; only
// the allowed origin itself, or AllowPrivateFiles, lets it through.
func TestReturnedFilesOnlyFromPublicAddresses(t *testing.T) {
	t.Parallel()
	secret := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("internal secret"))
	}))
	t.Cleanup(secret.Close)
	own := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hop" {
			http.Redirect(w, r, secret.URL+"/x", http.StatusFound)
			return
		}
		_, _ = w.Write([]byte("own file"))
	}))
	t.Cleanup(own.Close)
	port := secret.URL[strings.LastIndex(secret.URL, ":")+1:]

	def := NewInvoker(InvokerOptions{FileOrigins: []string{own.URL}})
	open := NewInvoker(InvokerOptions{AllowPrivateFiles: true})
	tests := []struct {
		name string
		inv  *Invoker
		url  string
		ok   bool
	}{
		{"loopback", def, secret.URL + "/x", false},
		{"localhost by name", def, "http://localhost:" + port + "/x", false},
		{"redirect from the allowed origin", def, own.URL + "/hop", false},
		{"the allowed origin", def, own.URL + "/f", true},
		{"AllowPrivateFiles", open, secret.URL + "/x", true},
	}
	for _, tc := range tests {
		body, _, _, err := tc.inv.download(t.Context(), tc.url)
		if err == nil {
			body.Close()
		}
		if tc.ok && err != nil {
			t.Errorf("%s: download(%s) = %v, want the file", tc.name, tc.url, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "not a public address")) {
			t.Errorf("%s: download(%s) = %v, want it refused as not a public address", tc.name, tc.url, err)
		}
	}
}
