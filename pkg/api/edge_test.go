package api_test

// Edge tests on a Server with a store whose faults a test chooses: store
// faults at the API edge (503 with Retry-After), strict bodies, upload
// names and artifact links. Every answer is validated against
// docs/api/openapi.yaml like the contract tests' (stack.do).

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/api"
	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/artifact/localstore"
	"github.com/clientagent/clientagent/pkg/auth"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey"
)

// faultyStore is the real Valkey store (on miniredis) whose reads (Load,
// LoadStep, Artifacts, List) fail with readErr and whose writes fail with writeErr, when set.
type faultyStore struct {
	record.Store
	mu                sync.Mutex
	readErr, writeErr error
}

var _ record.Store = (*faultyStore)(nil)

func (f *faultyStore) set(read, write error) {
	f.mu.Lock()
	f.readErr, f.writeErr = read, write
	f.mu.Unlock()
}

func (f *faultyStore) fault(write bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if write {
		return f.writeErr
	}
	return f.readErr
}

func (f *faultyStore) Create(ctx context.Context, m record.Meta) error {
	if err := f.fault(true); err != nil {
		return fmt.Errorf("create %s: %w", m.ID, err)
	}
	return f.Store.Create(ctx, m)
}

func (f *faultyStore) Load(ctx context.Context, cid, tid string) (*record.Conversation, map[string]record.CallOutcome, error) {
	if err := f.fault(false); err != nil {
		return nil, nil, fmt.Errorf("load %s: %w", cid, err)
	}
	return f.Store.Load(ctx, cid, tid)
}

func (f *faultyStore) LoadStep(ctx context.Context, cid string, q record.Query) (*record.Conversation, map[string]record.CallOutcome, error) {
	if err := f.fault(false); err != nil {
		return nil, nil, fmt.Errorf("load step %s: %w", cid, err)
	}
	return f.Store.LoadStep(ctx, cid, q)
}

func (f *faultyStore) Artifacts(ctx context.Context, cid string, ids ...string) ([]artifact.Artifact, error) {
	if err := f.fault(false); err != nil {
		return nil, fmt.Errorf("artifacts %s: %w", cid, err)
	}
	return f.Store.Artifacts(ctx, cid, ids...)
}

func (f *faultyStore) MarkAnswered(ctx context.Context, cid, tid, token string) error {
	if err := f.fault(true); err != nil {
		return fmt.Errorf("mark answered %s: %w", tid, err)
	}
	return f.Store.MarkAnswered(ctx, cid, tid, token)
}

func (f *faultyStore) List(ctx context.Context, owner string) ([]record.Meta, error) {
	if err := f.fault(false); err != nil {
		return nil, fmt.Errorf("list %s: %w", owner, err)
	}
	return f.Store.List(ctx, owner)
}

func (f *faultyStore) SaveTurn(ctx context.Context, cid string, t *record.Turn, arts ...artifact.Artifact) error {
	if err := f.fault(true); err != nil {
		return fmt.Errorf("save turn %s: %w", t.ID, err)
	}
	return f.Store.SaveTurn(ctx, cid, t, arts...)
}

// SaveFirstTurn is a write that reads too (it checks the conversation as
// the request's read would): either fault fails it.
func (f *faultyStore) SaveFirstTurn(ctx context.Context, cid, owner string, t *record.Turn, next record.Query) (string, error) {
	if err := cmp.Or(f.fault(false), f.fault(true)); err != nil {
		return "", fmt.Errorf("save first turn %s: %w", t.ID, err)
	}
	return f.Store.(record.FirstWrite).SaveFirstTurn(ctx, cid, owner, t, next)
}

func (f *faultyStore) PutArtifacts(ctx context.Context, cid string, arts ...artifact.Artifact) error {
	if err := f.fault(true); err != nil {
		return fmt.Errorf("put artifacts %s: %w", cid, err)
	}
	return f.Store.PutArtifacts(ctx, cid, arts...)
}

