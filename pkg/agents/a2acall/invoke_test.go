package a2acall

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/a2aproject/a2a-go/a2asrv/eventqueue"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/tool"
)

// memStore is an in-memory artifact.Store whose URLs are served by an
// httptest file server, so a specialist can really fetch what we send.
type memStore struct {
	mu    sync.Mutex
	files map[string]memFile
	srv   *httptest.Server
}

type memFile struct {
	mime string
	body []byte
}

var _ artifact.Store = (*memStore)(nil)

func newMemStore(t testing.TB) *memStore {
	t.Helper()
	s := &memStore{files: map[string]memFile{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("sig") != "ok" {
			http.Error(w, "bad signature", http.StatusForbidden)
			return
		}
		s.mu.Lock()
		f, ok := s.files[strings.TrimPrefix(r.URL.Path, "/files/")]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", f.mime)
		_, _ = w.Write(f.body)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *memStore) Put(_ context.Context, cid, id, mimeType string, body io.Reader) (int64, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.files[cid+"/"+id] = memFile{mimeType, b}
	s.mu.Unlock()
	return int64(len(b)), nil
}

func (s *memStore) Get(_ context.Context, cid, id string) (io.ReadCloser, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[cid+"/"+id]
	if !ok {
		return nil, "", artifact.ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(f.body)), f.mime, nil
}

func (s *memStore) URL(_ context.Context, cid, id string, _ time.Duration) (string, error) {
	return s.srv.URL + "/files/" + cid + "/" + id + "?sig=ok", nil
}

func (s *memStore) Delete(_ context.Context, cid, id string) error {
	s.mu.Lock()
	delete(s.files, cid+"/"+id)
	s.mu.Unlock()
	return nil
}

func (s *memStore) DeleteConversation(_ context.Context, cid string) error { return nil }

func (s *memStore) file(cid, id string) (memFile, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[cid+"/"+id]
	return f, ok
}

// pngBytes stands in for an image the agent serves by URL.
var pngBytes = []byte("\x89PNG\r\n\x1a\nfake-png-body")

// testExecutor is a tiny specialist. Its behaviour is chosen by the "mode"
// argument of the data part; a text message is echoed upper-cased.
type testExecutor struct {
	baseURL string // where the agent serves /generated.png
	release chan struct{}

	mu       sync.Mutex
	received []*a2a.Message
	fetched  map[string]string // FilePart URI → body the agent fetched
}

func (e *testExecutor) messages() []*a2a.Message {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*a2a.Message(nil), e.received...)
}

func (e *testExecutor) Execute(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	e.mu.Lock()
	e.received = append(e.received, rc.Message)
	e.mu.Unlock()

	var args map[string]any
	var text string
	var files []a2a.FilePart
	for _, p := range rc.Message.Parts {
		switch p := p.(type) {
		case a2a.DataPart:
			args = p.Data
		case a2a.TextPart:
			text = p.Text
		case a2a.FilePart:
			files = append(files, p)
		}
	}
	if args == nil {
		return q.Write(ctx, a2a.NewMessage(a2a.MessageRoleAgent, a2a.TextPart{Text: strings.ToUpper(text)}))
	}
	task := &a2a.Task{ID: rc.TaskID, ContextID: rc.ContextID}
	status := func(state a2a.TaskState, parts ...a2a.Part) {
		task.Status = a2a.TaskStatus{State: state}
		if len(parts) > 0 {
			task.Status.Message = a2a.NewMessageForTask(a2a.MessageRoleAgent, rc, parts...)
		}
	}
	switch args["mode"] {
	case "file":
		var upper []byte
		for _, f := range files {
			uri := f.File.(a2a.FileURI).URI
			resp, err := http.Get(uri)
			if err != nil {
				status(a2a.TaskStateFailed, a2a.TextPart{Text: "cannot fetch " + uri + ": " + err.Error()})
				return q.Write(ctx, task)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			e.mu.Lock()
			if e.fetched == nil {
				e.fetched = map[string]string{}
			}
			e.fetched[uri] = string(b)
			e.mu.Unlock()
			upper = bytes.ToUpper(b)
		}
		task.Artifacts = []*a2a.Artifact{
			{ID: "a1", Name: "upper", Description: "The input, upper-cased", Parts: a2a.ContentParts{
				a2a.TextPart{Text: "Upper-cased the file."},
				a2a.FilePart{File: a2a.FileBytes{FileMeta: a2a.FileMeta{Name: "upper.txt", MimeType: "text/plain"},
					Bytes: base64.StdEncoding.EncodeToString(upper)}},
			}},
			{ID: "a2", Name: "preview", Parts: a2a.ContentParts{
				a2a.FilePart{File: a2a.FileURI{URI: e.baseURL + "/generated.png"}},
				a2a.DataPart{Data: map[string]any{"pages": 2}},
			}},
		}
		status(a2a.TaskStateCompleted, a2a.TextPart{Text: "All good."})
	case "ask":
		if rc.StoredTask == nil {
			status(a2a.TaskStateInputRequired, a2a.TextPart{Text: "Which color?"},
				a2a.DataPart{Data: map[string]any{"fields": []any{
					map[string]any{"name": "color", "type": "string", "description": "Paint color", "required": true, "enum": []any{"red", "blue"}},
				}}})
		} else {
			status(a2a.TaskStateCompleted, a2a.TextPart{Text: fmt.Sprintf("Painted it %v.", args["color"])})
		}
	case "badfile":
		task.Artifacts = []*a2a.Artifact{{ID: "a1", Parts: a2a.ContentParts{
			a2a.FilePart{File: a2a.FileURI{FileMeta: a2a.FileMeta{Name: "gone.png"}, URI: e.baseURL + "/missing.png"}}}}}
		status(a2a.TaskStateCompleted)
	case "ask_plain":
		status(a2a.TaskStateInputRequired, a2a.TextPart{Text: "Tell me more."})
	case "fail":
		status(a2a.TaskStateFailed, a2a.TextPart{Text: "disk full on renderer"})
	case "reject":
		status(a2a.TaskStateRejected, a2a.TextPart{Text: "I only draw cats"})
	case "message":
		return q.Write(ctx, a2a.NewMessage(a2a.MessageRoleAgent, a2a.TextPart{Text: "direct answer"},
			a2a.DataPart{Data: map[string]any{"n": 1}}))
	case "slow":
		select {
		case <-ctx.Done():
		case <-e.release:
		}
		status(a2a.TaskStateCompleted, a2a.TextPart{Text: "too late"})
	default:
		status(a2a.TaskStateFailed, a2a.TextPart{Text: fmt.Sprintf("unknown mode %v", args["mode"])})
	}
	return q.Write(ctx, task)
}

func (e *testExecutor) Cancel(ctx context.Context, rc *a2asrv.RequestContext, q eventqueue.Queue) error {
	return nil
}

// newA2AServer starts an in-process a2a-go specialist at /rpc, plus raw
// endpoints misbehaving the ways real gateways do.
func newA2AServer(t testing.TB) (*httptest.Server, *testExecutor) {
	t.Helper()
	exec := &testExecutor{release: make(chan struct{})}
	t.Cleanup(func() { close(exec.release) })
	mux := http.NewServeMux()
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec)))
	mux.HandleFunc("/generated.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(pngBytes)
	})
	mux.HandleFunc("/rpcerror", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID any `json:"id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID,
			"error": map[string]any{"code": -32000, "message": "renderer exploded", "data": map[string]any{"detail": "GPU lost"}}})
	})
	mux.HandleFunc("/rpcerror500", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":"1","error":{"code":-32603,"message":"Internal error","data":"stack overflow in planner"}}`)
	})
	mux.HandleFunc("/bad502", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "<html>\n<head><title>502 Bad Gateway</title></head>\n<body>\n<center><h1>502 Bad Gateway</h1></center>\n<hr><center>nginx/1.25.3</center>\n</body>\n</html>\n")
	})
	mux.HandleFunc("/html200", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, "<html><body>Please log in to the proxy</body></html>")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	exec.baseURL = srv.URL
	return srv, exec
}

