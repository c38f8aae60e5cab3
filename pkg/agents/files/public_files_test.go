package files

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A specialist may not make the platform read its own network: by default
// (the local stack included) a returned file URL on loopback is refused,
// directly, by a name, or through a redirect from an allowed origin; only
// the allowed origin itself, or AllowPrivate, lets it through.
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

	def := NewFetcher(Options{Origins: []string{own.URL}})
	open := NewFetcher(Options{AllowPrivate: true})
	tests := []struct {
		name string
		f    *Fetcher
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
		d, err := tc.f.Open(t.Context(), tc.url)
		if err == nil {
			d.Close()
		}
		if tc.ok && err != nil {
			t.Errorf("%s: Open(%s) = %v, want the file", tc.name, tc.url, err)
		}
		if !tc.ok && (err == nil || !strings.Contains(err.Error(), "not a public address")) {
			t.Errorf("%s: Open(%s) = %v, want it refused as not a public address", tc.name, tc.url, err)
		}
	}
}