func (f *faultyStore) Delete(ctx context.Context, cid string) error {
	if err := f.fault(true); err != nil {
		return fmt.Errorf("delete %s: %w", cid, err)
	}
	return f.Store.Delete(ctx, cid)
}

// faultyCatalogs fails like the capability cache does when Valkey does not
// answer.
type faultyCatalogs struct{ err error }

func (c faultyCatalogs) Catalog(context.Context) (*catalog.Catalog, error) {
	if c.err != nil {
		return nil, fmt.Errorf("capabilities: %w", c.err)
	}
	return catalog.New(nil, nil), nil
}

// edge is a Server on a faultyStore and a local artifact directory, with
// one conversation c1 of dev holding the upload a1.
type edge struct {
	*stack
	store *faultyStore
	arts  *localstore.Store
	cats  *faultyCatalogs
}

func newEdge(t *testing.T, mutate func(*api.Server)) *edge {
	t.Helper()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	store := &faultyStore{Store: valkey.New(rdb, valkey.Options{})}
	local := &auth.Local{Key: []byte("0123456789abcdef0123456789abcdef")}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	arts, err := localstore.New(t.TempDir(), srv.URL, []byte("edge key"))
	if err != nil {
		t.Fatal(err)
	}
	cats := &faultyCatalogs{}
	s := &api.Server{Store: store, Artifacts: arts, Auth: local, Catalogs: cats, MaxUpload: 1 << 20, MaxText: 16000,
		StateMachineARN: "arn:aws:states:us-east-1:1:stateMachine:t"}
	if mutate != nil {
		mutate(s)
	}
	mux.Handle("/v1/", s.Handler())
	mux.Handle(localstore.FilesPath, arts.Handler())

	ctx := t.Context()
	if err := store.Create(ctx, record.Meta{ID: "c1", Owner: "dev", CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if _, err := arts.Put(ctx, "c1", "a1", "text/plain", strings.NewReader("hello")); err != nil {
		t.Fatal(err)
	}
	if err := store.PutArtifacts(ctx, "c1", artifact.Artifact{ID: "a1", Name: "a.txt", MimeType: "text/plain", CreatedAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if err := store.SaveTurn(ctx, "c1", &record.Turn{ID: "t_1", StartedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC(), Status: record.StatusSucceeded}); err != nil {
		t.Fatal(err)
	}
	tok, _ := local.Mint("dev")
	doc := loadSpec(t)
	doc.Servers = openapi3.Servers{{URL: srv.URL}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatalf("router: %v", err)
	}
	return &edge{stack: &stack{base: srv.URL, router: router, hc: srv.Client(), dev: tok}, store: store, arts: arts, cats: cats}
}

// Store faults reach the caller as 503 with a code and Retry-After, on every
// route that touches the store, not as 500 internal; any other error stays
// 500 without Retry-After.
func TestStoreFaultsAre503(t *testing.T) {
	t.Parallel()
	c := "/v1/conversations/c1"
	reads := []req{
		{method: "GET", path: "/v1/conversations"},
		{method: "GET", path: c},
		{method: "DELETE", path: c},
		{method: "POST", path: c + "/artifacts?name=x.txt", body: []byte("x"), contentType: "text/plain"},
		{method: "GET", path: c + "/artifacts/a1"},
		{method: "POST", path: c + "/messages", body: []byte(`{"text":"hi"}`)},
		{method: "GET", path: c + "/turns/t_1"},
		{method: "POST", path: c + "/turns/t_1/input", body: []byte(`{"approval":{"id":"ap_1","decision":"approve"}}`)},
	}
	writes := []req{
		{method: "POST", path: "/v1/conversations"},
		{method: "POST", path: c + "/artifacts?name=x.txt", body: []byte("x"), contentType: "text/plain"},
		{method: "POST", path: c + "/messages", body: []byte(`{"text":"hi"}`)},
	}
	type fault struct {
		name             string
		read, write, cat error
		reqs             []req
		status           int
		code, retryAfter string
	}
	faults := []fault{
		{"reads unavailable", fmt.Errorf("valkey: i/o timeout: %w", record.ErrUnavailable), nil, nil, reads, 503, "store_unavailable", "2"},
		{"writes unavailable", nil, fmt.Errorf("pool timeout: %w", record.ErrUnavailable), nil, writes, 503, "store_unavailable", "2"},
		{"writes full", nil, fmt.Errorf("OOM command not allowed: %w", record.ErrFull), nil, writes, 503, "store_full", "10"},
		{"catalog unavailable", nil, nil, fmt.Errorf("read capability cache: %w", record.ErrUnavailable), []req{{method: "GET", path: "/v1/catalog"}}, 503, "store_unavailable", "2"},
		{"other errors", fmt.Errorf("bad record"), nil, nil, reads[:2], 500, "internal", ""},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			e := newEdge(t, nil)
			e.store.set(f.read, f.write)
			e.cats.err = f.cat
			for _, r := range f.reqs {
				r.token = e.dev
				out := e.expect(t, r, f.status, f.code)
				if got := out.Header.Get("Retry-After"); got != f.retryAfter {
					t.Errorf("%s %s Retry-After = %q, want %q", r.method, r.path, got, f.retryAfter)
				}
			}
		})
	}
}

// A body is exactly one JSON value, at most 32 levels deep: data after it
// is 400 (not 201/202), and deep nesting is 400 with the reason even when
// the body is also over the size limit (the depth is seen first).
func TestStrictBodies(t *testing.T) {
	t.Parallel()
	e := newEdge(t, nil)
	deep := func(n int) string { return `{"title":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}` }
	tests := []struct {
		name, path, body string
		status           int
		code, message    string
	}{
		{"trailing garbage", "/v1/conversations", `{"title":"a"} xx`, 400, "invalid_json", "after its JSON value"},
		{"two objects", "/v1/conversations", `{"title":"a"}{"title":"b"}`, 400, "invalid_json", "after its JSON value"},
		{"two objects, spaced", "/v1/conversations", "{\"title\":\"a\"}\n{\"title\":\"b\"}", 400, "invalid_json", "after its JSON value"},
		{"trailing white space", "/v1/conversations", "{\"title\":\"a\"} \n\t", 201, "", ""},
		{"33 levels", "/v1/conversations", deep(32), 400, "invalid_json", "nested deeper than 32 levels"},
		{"deep and over the size limit", "/v1/conversations", deep(5000), 400, "invalid_json", "nested deeper than 32 levels"},
		{"brackets inside a string", "/v1/conversations", `{"title":"` + strings.Repeat("[{", 100) + `\"]"}`, 201, "", ""},
		{"message with trailing data", "/v1/conversations/c1/messages", `{"text":"hi"} {}`, 400, "invalid_json", "after its JSON value"},
		{"deep message", "/v1/conversations/c1/messages", `{"text":"hi","workflow":{"id":"w","inputs":` + strings.Repeat(`{"a":`, 40) + `1` + strings.Repeat(`}`, 40) + `}}`, 400, "invalid_json", "nested deeper than 32 levels"},
		{"input with trailing data", "/v1/conversations/c1/turns/t_1/input", `{"approval":{"id":"ap_1","decision":"approve"}}x`, 400, "invalid_json", "after its JSON value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := e.expect(t, req{method: "POST", path: tc.path, token: e.dev, body: []byte(tc.body)}, tc.status, tc.code)
			if tc.message != "" && !strings.Contains(string(out.Body), tc.message) {
				t.Errorf("POST %s %q = %s, want the message to say %q", tc.path, trim(tc.body), out, tc.message)
			}
		})
	}
}

// Upload names are plain file names: ".", "..", control and format
// characters and double quotes are refused; the 200-character limit counts
// characters, not bytes.
func TestUploadNames(t *testing.T) {
	t.Parallel()
	e := newEdge(t, nil)
	tests := []struct {
		name, file string
		status     int
	}{
		{"plain", "report 2024.pdf", 201},
		{"apostrophe", "Bob's notes.txt", 201},
		{"200 two-byte characters", strings.Repeat("é", 200), 201},
		{"201 characters", strings.Repeat("é", 201), 400},
		{"dot", ".", 400},
		{"dot dot", "..", 400},
		{"control character", "a\x01b.txt", 400},
		{"newline", "a\nb.txt", 400},
		{"delete character", "a\x7fb.txt", 400},
		{"double quote", `a".txt`, 400},
		{"right-to-left override", "invoice\u202Etxt.exe", 400},
		{"backslash", `a\b.txt`, 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code := ""
			if tc.status == 400 {
				code = "invalid_name"
			}
			out := e.expect(t, req{method: "POST", path: "/v1/conversations/c1/artifacts?name=" + url.QueryEscape(tc.file), token: e.dev, body: []byte("x"), contentType: "text/plain"}, tc.status, code)
			if tc.status == 201 {
				if got := decodeInto[artifactRef](t, out).Name; got != tc.file {
					t.Errorf("stored name = %q, want %q", got, tc.file)
				}
			}
		})
	}
}

