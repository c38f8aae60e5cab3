// Package localstore keeps artifacts in a local directory for the
// one-machine stack: one file <dir>/<cid>/<id> each, which starts with a
// line that marks it and a line with its content type (an object stored
// before, without them, keeps its type in a <id>.type sidecar, and is read
// as it was). It hands out short-lived HMAC-signed URLs and serves them
// with Handler. It must not be used where several machines share
// artifacts (use s3store) and must not trust ids: every cid and id is
// checked to be a single safe path segment.
package localstore

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/rawfile"
)

// FilesPath is where the local stack mounts Handler.
const FilesPath = "/files/"

// Store is an artifact.Store on a local directory.
type Store struct {
	dir  string
	base string // public base URL, no trailing slash
	key  []byte // the derived link key
	now  func() time.Time
}

var _ artifact.Store = (*Store)(nil)

// New returns a Store under dir (created if missing) whose URLs start with
// publicBaseURL + "/files/". The URLs are signed with a key derived from
// key for links alone (HMAC-SHA256(key, PurposeLinks)), so the stack may
// pass the master key it also derives its token key from, and a link
// signature never passes for a token or the reverse. An empty key gets a
// random one, so URLs are valid only for this process.
func New(dir, publicBaseURL string, key []byte) (*Store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create artifact dir %s: %w", dir, err)
	}
	if len(key) == 0 {
		key = make([]byte, 32)
		_, _ = rand.Read(key)
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(PurposeLinks))
	return &Store{dir: dir, base: strings.TrimRight(publicBaseURL, "/"), key: m.Sum(nil), now: time.Now}, nil
}

// PurposeLinks is the purpose the link-signing key is derived for (the
// scheme of auth.DeriveKey).
const PurposeLinks = "clientagent/artifact-links/v1"

func (s *Store) paths(cid, id string) (data, typ string, err error) {
	if err := artifact.CheckNames(cid, id); err != nil {
		return "", "", err
	}
	d := filepath.Join(s.dir, cid)
	return filepath.Join(d, id), filepath.Join(d, id+".type"), nil
}

// magic starts every object Put writes; its content type's line follows.
// One file per object is one atomic write (four system calls) where the
// object and a type sidecar were two: a call's files are stored on its
// step's path (docs/benchmarks.md).
const magic = "\x00clientagent-artifact/1\n"

// maxType bounds a stored content type, so its line is in the first
// 512 bytes Get reads.
const maxType = 255

// Put stores body under cid/id with its content type, replacing any
// earlier object atomically.
func (s *Store) Put(ctx context.Context, cid, id, mimeType string, body io.Reader) (int64, error) {
	data, _, err := s.paths(cid, id)
	if err != nil {
		return 0, err
	}
	mimeType = strings.NewReplacer("\n", "", "\r", "").Replace(mimeType)
	if len(mimeType) > maxType {
		mimeType = "application/octet-stream" // no real type is that long
	}
	head := magic + mimeType + "\n"
	// The conversation's directory is made when the first write finds it
	// missing, not stat'ed before every file (pkg/rawfile).
	n, err := rawfile.WriteAtomic(data, &headed{head: head, body: body}, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(filepath.Dir(data), 0o755); err == nil {
			n, err = rawfile.WriteAtomic(data, &headed{head: head, body: body}, 0o600)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("put artifact %s/%s: %w", cid, id, err)
	}
	return n - int64(len(head)), nil
}

// headed reads head, then body, filling each read as far as it can, so a
// small object is written in one system call.
type headed struct {
	head string
	body io.Reader
}

func (h *headed) Read(p []byte) (int, error) {
	n := copy(p, h.head)
	h.head = h.head[n:]
	if n == len(p) {
		return n, nil
	}
	m, err := h.body.Read(p[n:])
	return n + m, err
}

// Len is what is left to read, for pkg/rawfile's buffer: a body of
// unknown length counts as large.
func (h *headed) Len() int {
	if l, ok := h.body.(interface{ Len() int }); ok {
		return len(h.head) + l.Len()
	}
	return 1 << 30
}

// object is a stored object's bytes, after its header: a ReadSeeker for
// http.ServeContent, closed with its file.
type object struct {
	*io.SectionReader
	f   *os.File
	mod time.Time
}

func (o *object) Close() error       { return o.f.Close() }
func (o *object) ModTime() time.Time { return o.mod }

// Get opens cid/id; artifact.ErrNotFound if absent.
func (s *Store) Get(ctx context.Context, cid, id string) (io.ReadCloser, string, error) {
	data, typ, err := s.paths(cid, id)
	if err != nil {
		return nil, "", err
	}
	f, err := os.Open(data)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("get artifact %s/%s: %w", cid, id, artifact.ErrNotFound)
	}
	if err != nil {
		return nil, "", fmt.Errorf("get artifact %s/%s: %w", cid, id, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, "", fmt.Errorf("get artifact %s/%s: %w", cid, id, err)
	}
	var first [512]byte
	n, _ := io.ReadFull(f, first[:])
	mt, off := "application/octet-stream", int64(0)
	if rest, ok := bytes.CutPrefix(first[:n], []byte(magic)); ok {
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			mt, off = string(rest[:i]), int64(len(magic)+i+1)
		}
	}
	if off == 0 { // an object stored before the header: its type's sidecar
		if b, err := os.ReadFile(typ); err == nil && len(b) > 0 {
			mt = string(b)
		}
	}
	if mt == "" {
		mt = "application/octet-stream"
	}
	return &object{SectionReader: io.NewSectionReader(f, off, st.Size()-off), f: f, mod: st.ModTime()}, mt, nil
}