func testCapability(url string) catalog.Capability {
	return catalog.Capability{Tool: "paint", SkillID: "paint", Agent: "Test Agent", AgentURL: url}
}

func seqIDs() func() string {
	var mu sync.Mutex
	n := 0
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		n++
		return fmt.Sprintf("art_%d", n)
	}
}

// docs/design.md §5: arguments as a DataPart, referenced artifacts as FileParts with
// a URL the specialist can fetch, inputSources in message metadata, the call
// id as message id; a completed task's files are copied into our store.
func TestInvokeCompletedWithFiles(t *testing.T) {
	t.Parallel()
	srv, exec := newA2AServer(t)
	store := newMemStore(t)
	if _, err := store.Put(t.Context(), "c1", "art_in", "text/plain", strings.NewReader("hello file")); err != nil {
		t.Fatal(err)
	}
	// The agent serves its files on loopback: allowed by its origin only.
	inv := NewInvoker(InvokerOptions{Artifacts: store, NewID: seqIDs(), FileOrigins: []string{srv.URL}})
	in := artifact.Artifact{ID: "art_in", Name: "in.txt", MimeType: "text/plain"}
	out := inv.Invoke(t.Context(), tool.Call{
		ConversationID: "c1", TurnID: "t1", CallID: "call_1",
		Capability: testCapability(srv.URL + "/rpc"),
		Arguments:  map[string]any{"mode": "file", "artifact_id": "art_in"},
		Sources:    map[string]string{"mode": "model", "artifact_id": "context"},
		Files:      []artifact.Artifact{in},
	})

	// What the agent received.
	msgs := exec.messages()
	if len(msgs) != 1 {
		t.Fatalf("agent received %d messages, want 1", len(msgs))
	}
	m := msgs[0]
	if m.ID != "call_1" {
		t.Errorf("message id = %q, want call_1", m.ID)
	}
	wantMeta := map[string]any{"inputSources": map[string]any{"mode": "model", "artifact_id": "context"}, "skillId": "paint"}
	if diff := cmp.Diff(wantMeta, m.Metadata); diff != "" {
		t.Errorf("message metadata mismatch (-want +got):\n%s", diff)
	}
	url, _ := store.URL(t.Context(), "c1", "art_in", 0)
	wantParts := a2a.ContentParts{
		a2a.DataPart{Data: map[string]any{"mode": "file", "artifact_id": "art_in"}},
		a2a.FilePart{File: a2a.FileURI{FileMeta: a2a.FileMeta{Name: "in.txt", MimeType: "text/plain"}, URI: url},
			Metadata: map[string]any{"artifact_id": "art_in"}},
	}
	if diff := cmp.Diff(wantParts, m.Parts); diff != "" {
		t.Errorf("message parts mismatch (-want +got):\n%s", diff)
	}
	exec.mu.Lock()
	fetched := exec.fetched[url]
	exec.mu.Unlock()
	if fetched != "hello file" {
		t.Errorf("agent fetched %q from the FilePart URI, want %q", fetched, "hello file")
	}

	// What came back.
	want := record.CallOutcome{
		CallID: "call_1", Tool: "paint",
		Result: record.ToolResult{
			Status:  record.ResultSucceeded,
			Summary: "All good.\n\nUpper-cased the file.",
			Result:  `{"pages":2}`,
			Artifacts: []artifact.Ref{
				{ID: "art_1", Name: "upper.txt", MimeType: "text/plain", Description: "The input, upper-cased"},
				{ID: "art_2", Name: "preview.png", MimeType: "image/png"},
			},
		},
		Artifacts: []artifact.Artifact{
			{ID: "art_1", Name: "upper.txt", MimeType: "text/plain", Description: "The input, upper-cased", Size: 10, CallID: "call_1", TurnID: "t1"},
			{ID: "art_2", Name: "preview.png", MimeType: "image/png", Size: int64(len(pngBytes)), CallID: "call_1", TurnID: "t1"},
		},
	}
	opts := cmp.Options{
		cmpopts.IgnoreFields(record.CallOutcome{}, "Raw", "StartedAt", "EndedAt"),
		cmpopts.IgnoreFields(artifact.Artifact{}, "CreatedAt"),
	}
	if diff := cmp.Diff(want, out, opts); diff != "" {
		t.Errorf("Invoke() mismatch (-want +got):\n%s", diff)
	}
	for _, a := range out.Artifacts {
		if a.CreatedAt.IsZero() {
			t.Errorf("artifact %s CreatedAt is zero", a.ID)
		}
	}
	if out.StartedAt.IsZero() || out.EndedAt.Before(out.StartedAt) {
		t.Errorf("StartedAt/EndedAt = %v/%v, want set and ordered", out.StartedAt, out.EndedAt)
	}
	if f, ok := store.file("c1", "art_1"); !ok || string(f.body) != "HELLO FILE" {
		t.Errorf("stored art_1 = %q (found %v), want HELLO FILE", f.body, ok)
	}
	if f, ok := store.file("c1", "art_2"); !ok || !bytes.Equal(f.body, pngBytes) || f.mime != "image/png" {
		t.Errorf("stored art_2 = %q %q (found %v), want the PNG", f.mime, f.body, ok)
	}
	var raw map[string]any
	if err := json.Unmarshal(out.Raw, &raw); err != nil || raw["status"] != "succeeded" || raw["result"] == nil {
		t.Errorf("Raw = %s, want JSON with status and result (err %v)", out.Raw, err)
	}
}

