package web

import (
	"bytes"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(Handler())
	t.Cleanup(srv.Close)

	tests := []struct {
		path        string
		status      int
		contentType string
		contains    string
	}{
		{"/", http.StatusOK, "text/html", `data-testid="composer"`},
		{"/app.js", http.StatusOK, "text/javascript", "class TurnView"},
		{"/api.js", http.StatusOK, "text/javascript", "Authorization"},
		{"/config.js", http.StatusOK, "text/javascript", "apiBase"},
		{"/style.css", http.StatusOK, "text/css", ".messages"},
		{"/vendor/marked.esm.js", http.StatusOK, "text/javascript", "marked"},
		{"/vendor/purify.es.js", http.StatusOK, "text/javascript", "DOMPurify"},
		{"/nope.js", http.StatusNotFound, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			res, err := srv.Client().Get(srv.URL + tt.path)
			if err != nil {
				t.Fatalf("GET %s: %v", tt.path, err)
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.status {
				t.Fatalf("GET %s status = %d, want %d", tt.path, res.StatusCode, tt.status)
			}
			if tt.status != http.StatusOK {
				return // net/http drops Cache-Control from error answers
			}
			if got := res.Header.Get("Cache-Control"); got != "no-cache" {
				t.Errorf("GET %s Cache-Control = %q, want no-cache", tt.path, got)
			}
			if got := res.Header.Get("Content-Type"); !strings.HasPrefix(got, tt.contentType) {
				t.Errorf("GET %s Content-Type = %q, want %s", tt.path, got, tt.contentType)
			}
			if !strings.Contains(string(body), tt.contains) {
				t.Errorf("GET %s body lacks %q", tt.path, tt.contains)
			}
		})
	}
}

func TestHandlerRejectsWrites(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST / status = %d, want %d", rec.Code, http.StatusMethodNotAllowed)
	}
}

// TestNothingExternal keeps the page self-contained: no file may reference
// another origin (no CDN, no web fonts, no analytics). The vendored
// libraries are left out: their licence headers and link checks name
// sites they never load (the browser checks fail on any request to another
// origin).
func TestNothingExternal(t *testing.T) {
	t.Parallel()
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|@import|url\(\s*['"]?(https?:|//)`)
	err := fs.WalkDir(FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(path, "vendor/") {
			return err
		}
		b, err := fs.ReadFile(FS(), path)
		if err != nil {
			return err
		}
		if m := external.FindString(string(b)); m != "" {
			t.Errorf("%s references something external: %q", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk embedded files: %v", err)
	}
}

// TestVendored checks that the vendored libraries come with their licences
// and, where node_modules is installed, are unchanged copies of the
// packages package-lock.json pins.
func TestVendored(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file, license, module string
	}{
		{"vendor/marked.esm.js", "vendor/LICENSE.marked", "../node_modules/marked/lib/marked.esm.js"},
		{"vendor/purify.es.js", "vendor/LICENSE.dompurify", "../node_modules/dompurify/dist/purify.es.mjs"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			got, err := fs.ReadFile(FS(), tt.file)
			if err != nil {
				t.Fatalf("ReadFile(%s) = %v", tt.file, err)
			}
			if lic, err := fs.ReadFile(FS(), tt.license); err != nil || len(lic) == 0 {
				t.Errorf("licence %s: %v (%d bytes)", tt.license, err, len(lic))
			}
			want, err := os.ReadFile(tt.module)
			if err != nil {
				t.Skipf("no %s (run npm install to compare the copy): %v", tt.module, err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from %s: copy it again (web/vendor/README.md)", tt.file, tt.module)
			}
		})
	}
}

// FS is the page's embedded files.
func FS() fs.FS { return files }

// Issue 27, point 8: the page runs only its own files. index.html carries
// the policy (a static host serves it as is), the local server sends it as
// a header too, and no script or style is inline.
func TestPageCSP(t *testing.T) {
	b, err := fs.ReadFile(FS(), "index.html")
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if !strings.Contains(page, `<meta http-equiv="Content-Security-Policy" content="`+PageCSP+`">`) {
		t.Errorf("index.html does not carry PageCSP as its meta policy")
	}
	for _, bad := range []string{"<script>", "<script type=\"module\">", " onload=", " onclick=", "<style", " style=\"", "javascript:"} {
		if strings.Contains(page, bad) {
			t.Errorf("index.html has inline %q", bad)
		}
	}
	for _, d := range []string{"script-src 'self'", "object-src 'none'", "base-uri 'none'"} {
		if !strings.Contains(PageCSP, d) || strings.Contains(PageCSP, "unsafe-") {
			t.Errorf("PageCSP %q: want %q and nothing unsafe", PageCSP, d)
		}
	}
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if got := rec.Header().Get("Content-Security-Policy"); got != PageCSP+"; frame-ancestors 'none'" {
		t.Errorf("Content-Security-Policy header = %q", got)
	}
}