// URL returns <publicBaseURL>/files/<cid>/<id>?exp=<unix>&sig=<hex>, valid
// for ttl. It does not check that the object exists.
func (s *Store) URL(ctx context.Context, cid, id string, ttl time.Duration) (string, error) {
	if err := artifact.CheckNames(cid, id); err != nil {
		return "", err
	}
	exp := s.now().Add(ttl).Unix()
	q := url.Values{"exp": {strconv.FormatInt(exp, 10)}, "sig": {s.sign(cid, id, exp)}}
	return s.base + FilesPath + cid + "/" + id + "?" + q.Encode(), nil
}

func (s *Store) sign(cid, id string, exp int64) string {
	m := hmac.New(sha256.New, s.key)
	fmt.Fprintf(m, "%s/%s\n%d", cid, id, exp)
	return hex.EncodeToString(m.Sum(nil))
}

// Delete removes cid/id (and the type sidecar of an object stored before
// the header); an absent object is not an error.
func (s *Store) Delete(ctx context.Context, cid, id string) error {
	data, typ, err := s.paths(cid, id)
	if err != nil {
		return err
	}
	for _, p := range []string{data, typ} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete artifact %s/%s: %w", cid, id, err)
		}
	}
	return nil
}

// DeleteConversation removes every object of cid; a conversation without
// objects is not an error.
func (s *Store) DeleteConversation(ctx context.Context, cid string) error {
	if err := artifact.CheckNames(cid); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(s.dir, cid)); err != nil {
		return fmt.Errorf("delete conversation %s artifacts: %w", cid, err)
	}
	return nil
}

// Handler serves the URLs made by URL: GET/HEAD /files/<cid>/<id> (or
// /<cid>/<id> behind http.StripPrefix). A bad or expired signature is 403,
// a missing object 404. Responses forbid sniffing and scripts, since an
// uploaded SVG or HTML file must not run in the stack's origin.
func (s *Store) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		p := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, "/"), strings.Trim(FilesPath, "/")+"/")
		cid, id, ok := strings.Cut(p, "/")
		if !ok || artifact.CheckNames(cid, id) != nil {
			http.NotFound(w, r)
			return
		}
		exp, err := strconv.ParseInt(r.URL.Query().Get("exp"), 10, 64)
		sig, herr := hex.DecodeString(r.URL.Query().Get("sig"))
		want, _ := hex.DecodeString(s.sign(cid, id, exp))
		if err != nil || herr != nil || !hmac.Equal(sig, want) || s.now().Unix() > exp {
			http.Error(w, "forbidden: invalid or expired link", http.StatusForbidden)
			return
		}
		body, mt, err := s.Get(r.Context(), cid, id)
		if errors.Is(err, artifact.ErrNotFound) {
			http.NotFound(w, r)
			return
		}
		if err != nil {
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		defer body.Close()
		h := w.Header()
		h.Set("Content-Type", mt)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; sandbox")
		if !artifact.Passive(mt) {
			h.Set("Content-Disposition", "attachment")
		}
		h.Set("Cache-Control", "private, max-age=60")
		if o, ok := body.(*object); ok {
			http.ServeContent(w, r, "", o.ModTime(), o)
			return
		}
		_, _ = io.Copy(w, body)
	})
}
