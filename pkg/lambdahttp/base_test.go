package lambdahttp

import (
	"crypto/tls"
	"net/http/httptest"
	"testing"
)

// The demo agents' cards, the guardian demo's and clientagent's own A2A
// card name the base a request reached them at, the same way.
func TestRequestBase(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, proto string
		tls         bool
		want        string
	}{
		{"plain", "", false, "http://agents.example:8080"},
		{"TLS", "", true, "https://agents.example:8080"},
		{"behind a Function URL", "https", false, "https://agents.example:8080"},
		{"a forged scheme is ignored", "gopher", true, "https://agents.example:8080"},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("GET", "http://agents.example:8080/x", nil)
		r.TLS = nil
		if tt.tls {
			r.TLS = &tls.ConnectionState{}
		}
		if tt.proto != "" {
			r.Header.Set("X-Forwarded-Proto", tt.proto)
		}
		if got := RequestBase(r); got != tt.want {
			t.Errorf("%s: RequestBase() = %q, want %q", tt.name, got, tt.want)
		}
	}
}