// docs/design.md §5: input-required becomes a form; its answer continues the same
// task (same task and context ids).
func TestInvokeInputRequiredThenCompleted(t *testing.T) {
	t.Parallel()
	srv, exec := newA2AServer(t)
	inv := NewInvoker(InvokerOptions{})
	c := tool.Call{ConversationID: "c1", TurnID: "t1", CallID: "call_2", Capability: testCapability(srv.URL + "/rpc"),
		Arguments: map[string]any{"mode": "ask"}, Sources: map[string]string{"mode": "model"}}
	out := inv.Invoke(t.Context(), c)
	if out.InputRequired == nil {
		t.Fatalf("Invoke() InputRequired = nil, outcome %+v", out)
	}
	if out.Result.Status != "" {
		t.Errorf("Result.Status = %q, want empty for input-required", out.Result.Status)
	}
	wantFields := []catalog.FormField{{Name: "color", Type: "string", Description: "Paint color", Required: true, Enum: []string{"red", "blue"}}}
	if diff := cmp.Diff(wantFields, out.InputRequired.Fields); diff != "" {
		t.Errorf("InputRequired.Fields mismatch (-want +got):\n%s", diff)
	}
	if out.InputRequired.Message != "Which color?" || out.InputRequired.Task.TaskID == "" || out.InputRequired.Task.ContextID == "" {
		t.Errorf("InputRequired = %+v, want message and task ids", out.InputRequired)
	}

	c.Arguments = map[string]any{"mode": "ask", "color": "red"}
	c.Sources = map[string]string{"mode": "model", "color": "user"}
	c.Continue = &out.InputRequired.Task
	out2 := inv.Invoke(t.Context(), c)
	if out2.Result.Status != record.ResultSucceeded || out2.Result.Summary != "Painted it red." {
		t.Errorf("continued Invoke() result = %+v, want succeeded 'Painted it red.'", out2.Result)
	}
	msgs := exec.messages()
	if len(msgs) != 2 {
		t.Fatalf("agent received %d messages, want 2", len(msgs))
	}
	second := msgs[1]
	if string(second.TaskID) != out.InputRequired.Task.TaskID || second.ContextID != out.InputRequired.Task.ContextID {
		t.Errorf("continuation task/context = %s/%s, want %+v", second.TaskID, second.ContextID, out.InputRequired.Task)
	}
	if second.ID == msgs[0].ID || !strings.HasPrefix(second.ID, "call_2") {
		t.Errorf("continuation message id = %q, want distinct from %q and derived from the call id", second.ID, msgs[0].ID)
	}
}

