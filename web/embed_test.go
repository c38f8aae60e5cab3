package web

import (
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
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
// another origin (no CDN, no web fonts, no analytics).
func TestNothingExternal(t *testing.T) {
	t.Parallel()
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|@import|url\(\s*['"]?(https?:|//)`)
	err := fs.WalkDir(FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
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
