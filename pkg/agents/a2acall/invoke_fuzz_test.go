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
	"testing"
	"time"
	"unicode/utf8"

	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/catalog/batch"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/tool"
)

// bytesStore is an in-memory artifact.Store without URLs (the fuzzed
// calls send no files).
type bytesStore struct {
	mu    sync.Mutex
	files map[string][]byte
}

var _ artifact.Store = (*bytesStore)(nil)

func (s *bytesStore) Put(_ context.Context, cid, id, _ string, body io.Reader) (int64, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.files[cid+"/"+id] = b
	s.mu.Unlock()
	return int64(len(b)), nil
}

func (s *bytesStore) Get(context.Context, string, string) (io.ReadCloser, string, error) {
	return nil, "", artifact.ErrNotFound
}

func (s *bytesStore) URL(context.Context, string, string, time.Duration) (string, error) {
	return "", fmt.Errorf("no URLs")
}

func (s *bytesStore) Delete(_ context.Context, cid, id string) error {
	s.mu.Lock()
	delete(s.files, cid+"/"+id)
	s.mu.Unlock()
	return nil
}

func (s *bytesStore) DeleteConversation(context.Context, string) error { return nil }

// fileTransport serves every file URL an agent returns, without a
// network: 200 with fileBody, or 404 when the path says "missing".
type fileTransport struct{}

var fileBody = []byte("\x89PNG\r\n\x1a\nfuzz")

func (fileTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.Contains(r.URL.Path, "missing") {
		return &http.Response{StatusCode: 404, Status: "404 Not Found", Header: http.Header{}, Body: io.NopCloser(strings.NewReader("gone")), Request: r}, nil
	}
	return &http.Response{StatusCode: 200, Status: "200 OK", Header: http.Header{"Content-Type": {"image/png"}},
		Body: io.NopCloser(bytes.NewReader(fileBody)), ContentLength: int64(len(fileBody)), Request: r}, nil
}

// handlerTransport serves requests with an http.Handler in process.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	w := httptest.NewRecorder()
	t.h.ServeHTTP(w, r)
	resp := w.Result()
	resp.Request = r
	return resp, nil
}

// fuzzStatuses are the HTTP statuses the fuzzed agent answers with.
var fuzzStatuses = []int{200, 200, 200, 200, 500, 502, 404, 401, 204}

// wire is the agent's reply decoded as plain JSON, independently of
// a2a-go, for the oracle.
type wire struct {
	Error  json.RawMessage `json:"error"`
	Result *struct {
		Kind      string     `json:"kind"`
		ID        string     `json:"id"`
		ContextID string     `json:"contextId"`
		Parts     []wirePart `json:"parts"`
		Status    struct {
			State   string `json:"state"`
			Message *struct {
				Parts []wirePart `json:"parts"`
			} `json:"message"`
		} `json:"status"`
		Artifacts []*struct {
			Parts []wirePart `json:"parts"`
		} `json:"artifacts"`
	} `json:"result"`
}

type wirePart struct {
	Kind string          `json:"kind"`
	Text string          `json:"text"`
	Data json.RawMessage `json:"data"`
}

