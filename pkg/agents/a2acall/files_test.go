package a2acall

import (
	"bytes"
	"context"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/agents/files"
	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/artifact/localstore"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/tool"
	"github.com/clientagent/clientagent/pkg/valkeytest"
)

// fileAgent is a specialist whose answer is files by URL: the data part's
// "files" lists paths of its own hostile file server.
type fileAgent struct{ base string }

func (a *fileAgent) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	var paths []any
	for _, p := range rc.Message.Parts {
		if d, ok := p.(a2a.DataPart); ok {
			paths, _ = d.Data["files"].([]any)
		}
	}
	var parts a2a.ContentParts
	for _, p := range paths {
		parts = append(parts, a2a.FilePart{File: a2a.FileURI{FileMeta: a2a.FileMeta{Name: strings.TrimPrefix(p.(string), "/") + ".bin"}, URI: a.base + p.(string)}})
	}
	task := &a2a.Task{ID: rc.TaskID, ContextID: rc.ContextID, Status: a2a.TaskStatus{State: a2a.TaskStateCompleted},
		Artifacts: []*a2a.Artifact{{ID: "files", Parts: parts}}}
	return q.Write(ctx, task)
}

func (a *fileAgent) Cancel(context.Context, *a2asrv.RequestContext, eventqueue.Queue) error {
	return nil
}

// hostileFiles serves files the ways issue 24 met them.
type hostileFiles struct{}

func (h *hostileFiles) handler() http.Handler {
	mux := http.NewServeMux()
	chunk := bytes.Repeat([]byte("x"), 32<<10)
	// small: 4 KiB, whole.
	mux.HandleFunc("/small", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(chunk[:4<<10])
	})
	// declared: says 1 GiB, then sends nothing: a reader that waits for
	// the bytes meets the file deadline instead of the size limit.
	mux.HandleFunc("/declared", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(1<<30))
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	// endless: no declared size, streams until the reader goes away.
	mux.HandleFunc("/endless", func(w http.ResponseWriter, r *http.Request) {
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	})
	// dribble: one byte at a time, forever.
	mux.HandleFunc("/dribble", func(w http.ResponseWriter, r *http.Request) {
		for {
			if _, err := w.Write([]byte("x")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	// steady: 10 KB/s, above the tests' minimum rate, but never ends.
	mux.HandleFunc("/steady", func(w http.ResponseWriter, r *http.Request) {
		for {
			if _, err := w.Write(chunk[:100]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	// sized: 150 KiB with its size declared (Go sets Content-Length).
	mux.HandleFunc("/sized", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(150<<10))
		_, _ = w.Write(bytes.Repeat([]byte("y"), 150<<10))
	})
	// unsized: the same 150 KiB in chunks, no size declared.
	mux.HandleFunc("/unsized", func(w http.ResponseWriter, r *http.Request) {
		for range 5 {
			_, _ = w.Write(chunk[:30<<10])
			w.(http.Flusher).Flush()
		}
	})
	return mux
}

// fileRig is a specialist serving hostile files and an Invoker storing
// what it returns in a local directory with a conversation quota in
// Valkey.
type fileRig struct {
	inv   *Invoker
	dir   string
	files *hostileFiles
	url   string
	usage *valkey.Usage
}

func newFileRig(t *testing.T, rdb redis.UniversalClient, lim files.Limits, quota int64) *fileRig {
	t.Helper()
	files := &hostileFiles{}
	agent := &fileAgent{}
	mux := http.NewServeMux()
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(agent)))
	mux.Handle("/", files.handler())
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	agent.base = srv.URL
	dir := t.TempDir()
	local, err := localstore.New(dir, "http://x", []byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	usage := valkey.New(rdb, valkey.Options{}).Usage()
	arts := artifact.WithQuota(local, usage, quota)
	inv := NewInvoker(InvokerOptions{Artifacts: arts, FileOrigins: []string{srv.URL}, Files: lim, Timeout: time.Minute})
	return &fileRig{inv: inv, dir: dir, files: files, url: srv.URL, usage: usage}
}

func (r *fileRig) call(t *testing.T, cid string, paths ...string) record.CallOutcome {
	t.Helper()
	var ps []any
	for _, p := range paths {
		ps = append(ps, p)
	}
	return r.inv.Invoke(t.Context(), tool.Call{ConversationID: cid, TurnID: "t1", CallID: "call_1",
		Capability: testCapability(r.url + "/rpc"), Arguments: map[string]any{"files": ps}})
}

// leftovers lists every file under the store's directory.
func (r *fileRig) leftovers(t *testing.T) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(r.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, strings.TrimPrefix(p, r.dir))
		}
		return nil
	})
	return out
}

