package chatcli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// streamAPI serves one turn, t1, through the event stream (docs/api/openapi.yaml GET
// …/events): events are written as the test lists them, hold keeps the
// stream open after them (a turn still running), and GET …/turns/t1
// answers final. It records the cancel requests.
type streamAPI struct {
	events []string // SSE event data, JSON
	hold   bool
	final  Turn
	sent   chan struct{} // closed once every event is written

	mu      sync.Mutex
	cancels int
	lastIDs []string // the Last-Event-ID of each stream request
}

func newStreamAPI(t *testing.T, a *streamAPI) *httptest.Server {
	t.Helper()
	a.sent = make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/conversations":
			writeJSON(w, http.StatusCreated, map[string]string{"conversation_id": "c1"})
		case r.Method == http.MethodPost && r.URL.Path == "/v1/conversations/c1/messages":
			writeJSON(w, http.StatusAccepted, map[string]string{"turn_id": "t1", "status": "running"})
		case r.Method == http.MethodGet && r.URL.Path == "/v1/conversations/c1/events":
			if got := r.URL.Query().Get("turn"); got != "t1" {
				t.Errorf("events ?turn=%q, want t1", got)
			}
			a.mu.Lock()
			a.lastIDs = append(a.lastIDs, r.Header.Get("Last-Event-ID"))
			a.mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, ": heartbeat\n\n")
			for i, data := range a.events {
				var ev struct{ Type string }
				json.Unmarshal([]byte(data), &ev)
				fmt.Fprintf(w, "id: 1-%d\nevent: %s\ndata: %s\n\n", i, ev.Type, data)
			}
			w.(http.Flusher).Flush()
			once.Do(func() { close(a.sent) })
			if a.hold {
				<-r.Context().Done()
			}
		case r.Method == http.MethodGet && r.URL.Path == "/v1/conversations/c1/turns/t1":
			t := a.final
			t.TurnID = "t1"
			writeJSON(w, http.StatusOK, t)
		case r.Method == http.MethodPost && r.URL.Path == "/v1/conversations/c1/turns/t1/cancel":
			a.mu.Lock()
			a.cancels++
			a.mu.Unlock()
			writeJSON(w, http.StatusAccepted, Turn{TurnID: "t1", Status: StatusCancelled, Reply: "Cancelled at your request."})
		default:
			writeErr(w, http.StatusNotFound, "not_found", r.Method+" "+r.URL.Path)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The reply and the steps come from the event stream as they happen; the
// streamed reply is not printed twice, and one LLM call reads "1 LLM call".
func TestFollowStream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		events []string
		final  Turn
		want   []string
		absent []string
	}{
		{
			name: "steps and reply",
			events: []string{
				`{"type":"turn.started","turn_id":"t1","text":"draw"}`,
				`{"type":"step.started","turn_id":"t1","tool":"llm"}`,
				`{"type":"step.ended","turn_id":"t1","tool":"llm","status":"succeeded"}`,
				`{"type":"step.started","turn_id":"t1","tool":"create_svg_artifact","call_id":"k1"}`,
				`{"type":"step.ended","turn_id":"t1","tool":"create_svg_artifact","call_id":"k1","status":"succeeded","duration_ms":12}`,
				`{"type":"llm.delta","turn_id":"t1","text":"Here is ","offset":0,"llm_call":2}`,
				`{"type":"llm.delta","turn_id":"t1","text":"your SVG.","offset":8,"llm_call":2}`,
				`{"type":"turn.ended","turn_id":"t1","status":"succeeded","reply":"Here is your SVG.","llm_calls":1}`,
			},
			final: Turn{Status: StatusSucceeded, Reply: "Here is your SVG.", LLMCalls: 1,
				Steps: []Step{{Tool: "llm", Status: "succeeded"}, {Tool: "create_svg_artifact", CallID: "k1", Status: "succeeded"}}},
			want:   []string{"→ create_svg_artifact … running\n", "✓ create_svg_artifact succeeded\n", "\nHere is your SVG.\n", "(1 LLM call)\n"},
			absent: []string{"llm", "LLM calls"},
		},
		{
			name: "a retried call restarts its text",
			events: []string{
				`{"type":"llm.delta","turn_id":"t1","text":"Hello wor","offset":0,"llm_call":1}`,
				`{"type":"llm.delta","turn_id":"t1","text":"Hello world","offset":0,"llm_call":1}`,
				`{"type":"turn.ended","turn_id":"t1","status":"succeeded","reply":"Hello world","llm_calls":2}`,
			},
			final: Turn{Status: StatusSucceeded, Reply: "Hello world", LLMCalls: 2},
			want:  []string{"Hello wor", "\n↺ Hello world\n", "(2 LLM calls)\n"},
		},
		{
			name: "blocked",
			events: []string{
				`{"type":"turn.ended","turn_id":"t1","status":"blocked","reply":"the request names a blocked word"}`,
			},
			final: Turn{Status: StatusBlocked, Reply: "the request names a blocked word"},
			want:  []string{"⛔ blocked by policy: the request names a blocked word\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newStreamAPI(t, &streamAPI{events: tt.events, final: tt.final})
			out := run(t, srv, "draw\n", Options{})
			wantInOrder(t, out, tt.want...)
			for _, a := range tt.absent {
				if strings.Contains(out, a) {
					t.Errorf("output contains %q; output:\n%s", a, out)
				}
			}
			if n := strings.Count(out, tt.final.Reply); n != 1 {
				t.Errorf("reply printed %d times, want once; output:\n%s", n, out)
			}
		})
	}
}

