package localstore

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/artifact/artifacttest"
)

func newServed(t *testing.T) (*Store, *httptest.Server) {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	s, err := New(t.TempDir(), srv.URL, []byte("test key"))
	if err != nil {
		t.Fatalf("New() error = %v", err)
	}
	mux.Handle(FilesPath, s.Handler())
	return s, srv
}

func TestConformance(t *testing.T) {
	t.Parallel()
	s, _ := newServed(t)
	artifacttest.Run(t, s)
}

func TestSignedURLs(t *testing.T) {
	t.Parallel()
	s, srv := newServed(t)
	ctx := t.Context()
	if _, err := s.Put(ctx, "c1", "a1", "image/svg+xml", strings.NewReader("<svg/>")); err != nil {
		t.Fatalf("Put() error = %v", err)
	}
	good, err := s.URL(ctx, "c1", "a1", time.Minute)
	if err != nil {
		t.Fatalf("URL() error = %v", err)
	}
	if !strings.HasPrefix(good, srv.URL+"/files/c1/a1?") {
		t.Fatalf("URL() = %q, want %s/files/c1/a1?...", good, srv.URL)
	}
	u, _ := url.Parse(good)
	q := u.Query()
	tamper := func(k, v string) string {
		u2 := *u
		q2 := url.Values{}
		for kk, vv := range q {
			q2[kk] = vv
		}
		q2.Set(k, v)
		u2.RawQuery = q2.Encode()
		return u2.String()
	}
	past, _ := New(t.TempDir(), srv.URL, []byte("test key"))
	past.now = func() time.Time { return time.Now().Add(-time.Hour) }
	expired, _ := past.URL(ctx, "c1", "a1", time.Minute) // same key, expired an hour ago
	otherKey, _ := New(t.TempDir(), srv.URL, []byte("other key"))
	forged, _ := otherKey.URL(ctx, "c1", "a1", time.Minute)
	missing, _ := s.URL(ctx, "c1", "a2", time.Minute)
	otherObj := strings.Replace(good, "/c1/a1?", "/c1/a2?", 1)

	tests := []struct {
		name string
		url  string
		want int
	}{
		{"valid", good, http.StatusOK},
		{"expired", expired, http.StatusForbidden},
		{"other key", forged, http.StatusForbidden},
		{"signature of another object", otherObj, http.StatusForbidden},
		{"exp changed", tamper("exp", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)), http.StatusForbidden},
		{"no signature", tamper("sig", ""), http.StatusForbidden},
		{"missing object", missing, http.StatusNotFound},
		{"traversal", srv.URL + "/files/../c1/a1", http.StatusNotFound},
	}
	for _, tt := range tests {
		resp, err := http.Get(tt.url)
		if err != nil {
			t.Fatalf("%s: GET error = %v", tt.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("%s: GET status = %d, want %d", tt.name, resp.StatusCode, tt.want)
		}
		if tt.want == http.StatusOK {
			if !bytes.Equal(body, []byte("<svg/>")) || resp.Header.Get("Content-Type") != "image/svg+xml" {
				t.Errorf("%s: GET = %q %q, want the SVG", tt.name, body, resp.Header.Get("Content-Type"))
			}
			if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") {
				t.Errorf("%s: no sandboxing CSP on served artifact", tt.name)
			}
			if resp.Header.Get("Content-Disposition") != "attachment" {
				t.Errorf("%s: Content-Disposition = %q, want an SVG served as an attachment", tt.name, resp.Header.Get("Content-Disposition"))
			}
		}
	}
}