// GET …/artifacts/{aid}?redirect=false answers the link itself as JSON (so
// a browser can fetch it without the API's Authorization header and with
// its own Origin); the default stays as docs/api/openapi.yaml says: the bytes locally, a
// 302 where RedirectArtifacts is set.
func TestArtifactLink(t *testing.T) {
	t.Parallel()
	for _, redirect := range []bool{false, true} {
		t.Run(fmt.Sprintf("RedirectArtifacts=%v", redirect), func(t *testing.T) {
			t.Parallel()
			e := newEdge(t, func(s *api.Server) { s.RedirectArtifacts = redirect })
			path := "/v1/conversations/c1/artifacts/a1"
			out := e.expect(t, req{method: "GET", path: path + "?redirect=false", token: e.dev}, http.StatusOK, "")
			var link struct {
				URL       string `json:"url"`
				ExpiresAt string `json:"expires_at"`
			}
			if err := json.Unmarshal(out.Body, &link); err != nil || !strings.HasPrefix(link.URL, e.base+"/files/c1/a1?") {
				t.Fatalf("link answer = %s, want {url: %s/files/c1/a1?…}", out, e.base)
			}
			if exp, err := time.Parse(time.RFC3339, link.ExpiresAt); err != nil || time.Until(exp) < time.Minute || time.Until(exp) > 10*time.Minute {
				t.Errorf("expires_at = %q, want about 5 minutes from now", link.ExpiresAt)
			}
			if cc := out.Header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("link answer Cache-Control = %q, want no-store", cc)
			}
			// The link works without any Authorization header.
			resp, err := http.Get(link.URL)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != "hello" {
				t.Errorf("GET link = %d %q, want 200 hello", resp.StatusCode, b)
			}
			// The default is unchanged.
			noFollow := *e.hc
			noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			e2 := *e.stack
			e2.hc = &noFollow
			def := e2.do(t, req{method: "GET", path: path, token: e.dev})
			switch {
			case redirect && (def.Status != http.StatusFound || !strings.HasPrefix(def.Header.Get("Location"), e.base+"/files/c1/a1?")):
				t.Errorf("default GET = %d Location %q, want 302 to the link", def.Status, def.Header.Get("Location"))
			case !redirect && (def.Status != http.StatusOK || string(def.Body) != "hello"):
				t.Errorf("default GET = %s, want 200 with the bytes", def)
			}
			e.expect(t, req{method: "GET", path: path + "?redirect=maybe", token: e.dev}, http.StatusBadRequest, "invalid_query")
			e.expect(t, req{method: "GET", path: "/v1/conversations/c1/artifacts/a_nope?redirect=false", token: e.dev}, http.StatusNotFound, "not_found")
		})
	}
}