// Each failure path yields a failed result carrying the agent's own words;
// Invoke never returns an error (a failing specialist is a failed result,
// never a failed turn).
func TestInvokeFailures(t *testing.T) {
	t.Parallel()
	srv, _ := newA2AServer(t)
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()

	tests := []struct {
		name    string
		path    string
		url     string
		mode    string
		timeout time.Duration
		want    []string // substrings of Result.Error
	}{
		{name: "failed task", path: "/rpc", mode: "fail", want: []string{"failed", "disk full on renderer"}},
		{name: "rejected task", path: "/rpc", mode: "reject", want: []string{"rejected", "I only draw cats"}},
		{name: "JSON-RPC error", path: "/rpcerror", mode: "x", want: []string{"-32000", "renderer exploded", "GPU lost"}},
		{name: "JSON-RPC error with HTTP 500", path: "/rpcerror500", mode: "x", want: []string{"500", "Internal error", "stack overflow in planner"}},
		{name: "HTML 502", path: "/bad502", mode: "x", want: []string{"HTTP 502 Bad Gateway", "<title>502 Bad Gateway</title>", "nginx/1.25.3"}},
		{name: "HTML 200", path: "/html200", mode: "x", want: []string{"text/html", "Please log in to the proxy"}},
		{name: "returned file not fetchable", path: "/rpc", mode: "badfile", want: []string{"gone.png", "404"}},
		{name: "timeout", path: "/rpc", mode: "slow", timeout: 300 * time.Millisecond, want: []string{"did not answer within 300ms"}},
		{name: "connection refused", url: deadURL, mode: "x", want: []string{"connection refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url := tt.url
			if url == "" {
				url = srv.URL + tt.path
			}
			inv := NewInvoker(InvokerOptions{Timeout: tt.timeout, Artifacts: newMemStore(t), FileOrigins: []string{srv.URL}})
			out := inv.Invoke(t.Context(), tool.Call{ConversationID: "c", TurnID: "t", CallID: "call_f",
				Capability: testCapability(url), Arguments: map[string]any{"mode": tt.mode}})
			if out.Result.Status != record.ResultFailed {
				t.Fatalf("Invoke() status = %q, want failed (outcome %+v)", out.Result.Status, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.Result.Error, w) {
					t.Errorf("Invoke() error = %q, want it to contain %q", out.Result.Error, w)
				}
			}
			if out.InputRequired != nil || len(out.Artifacts) != 0 {
				t.Errorf("failed outcome has InputRequired=%v artifacts=%v, want none", out.InputRequired, out.Artifacts)
			}
			if out.EndedAt.IsZero() || out.CallID != "call_f" || out.Tool != "paint" {
				t.Errorf("outcome ids/times = %q %q %v, want call_f paint and EndedAt set", out.CallID, out.Tool, out.EndedAt)
			}
		})
	}
}

