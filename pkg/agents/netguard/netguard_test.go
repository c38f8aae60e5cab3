package netguard

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func TestPublic(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr string
		want bool
	}{
		{"8.8.8.8", true},
		{"2606:4700::1111", true},
		{"127.0.0.1", false},
		{"127.1.2.3", false},
		{"::1", false},
		{"::ffff:127.0.0.1", false},
		{"10.0.0.1", false},
		{"172.16.5.4", false},
		{"192.168.1.1", false},
		{"169.254.169.254", false},
		{"fd00:ec2::254", false},
		{"fe80::1", false},
		{"0.0.0.0", false},
		{"::", false},
		{"0.1.2.3", false},
		{"100.64.0.1", false},
		{"224.0.0.1", false},
		{"255.255.255.255", false},
		{"64:ff9b::a00:1", false},
	}
	for _, tc := range tests {
		if got := Public(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("Public(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

func TestCheckURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url   string
		allow []string
		ok    bool
	}{
		{"https://example.com/f.png", nil, true},
		{"https://1e100.net/f.png", nil, true},
		{"http://8.8.8.8/f", nil, true},
		{"ftp://example.com/f", nil, false},
		{"file:///etc/passwd", nil, false},
		{"http://127.0.0.1:8080/files/x", nil, false},
		{"http://[::1]/x", nil, false},
		{"http://169.254.169.254/latest/meta-data/", nil, false},
		{"http://2130706433/x", nil, false},   // decimal 127.0.0.1
		{"http://0177.0.0.1/x", nil, false},   // octal
		{"http://0x7f.0.0.1/x", nil, false},   // hex
		{"http://0x7f000001/x", nil, false},   // hex, one label
		{"http://127.1/x", nil, false},        // short form
		{"http://017700000001/x", nil, false}, // octal, one label
		{"http://[::ffff:10.0.0.1]/x", nil, false},
		{"http://127.0.0.1:8080/files/x", []string{"http://127.0.0.1:8080"}, true},
		{"http://127.0.0.1:8081/files/x", []string{"http://127.0.0.1:8080"}, false},
	}
	for _, tc := range tests {
		err := CheckURL(tc.url, tc.allow...)
		if (err == nil) != tc.ok {
			t.Errorf("CheckURL(%q, %v) = %v, want ok=%v", tc.url, tc.allow, err, tc.ok)
		}
	}
}

// The check holds at dial time: a loopback server is refused by its IP, by
// a name resolving to it, and behind a redirect from an allowed origin;
// only the allowed origin's exact host and port get through.
func TestClientDialsOnlyPublicAddresses(t *testing.T) {
	t.Parallel()
	secret := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "secret")
	}))
	t.Cleanup(secret.Close)
	own := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, secret.URL+"/", http.StatusFound)
			return
		}
		_, _ = io.WriteString(w, "own file")
	}))
	t.Cleanup(own.Close)
	port := secret.URL[strings.LastIndex(secret.URL, ":")+1:]

	c := Client(Options{Allow: []string{own.URL}})
	tests := []struct {
		name, url string
		want      string // body, or "" for a refusal
	}{
		{"loopback IP", secret.URL + "/", ""},
		{"name resolving to loopback", "http://localhost:" + port + "/", ""},
		{"redirect from the allowed origin to loopback", own.URL + "/redirect", ""},
		{"the allowed origin", own.URL + "/f", "own file"},
	}
	for _, tc := range tests {
		resp, err := c.Get(tc.url)
		if tc.want == "" {
			if err == nil {
				resp.Body.Close()
				t.Errorf("%s: GET %s = %s, want a refusal", tc.name, tc.url, resp.Status)
			} else if !errors.Is(err, ErrNotPublic) {
				t.Errorf("%s: GET %s error = %v, want ErrNotPublic", tc.name, tc.url, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: GET %s error = %v, want %q", tc.name, tc.url, err, tc.want)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != tc.want {
			t.Errorf("%s: GET %s = %q, want %q", tc.name, tc.url, b, tc.want)
		}
	}
}