// Links are signed with a key derived for links alone: a link signed with
// the master key itself (the key the stack's tokens derive theirs from) is
// refused, and the link key is the documented derivation.
func TestLinksUseAPurposeKey(t *testing.T) {
	t.Parallel()
	master := []byte("test key")
	s, srv := newServed(t)
	if _, err := s.Put(t.Context(), "c1", "a1", "text/plain", strings.NewReader("x")); err != nil {
		t.Fatal(err)
	}
	exp := time.Now().Add(time.Minute).Unix()
	m := hmac.New(sha256.New, master)
	fmt.Fprintf(m, "%s/%s\n%d", "c1", "a1", exp)
	withMaster := fmt.Sprintf("%s/files/c1/a1?exp=%d&sig=%s", srv.URL, exp, hex.EncodeToString(m.Sum(nil)))
	resp, err := http.Get(withMaster)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET of a link signed with the master key = %d, want 403", resp.StatusCode)
	}
	d := hmac.New(sha256.New, master)
	d.Write([]byte(PurposeLinks))
	if !bytes.Equal(s.key, d.Sum(nil)) {
		t.Errorf("link key = %x, want HMAC-SHA256(key, %q)", s.key, PurposeLinks)
	}
}

// TestFailedPutLeavesNoFile checks the directory itself: a body that fails
// part way (over a limit) leaves no file, temporary or not, beside the
// conversation's other objects.
func TestFailedPutLeavesNoFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := New(dir, "http://x", []byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := s.Put(ctx, "c1", "art_ok", "text/plain", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	body := artifact.LimitReader(strings.NewReader(strings.Repeat("x", 1<<20)), 4096, nil)
	if _, err := s.Put(ctx, "c1", "art_big", "text/plain", body); !errors.Is(err, artifact.ErrTooLarge) {
		t.Fatalf("Put(over the limit) error = %v, want ErrTooLarge", err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "c1"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"art_ok"}; !slices.Equal(names, want) {
		t.Errorf("files in the conversation's directory = %v, want %v", names, want)
	}
}

// An object is one file, its content type in its header; an object stored
// before the header (its bytes alone, its type in a sidecar) is read and
// served as it was, ranges included.
func TestAnObjectIsOneFileAndOldOnesStillRead(t *testing.T) {
	t.Parallel()
	s, srv := newServed(t)
	ctx := t.Context()
	body := strings.Repeat("0123456789", 100)
	for _, tc := range []struct {
		id, store, want string
	}{
		{"a_new", "image/svg+xml", "image/svg+xml"},
		{"a_lines", "text/plain\r\n; x=1", "text/plain; x=1"},
		{"a_long", "x/" + strings.Repeat("y", 300), "application/octet-stream"},
	} {
		n, err := s.Put(ctx, "c1", tc.id, tc.store, strings.NewReader(body))
		if err != nil || n != int64(len(body)) {
			t.Fatalf("Put(%s) = %d, %v; want %d bytes", tc.id, n, err, len(body))
		}
		rc, mt, err := s.Get(ctx, "c1", tc.id)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if string(got) != body || mt != tc.want {
			t.Errorf("Get(%s) = %d bytes of type %q, want the %d bytes put, of type %q", tc.id, len(got), mt, len(body), tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(s.dir, "c1", "a_new.type")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Put wrote a type sidecar (stat: %v)", err)
	}

	// An object of the old layout.
	dir := filepath.Join(s.dir, "c1")
	if err := os.WriteFile(filepath.Join(dir, "a_old"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a_old.type"), []byte("image/png"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a_new", "a_old"} {
		link, err := s.URL(ctx, "c1", id, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
		req.Header.Set("Range", "bytes=10-19")
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusPartialContent || string(got) != body[10:20] {
			t.Errorf("GET %s bytes 10-19 = %d %q, want 206 %q", id, res.StatusCode, got, body[10:20])
		}
		want := map[string]string{"a_new": "image/svg+xml", "a_old": "image/png"}[id]
		if ct := res.Header.Get("Content-Type"); ct != want {
			t.Errorf("GET %s Content-Type = %q, want %q", id, ct, want)
		}
	}
	if err := s.Delete(ctx, "c1", "a_old"); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); slices.ContainsFunc(entries, func(e os.DirEntry) bool { return strings.HasPrefix(e.Name(), "a_old") }) {
		t.Error("Delete left a file of the old object")
	}
}
