// Package artifacttest is the conformance suite every artifact.Store
// implementation runs against a real backend (a directory, an in-process
// S3 server). It must not be imported by non-test code.
package artifacttest

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/clientagent/clientagent/pkg/artifact"
)

// Run checks s: round trips with content types, overwrite, ErrNotFound,
// id validation, fetchable URLs (with net/http), a failed Put keeping
// nothing, and deletion of one object and of a conversation. Each call must get a fresh, empty store.
func Run(t *testing.T, s artifact.Store) {
	t.Helper()
	ctx := t.Context()
	png := []byte("\x89PNG\r\n\x1a\nfake png bytes")

	put := func(cid, id, mt string, b []byte) {
		t.Helper()
		n, err := s.Put(ctx, cid, id, mt, bytes.NewReader(b))
		if err != nil {
			t.Fatalf("Put(%s, %s) error = %v", cid, id, err)
		}
		if n != int64(len(b)) {
			t.Errorf("Put(%s, %s) size = %d, want %d", cid, id, n, len(b))
		}
	}
	get := func(cid, id string) ([]byte, string, error) {
		t.Helper()
		rc, mt, err := s.Get(ctx, cid, id)
		if err != nil {
			return nil, "", err
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatalf("Get(%s, %s) read error = %v", cid, id, err)
		}
		return b, mt, nil
	}

	put("conv_a", "art_1", "image/png", png)
	put("conv_a", "art_2", "image/svg+xml", []byte("<svg/>"))
	put("conv_b", "art_1", "text/plain", []byte("other conversation"))

	b, mt, err := get("conv_a", "art_1")
	if err != nil || !bytes.Equal(b, png) || mt != "image/png" {
		t.Errorf("Get(conv_a, art_1) = %q, %q, %v; want the PNG bytes, image/png", b, mt, err)
	}

	put("conv_a", "art_2", "image/svg+xml", []byte("<svg>v2</svg>"))
	if b, _, _ := get("conv_a", "art_2"); string(b) != "<svg>v2</svg>" {
		t.Errorf("Get after overwrite = %q, want v2", b)
	}

	if _, _, err := get("conv_a", "art_missing"); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("Get(missing) error = %v, want ErrNotFound", err)
	}
	if _, _, err := get("conv_missing", "art_1"); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("Get(missing conversation) error = %v, want ErrNotFound", err)
	}

	for _, bad := range [][2]string{{"..", "art_1"}, {"conv_a", "../conv_b/art_1"}, {"conv_a/x", "y"}, {"", "art_1"}, {"conv_a", ""}} {
		if _, err := s.Put(ctx, bad[0], bad[1], "text/plain", strings.NewReader("x")); !errors.Is(err, artifact.ErrInvalidName) {
			t.Errorf("Put(%q, %q) error = %v, want ErrInvalidName", bad[0], bad[1], err)
		}
		if _, _, err := s.Get(ctx, bad[0], bad[1]); !errors.Is(err, artifact.ErrInvalidName) {
			t.Errorf("Get(%q, %q) error = %v, want ErrInvalidName", bad[0], bad[1], err)
		}
		if _, err := s.URL(ctx, bad[0], bad[1], time.Minute); !errors.Is(err, artifact.ErrInvalidName) {
			t.Errorf("URL(%q, %q) error = %v, want ErrInvalidName", bad[0], bad[1], err)
		}
	}

	u, err := s.URL(ctx, "conv_a", "art_1", 5*time.Minute)
	if err != nil {
		t.Fatalf("URL() error = %v", err)
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatalf("GET URL() error = %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, png) {
		t.Errorf("GET URL() = %d %q, want 200 and the PNG bytes", resp.StatusCode, body)
	}

	// A body that fails part way (a file over its limit, a dropped
	// download) leaves nothing behind, not even under its id.
	big := bytes.Repeat([]byte("x"), 256<<10)
	if _, err := s.Put(ctx, "conv_a", "art_cut", "text/plain", artifact.LimitReader(bytes.NewReader(big), 100<<10, nil)); !errors.Is(err, artifact.ErrTooLarge) {
		t.Errorf("Put(over the limit) error = %v, want ErrTooLarge", err)
	}
	if _, _, err := get("conv_a", "art_cut"); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("Get(art_cut) after a failed Put error = %v, want ErrNotFound", err)
	}
	if _, err := s.Put(ctx, "conv_a", "art_exact", "text/plain", artifact.LimitReader(bytes.NewReader(big), int64(len(big)), nil)); err != nil {
		t.Errorf("Put(exactly at the limit) error = %v, want nil", err)
	}

	put("conv_b", "art_gone", "text/plain", []byte("deleted next"))
	if err := s.Delete(ctx, "conv_b", "art_gone"); err != nil {
		t.Fatalf("Delete() error = %v", err)
	}
	if _, _, err := get("conv_b", "art_gone"); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("Get after Delete error = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "conv_b", "art_gone"); err != nil {
		t.Errorf("Delete(absent) error = %v, want nil", err)
	}
	if err := s.Delete(ctx, "..", "art_1"); !errors.Is(err, artifact.ErrInvalidName) {
		t.Errorf("Delete(..) error = %v, want ErrInvalidName", err)
	}

	if err := s.DeleteConversation(ctx, "conv_a"); err != nil {
		t.Fatalf("DeleteConversation() error = %v", err)
	}
	for _, id := range []string{"art_1", "art_2"} {
		if _, _, err := get("conv_a", id); !errors.Is(err, artifact.ErrNotFound) {
			t.Errorf("Get(conv_a, %s) after delete error = %v, want ErrNotFound", id, err)
		}
	}
	if b, _, err := get("conv_b", "art_1"); err != nil || string(b) != "other conversation" {
		t.Errorf("Get(conv_b, art_1) after deleting conv_a = %q, %v; want it kept", b, err)
	}
	if err := s.DeleteConversation(ctx, "conv_never"); err != nil {
		t.Errorf("DeleteConversation(empty) error = %v, want nil", err)
	}
}