// FuzzInvokeReply drives the real Invoker (a2a-go's JSON-RPC client behind
// our capturing transport) against an agent that answers message/send
// and the first tasks/get poll with arbitrary bytes, under an arbitrary
// HTTP status and content type (issue 20). The agent is an http.Handler
// served in process (handlerTransport: the same client, transport chain
// and bytes as over a socket, three times the execs of an httptest
// server); returned file URLs are served without a network. Whatever the
// reply, the outcome is exactly one of the documented ones (Invoke's doc,
// record.CallOutcome):
//   - succeeded: no error, no input request; only from a 200 whose result is
//     a message or a completed task; every non-blank text part is in the
//     summary, a data part makes a JSON Result, and every returned file is
//     an artifact stored whole under a name and a type;
//   - input_required: Result.Status empty, no artifacts, only from an
//     input-required task, with its ids and at least one named, typed field;
//   - failed: an error text, no artifacts, no input request;
//
// and the limits hold: Raw is valid JSON of at most tool.MaxRaw bytes, the
// compact tool result (batch.Compact) keeps MaxSummary/MaxResult/MaxError
// characters, the tool message the model reads is valid JSON in UTF-8, and
// the outcome marshals for the store.
func FuzzInvokeReply(f *testing.F) {
	rpc := func(result string) string { return `{"jsonrpc":"2.0","id":"1","result":` + result + `}` }
	b64 := base64.StdEncoding.EncodeToString([]byte("hello file"))
	seeds := []struct {
		status uint8
		ctype  string
		body   string
	}{
		{0, "application/json", rpc(`{"kind":"message","messageId":"m1","role":"agent","parts":[{"kind":"text","text":"direct answer"},{"kind":"data","data":{"n":1}}]}`)},
		{0, "application/json", rpc(`{"kind":"task","id":"task-1","contextId":"ctx-1","status":{"state":"completed","message":{"kind":"message","messageId":"s","role":"agent","parts":[{"kind":"text","text":"All good."}]}},` +
			`"artifacts":[{"artifactId":"a1","name":"upper","description":"The input","parts":[{"kind":"text","text":"Upper-cased."},{"kind":"file","file":{"name":"upper.txt","mimeType":"text/plain","bytes":"` + b64 + `"}}]},` +
			`{"artifactId":"a2","name":"preview","parts":[{"kind":"file","file":{"uri":"https://files.example/generated.png"}},{"kind":"data","data":{"pages":2}}]}]}`)},
		{0, "application/json", rpc(`{"kind":"task","id":"t","contextId":"c","status":{"state":"completed"},"artifacts":[{"artifactId":"a","parts":[{"kind":"file","file":{"name":"gone.png","uri":"https://files.example/missing.png"}}]}]}`)},
		{0, "application/json", rpc(`{"kind":"task","id":"t","contextId":"c","status":{"state":"completed"},"artifacts":[{"artifactId":"a","parts":[{"kind":"file","file":{"uri":"http://169.254.169.254/latest/meta-data/"}}]}]}`)},
		{0, "application/json", rpc(`{"kind":"task","id":"t","contextId":"c","status":{"state":"completed"},"artifacts":[{"artifactId":"a","parts":[{"kind":"file","file":{"bytes":"not base64!"}}]}]}`)},
		{0, "application/json", rpc(`{"kind":"task","id":"t","contextId":"c","status":{"state":"completed"},"artifacts":[{"artifactId":"a","name":"chart","parts":[{"kind":"file","file":{"mimeType":"image/svg+xml","bytes":"` + b64 + `"}}]}]}`)},
		{0, "application/json", rpc(`{"kind":"task","id":"t","contextId":"c","status":{"state":"input-required","message":{"kind":"message","messageId":"q","role":"agent","parts":[{"kind":"text","text":"Which color?"},{"kind":"data","data":{"fields":[{"name":"color","type":"string","description":"Paint color","required":true,"enum":["red","blue"]}]}}]}}}`)},
		{0, "application/json", rpc(`{"kind":"task","id":"t","contextId":"c","status":{"state":"input-required","message":{"kind":"message","messageId":"q","role":"agent","parts":[{"kind":"data","data":{"fields":[{"name":""},{"type":"number"}]}}]}}}`)},
		{0, "application/json", rpc(`{"kind":"task","id":"t","contextId":"c","status":{"state":"input-required"}}`)},
		{0, "application/json", rpc(`{"kind":"task","id":"t","contextId":"c","status":{"state":"failed","message":{"kind":"message","messageId":"f","role":"agent","parts":[{"kind":"text","text":"disk full on renderer"}]}}}`)},
		{0, "application/json", rpc(`{"kind":"task","id":"t","contextId":"c","status":{"state":"rejected"},"artifacts":[{"artifactId":"a","parts":[{"kind":"text","text":"I only draw cats"}]}]}`)},
		{0, "application/json", rpc(`{"kind":"task","id":"t","contextId":"c","status":{"state":"canceled"}}`)},
		{0, "application/json", rpc(`{"kind":"task","id":"t","contextId":"c","status":{"state":"auth-required"}}`)},
		{0, "application/json", rpc(`{"kind":"task","id":"t","contextId":"c","status":{"state":"working"}}`)},
		{0, "application/json", rpc(`{"kind":"task","id":"t","contextId":"c","status":{"state":"dreaming"}}`)},
		{0, "application/json", rpc(`{"kind":"status-update","taskId":"t","contextId":"c","status":{"state":"completed"},"final":true}`)},
		{0, "application/json", rpc(`{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"hologram"}]}`)},
		{0, "application/json", rpc(`null`)},
		{0, "application/json", rpc(`{"kind":"message","messageId":"m","role":"agent","parts":[{"kind":"text","text":"` + strings.Repeat("é\\\"", 70000) + `"}]}`)},
		{0, "application/json", `{"jsonrpc":"2.0","id":"1","error":{"code":-32000,"message":"renderer exploded","data":{"detail":"GPU lost"}}}`},
		{0, "application/json", `{"jsonrpc":"2.0","id":"1","error":{"code":-32603,"message":"Internal error","data":"stack overflow"}}`},
		{4, "application/json", `{"jsonrpc":"2.0","id":"1","error":{"code":-32603,"message":"Internal error","data":"stack overflow in planner"}}`},
		{5, "text/html", "<html><head><title>502 Bad Gateway</title></head><body>nginx/1.25.3</body></html>"},
		{0, "text/html; charset=utf-8", "<html><body>Please log in to the proxy</body></html>"},
		{0, "application/json", ``},
		{0, "application/json", `{"jsonrpc":"2.0"`},
		{8, "", ``},
	}
	for _, s := range seeds {
		f.Add(s.status, s.ctype, []byte(s.body))
	}

	var reply struct {
		sync.Mutex
		status int
		ctype  string
		body   []byte
		polls  int
	}
	agent := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := io.ReadAll(r.Body)
		reply.Lock()
		status, ctype, body := reply.status, reply.ctype, reply.body
		if bytes.Contains(req, []byte(`"method":"tasks/get"`)) {
			// The first poll of a task still working gets the same answer;
			// the next one finds the task gone, so no input waits for the
			// invocation's deadline (a slow input stalls the fuzzer while it
			// minimizes).
			if reply.polls++; reply.polls > 1 {
				status, ctype, body = 200, "application/json", []byte(`{"jsonrpc":"2.0","id":"1","error":{"code":-32001,"message":"Task not found"}}`)
			}
		}
		reply.Unlock()
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		}
		w.WriteHeader(status)
		_, _ = w.Write(body)
	})
	store := &bytesStore{files: map[string][]byte{}}
	ids := 0
	inv := NewInvoker(InvokerOptions{Artifacts: store, HTTPClient: &http.Client{Transport: handlerTransport{agent}}, Timeout: 200 * time.Millisecond, PollInterval: time.Microsecond,
		NewID: func() string { ids++; return fmt.Sprintf("art_%d", ids) }})
	inv.files.Client = &http.Client{Transport: fileTransport{}} // no network, whatever URL the agent names
	capability := testCapability("http://agent.fuzz/a2a")

	f.Fuzz(func(t *testing.T, status uint8, ctype string, body []byte) {
		code := fuzzStatuses[int(status)%len(fuzzStatuses)]
		if strings.ContainsAny(ctype, "\r\n\x00") || !utf8.ValidString(ctype) {
			ctype = "application/json"
		}
		reply.Lock()
		reply.status, reply.ctype, reply.body, reply.polls = code, ctype, body, 0
		reply.Unlock()
		store.mu.Lock()
		clear(store.files)
		store.mu.Unlock()

		out := inv.Invoke(t.Context(), tool.Call{ConversationID: "c", TurnID: "t", CallID: "call_t_1", Capability: capability,
			Arguments: map[string]any{"mode": "x"}, Sources: map[string]string{"mode": "model"}})

		desc := fmt.Sprintf("agent answered %d %q %q", code, ctype, tool.Snippet(body))
		if out.CallID != "call_t_1" || out.Tool != capability.Tool || out.EndedAt.Before(out.StartedAt) {
			t.Errorf("%s: outcome ids/times = %q %q %v..%v", desc, out.CallID, out.Tool, out.StartedAt, out.EndedAt)
		}
		if len(out.Raw) > tool.MaxRaw || !json.Valid(out.Raw) {
			t.Errorf("%s: Raw is %d bytes, valid JSON %v; want valid JSON of at most %d", desc, len(out.Raw), json.Valid(out.Raw), tool.MaxRaw)
		}
		if _, err := json.Marshal(out); err != nil {
			t.Errorf("%s: the outcome does not marshal for the store: %v", desc, err)
		}
		compact := batch.Compact(record.PendingCall{CallID: out.CallID, Tool: out.Tool}, out.Result)
		for name, v := range map[string]struct {
			s   string
			max int
		}{"summary": {compact.Summary, batch.MaxSummary}, "result": {compact.Result, batch.MaxResult}, "error": {compact.Error, batch.MaxError}} {
			if n := utf8.RuneCountInString(v.s); n > v.max {
				t.Errorf("%s: compact %s has %d characters, want at most %d", desc, name, n, v.max)
			}
		}
		// An agent's invalid UTF-8 may reach the error text (a2a-go quotes
		// the result it could not read); the tool message is valid anyway.
		if c := batch.Content(compact); !json.Valid([]byte(c)) || !utf8.ValidString(c) {
			t.Errorf("%s: the tool message content is not JSON in UTF-8: %q", desc, c)
		}

		var w wire
		// a2a-go reads the first JSON value of the body and ignores the rest.
		wireOK := code == 200 && json.NewDecoder(bytes.NewReader(body)).Decode(&w) == nil
		switch {
		case out.InputRequired != nil:
			ir := out.InputRequired
			if out.Result.Status != "" || len(out.Artifacts) != 0 {
				t.Errorf("%s: input_required with status %q and %d artifacts, want neither", desc, out.Result.Status, len(out.Artifacts))
			}
			if !wireOK || w.Result == nil || w.Result.Kind != "task" || w.Result.Status.State != "input-required" {
				t.Fatalf("%s: input_required from a reply that is no input-required task", desc)
			}
			if ir.Task.TaskID != w.Result.ID || ir.Task.ContextID != w.Result.ContextID {
				t.Errorf("%s: continues task %+v, want %q/%q", desc, ir.Task, w.Result.ID, w.Result.ContextID)
			}
			if len(ir.Fields) == 0 {
				t.Errorf("%s: input_required without fields", desc)
			}
			for _, fl := range ir.Fields {
				if fl.Name == "" || fl.Type == "" {
					t.Errorf("%s: form field %+v without a name or a type", desc, fl)
				}
			}
			var raw struct {
				Status string `json:"status"`
			}
			if json.Unmarshal(out.Raw, &raw) != nil || raw.Status != "input_required" {
				t.Errorf("%s: Raw %s does not say input_required", desc, tool.Snippet(out.Raw))
			}
		case out.Result.Status == record.ResultSucceeded:
			if out.Result.Error != "" {
				t.Errorf("%s: succeeded with error %q", desc, out.Result.Error)
			}
			if !wireOK || w.Result == nil || len(w.Error) > 0 && string(w.Error) != "null" {
				t.Fatalf("%s: succeeded from a reply without a result", desc)
			}
			var parts []wirePart
			switch {
			case w.Result.Kind == "message":
				parts = w.Result.Parts
			case w.Result.Kind == "task" && w.Result.Status.State == "completed":
				if m := w.Result.Status.Message; m != nil {
					parts = m.Parts
				}
				for _, a := range w.Result.Artifacts {
					if a != nil {
						parts = append(parts, a.Parts...)
					}
				}
			default:
				t.Fatalf("%s: succeeded from a %q result in state %q", desc, w.Result.Kind, w.Result.Status.State)
			}
			data, files := 0, 0
			for _, p := range parts {
				switch p.Kind {
				case "text":
					if strings.TrimSpace(p.Text) != "" && !strings.Contains(out.Result.Summary, p.Text) {
						t.Errorf("%s: the summary %q lost the text %q", desc, tool.Snippet([]byte(out.Result.Summary)), tool.Snippet([]byte(p.Text)))
					}
				case "data":
					data++
				case "file":
					files++
				}
			}
			if (data > 0) != (out.Result.Result != "") || out.Result.Result != "" && !json.Valid([]byte(out.Result.Result)) {
				t.Errorf("%s: %d data parts, Result %q", desc, data, tool.Snippet([]byte(out.Result.Result)))
			}
			if len(out.Artifacts) != files || len(out.Result.Artifacts) != files {
				t.Errorf("%s: %d file parts, %d artifacts and %d refs", desc, files, len(out.Artifacts), len(out.Result.Artifacts))
			}
			for _, a := range out.Artifacts {
				store.mu.Lock()
				b, ok := store.files["c/"+a.ID]
				store.mu.Unlock()
				if !ok || int64(len(b)) != a.Size || a.Name == "" || a.MimeType == "" || a.CallID != "call_t_1" || a.TurnID != "t" {
					t.Errorf("%s: artifact %+v: stored %v (%d bytes)", desc, a, ok, len(b))
				}
			}
		case out.Result.Status == record.ResultFailed:
			if out.Result.Error == "" || len(out.Artifacts) != 0 || out.Result.Artifacts != nil {
				t.Errorf("%s: failed with error %q and %d artifacts", desc, out.Result.Error, len(out.Artifacts))
			}
		default:
			t.Fatalf("%s: outcome %+v is none of succeeded, failed, input_required", desc, out.Result)
		}
	})
}