// Documents why transport.go exists: a2a-go v0.3.3 alone drops the agent's
// words from a JSON-RPC error and from an HTTP error body. If an upgrade
// fixes this, the wrapper can shrink.
func TestA2AGoV033LosesErrorText(t *testing.T) {
	t.Parallel()
	srv, _ := newA2AServer(t)
	for path, lost := range map[string]string{"/rpcerror": "renderer exploded", "/bad502": "nginx"} {
		client, err := a2aclient.NewFromEndpoints(t.Context(),
			[]a2a.AgentInterface{{Transport: a2a.TransportProtocolJSONRPC, URL: srv.URL + path}},
			a2aclient.WithDefaultsDisabled(), a2aclient.WithJSONRPCTransport(nil))
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.SendMessage(t.Context(), &a2a.MessageSendParams{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: "hi"})})
		if err == nil {
			t.Fatalf("%s: SendMessage() error = nil, want an error", path)
		}
		if strings.Contains(err.Error(), lost) {
			t.Logf("%s: a2a-go now keeps %q: %v", path, lost, err)
		} else {
			t.Logf("%s: a2a-go error without the agent's words: %v", path, err)
		}
	}
}

func TestInvokeMessageAndPlain(t *testing.T) {
	t.Parallel()
	srv, exec := newA2AServer(t)
	inv := NewInvoker(InvokerOptions{})

	// A message response (not a task) counts as completed.
	out := inv.Invoke(t.Context(), tool.Call{CallID: "m1", Capability: testCapability(srv.URL + "/rpc"), Arguments: map[string]any{"mode": "message"}})
	if out.Result.Status != record.ResultSucceeded || out.Result.Summary != "direct answer" || out.Result.Result != `{"n":1}` {
		t.Errorf("Invoke(message) result = %+v, want succeeded with text and data", out.Result)
	}

	// A plain capability is sent its input as text.
	c := testCapability(srv.URL + "/rpc")
	c.Plain = true
	out = inv.Invoke(t.Context(), tool.Call{CallID: "p1", Capability: c, Arguments: map[string]any{"input": "shout this"}})
	if out.Result.Status != record.ResultSucceeded || out.Result.Summary != "SHOUT THIS" {
		t.Errorf("Invoke(plain) result = %+v, want succeeded SHOUT THIS", out.Result)
	}
	msgs := exec.messages()
	last := msgs[len(msgs)-1]
	if diff := cmp.Diff(a2a.ContentParts{a2a.TextPart{Text: "shout this"}}, last.Parts); diff != "" {
		t.Errorf("plain message parts mismatch (-want +got):\n%s", diff)
	}
}