// Issue 24, points 5 and 6: a file too big (declared or streamed), one that
// does not fit the conversation's quota, one too slow for the minimum rate
// and one that never ends each fail the call with a message naming the
// bound, and leave nothing in the store — not even the files the call
// copied before the one that failed — and nothing counted against the quota.
func TestReturnedFileBounds(t *testing.T) {
	valkeytest.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		lim := files.Limits{MaxBytes: 256 << 10, Timeout: 2 * time.Second, MinRate: 1 << 10, RateWindow: 300 * time.Millisecond}
		tests := []struct {
			name  string
			paths []string
			quota int64
			want  []string // in the failed result's error
			// noMinRate leaves only the deadline: a loaded machine may
			// read a steady file slower than the minimum rate.
			noMinRate bool
		}{
			{"declared size over the limit", []string{"/declared"}, 1 << 30, []string{"1 GiB", "more than the 256 KiB"}, false},
			{"streamed past the limit", []string{"/endless"}, 1 << 30, []string{"larger than the 256 KiB"}, false},
			{"a good file then one too big", []string{"/small", "/endless"}, 1 << 30, []string{"larger than the 256 KiB"}, false},
			{"declared size over the quota", []string{"/sized"}, 100 << 10, []string{"150 KiB", "does not fit", "only 100 KiB"}, false},
			{"streamed past the quota", []string{"/small", "/unsized"}, 100 << 10, []string{"storage quota of 100 KiB would be exceeded"}, false},
			{"too slow", []string{"/dribble"}, 1 << 30, []string{"minimum transfer rate of 1 KiB/s"}, false},
			{"never ends", []string{"/steady"}, 1 << 30, []string{"file transfer deadline of 2s"}, true},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				lim := lim
				if tc.noMinRate {
					lim.MinRate = -1 // none (0 is the default rate)
				}
				rig := newFileRig(t, rdb, lim, tc.quota)
				cid := valkeytest.ID(t, "c")
				t.Cleanup(func() { _ = rig.usage.Reset(context.Background(), cid) })
				out := rig.call(t, cid, tc.paths...)
				if out.Result.Status != record.ResultFailed {
					t.Fatalf("status = %q (%+v), want failed", out.Result.Status, out.Result)
				}
				for _, w := range tc.want {
					if !strings.Contains(out.Result.Error, w) {
						t.Errorf("error = %q, want it to say %q", out.Result.Error, w)
					}
				}
				if len(out.Artifacts) != 0 {
					t.Errorf("artifacts = %v, want none", out.Artifacts)
				}
				if left := rig.leftovers(t); len(left) != 0 {
					t.Errorf("files left in the store: %v, want none", left)
				}
				if used, err := rig.usage.Used(t.Context(), cid); err != nil || used != 0 {
					t.Errorf("quota use = %d, %v; want 0", used, err)
				}
			})
		}
	})
}

// A file within every bound is stored and counted against the quota.
func TestReturnedFileWithinBounds(t *testing.T) {
	valkeytest.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		rig := newFileRig(t, rdb, files.Limits{MaxBytes: 256 << 10, Timeout: 10 * time.Second, MinRate: 1 << 10, RateWindow: time.Second}, 200<<10)
		cid := valkeytest.ID(t, "c")
		t.Cleanup(func() { _ = rig.usage.Reset(context.Background(), cid) })
		out := rig.call(t, cid, "/small", "/sized")
		if out.Result.Status != record.ResultSucceeded || len(out.Artifacts) != 2 {
			t.Fatalf("outcome = %+v, want succeeded with 2 artifacts", out.Result)
		}
		if used, _ := rig.usage.Used(t.Context(), cid); used != 4<<10+150<<10 {
			t.Errorf("quota use = %d, want %d", used, 4<<10+150<<10)
		}
		if left := rig.leftovers(t); len(left) != 2 {
			t.Errorf("files in the store: %v, want the 2 files", left)
		}
	})
}

// A call run again (the same call id: a step retried after a crash, before
// its outcome was stored) stores its files under the same ids, so the lost
// run's copies are written over, not left outside the catalog, and the
// quota counts them once.
func TestRerunCallWritesOverItsFiles(t *testing.T) {
	valkeytest.Each(t, func(t *testing.T, rdb redis.UniversalClient) {
		rig := newFileRig(t, rdb, files.Limits{MaxBytes: 256 << 10, Timeout: 10 * time.Second, MinRate: 1 << 10, RateWindow: time.Second}, 1<<20)
		cid := valkeytest.ID(t, "c")
		t.Cleanup(func() { _ = rig.usage.Reset(context.Background(), cid) })
		first := rig.call(t, cid, "/small", "/sized")
		again := rig.call(t, cid, "/small", "/sized")
		if first.Result.Status != record.ResultSucceeded || again.Result.Status != record.ResultSucceeded {
			t.Fatalf("outcomes = %+v, %+v; want both succeeded", first.Result, again.Result)
		}
		for k := range first.Artifacts {
			if first.Artifacts[k].ID != again.Artifacts[k].ID {
				t.Errorf("file %d: ids %s then %s, want the same id for the same call", k, first.Artifacts[k].ID, again.Artifacts[k].ID)
			}
		}
		if left := rig.leftovers(t); len(left) != 2 {
			t.Errorf("files in the store: %v, want the 2 files once", left)
		}
		if used, _ := rig.usage.Used(t.Context(), cid); used != 4<<10+150<<10 {
			t.Errorf("quota use = %d, want %d (each file once)", used, 4<<10+150<<10)
		}
	})
}