// Ctrl-C while a turn runs asks whether to stop it; "s" cancels it
// (POST …/cancel) and Run ends without an error.
func TestInterruptStopsTurn(t *testing.T) {
	t.Parallel()
	a := &streamAPI{hold: true, events: []string{`{"type":"step.started","turn_id":"t1","tool":"create_svg_artifact","call_id":"k1"}`}}
	srv := newStreamAPI(t, a)
	intr := make(chan os.Signal, 1)
	// Ctrl-C once the event is on the screen.
	w := &shownWriter{want: "→ create_svg_artifact … running\n", shown: make(chan struct{})}
	go func() {
		<-w.shown
		intr <- os.Interrupt
	}()
	// After the stop, the prompt is back: /workflows still runs, then
	// the end of input (Ctrl-D) leaves.
	opts := Options{BaseURL: srv.URL, Token: testToken, In: strings.NewReader("draw\n/exit\n"), Out: w,
		HTTPClient: srv.Client(), PollInterval: time.Millisecond, OutDir: t.TempDir(), Interrupt: intr}
	if err := Run(t.Context(), opts); err != nil {
		t.Fatalf("Run() = %v, want nil; output:\n%s", err, w.String())
	}
	wantInOrder(t, w.String(), "→ create_svg_artifact … running\n", "stopped: Cancelled at your request.\n", "> ")
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cancels != 1 {
		t.Errorf("cancel requests = %d, want 1", a.cancels)
	}
}

// Ctrl-C at the prompt clears the line and prompts again, as a shell does;
// it never ends the session.
func TestInterruptAtThePromptClearsTheLine(t *testing.T) {
	t.Parallel()
	srv := newStreamAPI(t, &streamAPI{})
	intr := make(chan os.Signal, 1)
	intr <- os.Interrupt
	in, inW := io.Pipe()
	w := &shownWriter{want: "> \n> ", shown: make(chan struct{})}
	go func() {
		<-w.shown // the interrupt was taken and the prompt is back
		_, _ = inW.Write([]byte("/exit\n"))
	}()
	opts := Options{BaseURL: srv.URL, Token: testToken, In: in, Out: w, HTTPClient: srv.Client(), PollInterval: time.Millisecond, OutDir: t.TempDir(), Interrupt: intr}
	if err := Run(t.Context(), opts); err != nil {
		t.Fatalf("Run() = %v, want nil; output:\n%s", err, w.String())
	}
}

// shownWriter is Run's output; shown is closed once it holds want.
type shownWriter struct {
	mu    sync.Mutex
	b     strings.Builder
	want  string
	shown chan struct{}
	once  sync.Once
}

func (w *shownWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.b.Write(p)
	if strings.Contains(w.b.String(), w.want) {
		w.once.Do(func() { close(w.shown) })
	}
	return n, err
}

func (w *shownWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// Without an API at the URL, the error says how to start one.
func TestRunWithoutStack(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	err := Run(t.Context(), Options{BaseURL: base, Token: testToken, In: strings.NewReader(""), Out: &strings.Builder{}})
	if err == nil || !strings.Contains(err.Error(), "make run") || !strings.Contains(err.Error(), "--url") {
		t.Errorf("Run() without a stack = %v, want it to name make run and --url", err)
	}
}

func TestCompact(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{``, `{}`},
		{`{ "a": 1, "b": [1, 2] }`, `{"a":1,"b":[1,2]}`},
		{`{"artifact_id": "\u003cartifact 1 of step 1\u003e"}`, `{"artifact_id":"<artifact 1 of step 1>"}`},
		{`{"q": "a \u0026 b", "z": "\u003E"}`, `{"q":"a & b","z":">"}`},
		{`{"path": "C:\\u003cdir"}`, `{"path":"C:\\u003cdir"}`},
		{`{"s": "\"quoted\" \n \u00e9"}`, `{"s":"\"quoted\" \n \u00e9"}`},
	}
	for _, tt := range tests {
		if got := compact(json.RawMessage(tt.in)); got != tt.want {
			t.Errorf("compact(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