// Without a fields data part the user gets one free-text "answer" field.
func TestInvokeInputRequiredDefaultField(t *testing.T) {
	t.Parallel()
	srv, _ := newA2AServer(t)
	out := NewInvoker(InvokerOptions{}).Invoke(t.Context(), tool.Call{CallID: "q", Capability: testCapability(srv.URL + "/rpc"),
		Arguments: map[string]any{"mode": "ask_plain"}})
	if out.InputRequired == nil {
		t.Fatalf("InputRequired = nil, outcome %+v", out)
	}
	want := []catalog.FormField{{Name: "answer", Type: "string", Description: "Tell me more.", Required: true}}
	if diff := cmp.Diff(want, out.InputRequired.Fields); diff != "" {
		t.Errorf("Fields mismatch (-want +got):\n%s", diff)
	}
}

// An agent may answer a blocking send with a task still "working"; the
// invoker polls tasks/get until it settles.
func TestInvokePollsWorkingTask(t *testing.T) {
	t.Parallel()
	var polls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     any    `json:"id"`
			Method string `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		state := "working"
		var parts []any
		if req.Method == "tasks/get" && polls.Add(1) >= 2 {
			state = "completed"
			parts = []any{map[string]any{"kind": "text", "text": "finally"}}
		}
		task := map[string]any{"kind": "task", "id": "task-1", "contextId": "ctx-1", "status": map[string]any{"state": state}}
		if parts != nil {
			task["artifacts"] = []any{map[string]any{"artifactId": "r", "parts": parts}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": task})
	}))
	t.Cleanup(srv.Close)
	inv := NewInvoker(InvokerOptions{PollInterval: 5 * time.Millisecond})
	out := inv.Invoke(t.Context(), tool.Call{CallID: "w", Capability: testCapability(srv.URL), Arguments: map[string]any{}})
	if out.Result.Status != record.ResultSucceeded || out.Result.Summary != "finally" {
		t.Errorf("Invoke() = %+v, want succeeded 'finally'", out.Result)
	}
	if got := polls.Load(); got != 2 {
		t.Errorf("tasks/get polls = %d, want 2", got)
	}
}
