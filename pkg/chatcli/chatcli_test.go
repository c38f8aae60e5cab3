package chatcli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const testToken = "tok-123"

// fakeAPI is a scripted stand-in for the HTTP API (API.md): each message
// text picks a script of Turn states; every GET of the turn advances one
// state (the last one repeats), and input answers swap in a new script.
type fakeAPI struct {
	t *testing.T

	mu        sync.Mutex
	convs     []string
	turns     map[string]*fakeTurn
	inputs    []Input // every POST …/input body, in order
	messages  []string
	artifacts map[string]string // id → bytes
}

type fakeTurn struct {
	frames  []Turn
	i       int
	onInput func(in Input) (status int, msg string, next []Turn)
}

func newFakeAPI(t *testing.T) (*fakeAPI, *httptest.Server) {
	f := &fakeAPI{t: t, turns: map[string]*fakeTurn{}, artifacts: map[string]string{"a1": "<svg>hello</svg>"}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+testToken {
		writeErr(w, http.StatusUnauthorized, "unauthorized", "bad token")
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/") // v1 conversations cid …
	switch {
	case r.Method == http.MethodPost && len(parts) == 2:
		cid := fmt.Sprintf("c%d", len(f.convs)+1)
		f.convs = append(f.convs, cid)
		writeJSON(w, http.StatusCreated, map[string]string{"conversation_id": cid})
	case r.Method == http.MethodPost && len(parts) == 4 && parts[3] == "messages":
		var in struct{ Text string }
		json.NewDecoder(r.Body).Decode(&in)
		f.messages = append(f.messages, parts[2]+":"+in.Text)
		ft, ok := f.script(in.Text)
		if !ok {
			writeErr(w, http.StatusBadRequest, "bad_request", "the fake knows no script for "+in.Text)
			return
		}
		tid := fmt.Sprintf("t%d", len(f.turns)+1)
		f.turns[tid] = ft
		writeJSON(w, http.StatusAccepted, map[string]string{"turn_id": tid, "status": "running"})
	case r.Method == http.MethodGet && len(parts) == 5 && parts[3] == "turns":
		ft := f.turns[parts[4]]
		if ft == nil {
			writeErr(w, http.StatusNotFound, "not_found", "no turn")
			return
		}
		t := ft.frames[ft.i]
		if ft.i < len(ft.frames)-1 {
			ft.i++
		}
		t.ID = parts[4]
		writeJSON(w, http.StatusOK, t)
	case r.Method == http.MethodPost && len(parts) == 6 && parts[5] == "input":
		ft := f.turns[parts[4]]
		var in Input
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			writeErr(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		f.inputs = append(f.inputs, in)
		if ft == nil || ft.onInput == nil {
			writeErr(w, http.StatusConflict, "conflict", "nothing waits for input")
			return
		}
		status, msg, next := ft.onInput(in)
		if status != http.StatusAccepted {
			writeErr(w, status, "invalid_input", msg)
			return
		}
		ft.frames, ft.i, ft.onInput = next, 0, nil
		writeJSON(w, http.StatusAccepted, Turn{ID: parts[4], Status: StatusRunning})
	case r.Method == http.MethodGet && len(parts) == 5 && parts[3] == "artifacts":
		b, ok := f.artifacts[parts[4]]
		if !ok {
			writeErr(w, http.StatusNotFound, "not_found", "no artifact")
			return
		}
		w.Header().Set("Content-Type", "image/svg+xml")
		io.WriteString(w, b)
	default:
		writeErr(w, http.StatusNotFound, "not_found", r.Method+" "+r.URL.Path)
	}
}

func (f *fakeAPI) script(text string) (*fakeTurn, bool) {
	svgRef := ArtifactRef{ID: "a1", Name: "hello.svg", MimeType: "image/svg+xml"}
	switch text {
	case "draw":
		return &fakeTurn{frames: []Turn{
			{Status: StatusRunning, Steps: []Step{{Tool: "llm", Status: "running"}}, LLMCalls: 1},
			{Status: StatusRunning, Steps: []Step{{Tool: "llm", Status: "succeeded"}, {Tool: "create_svg_artifact", CallID: "k1", Status: "running"}}, LLMCalls: 1},
			{Status: StatusRunning, Steps: []Step{{Tool: "llm", Status: "succeeded"}, {Tool: "create_svg_artifact", CallID: "k1", Status: "succeeded"}, {Tool: "llm", Status: "running"}}, LLMCalls: 2, Artifacts: []ArtifactRef{svgRef}},
			{Status: StatusSucceeded, Reply: "Here is your SVG.", Steps: []Step{{Tool: "llm", Status: "succeeded"}, {Tool: "create_svg_artifact", CallID: "k1", Status: "succeeded"}, {Tool: "llm", Status: "succeeded"}}, LLMCalls: 2, Artifacts: []ArtifactRef{svgRef}},
		}}, true
	case "ask":
		form := &Form{Calls: []FormCall{{CallID: "q1", Tool: "ask_user", Fields: []FormField{
			{Name: "word", Type: "string", Description: "The word", Required: true},
			{Name: "color", Type: "string", Enum: []string{"red", "blue"}},
			{Name: "count", Type: "integer", Required: true},
			{Name: "transparent", Type: "boolean"},
		}}}}
		return &fakeTurn{
			frames: []Turn{{Status: StatusAwaitingInput, Form: form}},
			onInput: func(in Input) (int, string, []Turn) {
				if n, _ := in.Answers["q1"]["count"].(float64); n < 1 {
					return http.StatusBadRequest, "count must be at least 1", nil
				}
				return http.StatusAccepted, "", []Turn{{Status: StatusSucceeded, Reply: "Thanks for the answers.", Steps: []Step{{Tool: "ask_user", CallID: "q1", Status: "answered"}}}}
			},
		}, true
	case "publish":
		return &fakeTurn{
			frames: []Turn{{Status: StatusAwaitingApproval, Approval: &Approval{Calls: []ApprovalCall{
				{CallID: "p1", Tool: "publish_artifact", Arguments: json.RawMessage(`{ "artifact_id": "a1" }`)},
			}}}},
			onInput: func(in Input) (int, string, []Turn) {
				if in.Approval == nil {
					return http.StatusBadRequest, "approval expected", nil
				}
				if in.Approval.Decision == "approve" {
					return http.StatusAccepted, "", []Turn{{Status: StatusSucceeded, Reply: "Published.", Steps: []Step{{Tool: "publish_artifact", CallID: "p1", Status: "succeeded"}}}}
				}
				return http.StatusAccepted, "", []Turn{{Status: StatusSucceeded, Reply: "Not published.", Steps: []Step{{Tool: "publish_artifact", CallID: "p1", Status: "rejected"}}}}
			},
		}, true
	case "boom":
		return &fakeTurn{frames: []Turn{{Status: StatusFailed, Reply: "the specialist is unreachable"}}}, true
	}
	return nil, false
}

func run(t *testing.T, srv *httptest.Server, input string, opts Options) string {
	t.Helper()
	var out strings.Builder
	opts.BaseURL, opts.Token = srv.URL, testToken
	opts.In, opts.Out = strings.NewReader(input), &out
	opts.HTTPClient, opts.PollInterval = srv.Client(), time.Millisecond
	if opts.OutDir == "" {
		opts.OutDir = t.TempDir()
	}
	if err := Run(t.Context(), opts); err != nil {
		t.Fatalf("Run() = %v, want nil; output:\n%s", err, out.String())
	}
	return out.String()
}

// wantInOrder fails unless every line appears in out, in this order.
func wantInOrder(t *testing.T, out string, lines ...string) {
	t.Helper()
	rest := out
	for _, l := range lines {
		i := strings.Index(rest, l)
		if i < 0 {
			t.Fatalf("output lacks %q (in order); output:\n%s", l, out)
		}
		rest = rest[i+len(l):]
	}
}

// Progress, reply and artifact: steps print as they start and end (DESIGN.md
// §7 "progress visible to the user"), the reply follows, and the produced
// artifact is saved without overwriting an existing file.
func TestRunProgressReplyArtifact(t *testing.T) {
	t.Parallel()
	_, srv := newFakeAPI(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.svg"), []byte("older"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := run(t, srv, "draw\n/quit\n", Options{OutDir: dir})

	saved := filepath.Join(dir, "hello-2.svg")
	wantInOrder(t, out,
		"conversation c1",
		"→ create_svg_artifact … running\n",
		"✓ create_svg_artifact succeeded\n",
		"Here is your SVG.\n",
		"(2 LLM calls)",
		"saved hello.svg (image/svg+xml) to "+saved,
	)
	if strings.Count(out, "→ create_svg_artifact") != 1 {
		t.Errorf("running line printed %d times, want once; output:\n%s", strings.Count(out, "→ create_svg_artifact"), out)
	}
	if strings.Contains(out, "llm") {
		t.Errorf("output shows llm steps, want them only as a count; output:\n%s", out)
	}
	got, err := os.ReadFile(saved)
	if err != nil {
		t.Fatalf("read saved artifact: %v", err)
	}
	if diff := cmp.Diff("<svg>hello</svg>", string(got)); diff != "" {
		t.Errorf("saved artifact mismatch (-want +got):\n%s", diff)
	}
	if old, _ := os.ReadFile(filepath.Join(dir, "hello.svg")); string(old) != "older" {
		t.Errorf("existing hello.svg = %q, want it untouched", old)
	}
}

// Form round trip (spec §3.3: a missing user input pauses with a typed
// form; answers go through validation): a bad local value is re-asked at
// once, a 400 from the server is shown and the whole form asked again.
func TestRunFormReaskAfter400(t *testing.T) {
	t.Parallel()
	f, srv := newFakeAPI(t)
	input := strings.Join([]string{
		"ask",
		"Popel", "blue", "x", "0", "", // count "x" is re-asked locally; 0 reaches the server
		"Popel", "green", "red", "3", "y", // "green" is not in the enum
		"/quit",
	}, "\n") + "\n"
	out := run(t, srv, input, Options{})

	want := []Input{
		{Answers: map[string]map[string]any{"q1": {"word": "Popel", "color": "blue", "count": float64(0)}}},
		{Answers: map[string]map[string]any{"q1": {"word": "Popel", "color": "red", "count": float64(3), "transparent": true}}},
	}
	f.mu.Lock()
	got := f.inputs
	f.mu.Unlock()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("inputs sent mismatch (-want +got):\n%s\noutput:\n%s", diff, out)
	}
	wantInOrder(t, out,
		"ask_user needs some input:",
		"word (string, required) — The word: ",
		"color (string, one of red|blue): ",
		"count (integer, required): ",
		"count must be a whole number",
		"transparent (boolean, y/n): ",
		"server: count must be at least 1 — please answer again.",
		"color must be one of red, blue",
		"✎ ask_user answered",
		"Thanks for the answers.",
	)
}

// Approval (spec §3.3 "then approval"; DESIGN.md §7: the approval covers
// exactly the arguments shown): the prompt shows the compact arguments and
// y approves, n rejects with the rest of the line as the note.
func TestRunApproval(t *testing.T) {
	t.Parallel()
	tests := []struct {
		answer   string
		want     Decision
		wantLine string
	}{
		{"y", Decision{Decision: "approve"}, "✓ publish_artifact succeeded\n\nPublished."},
		{"n not today", Decision{Decision: "reject", Note: "not today"}, "⊘ publish_artifact rejected\n\nNot published."},
		{"", Decision{Decision: "reject"}, "Not published."},
	}
	for _, tt := range tests {
		t.Run(tt.answer, func(t *testing.T) {
			t.Parallel()
			f, srv := newFakeAPI(t)
			out := run(t, srv, "publish\n"+tt.answer+"\n/quit\n", Options{})
			wantInOrder(t, out, `Approve publish_artifact {"artifact_id":"a1"}? [y/N] `, tt.wantLine)
			f.mu.Lock()
			defer f.mu.Unlock()
			if len(f.inputs) != 1 || f.inputs[0].Approval == nil {
				t.Fatalf("inputs = %+v, want one approval", f.inputs)
			}
			if diff := cmp.Diff(tt.want, *f.inputs[0].Approval); diff != "" {
				t.Errorf("approval mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// Commands and errors: /new starts another conversation, a given
// conversation is reused, API errors and failed turns are shown and the
// REPL goes on, and end of input ends Run cleanly.
func TestRunCommandsAndErrors(t *testing.T) {
	t.Parallel()
	f, srv := newFakeAPI(t)
	out := run(t, srv, "boom\nunknown words\n/frobnicate\n/new\nboom\n", Options{Conversation: "c0"})
	wantInOrder(t, out,
		"conversation c0",
		"✗ turn failed: the specialist is unreachable",
		"error: send message: the fake knows no script for unknown words (HTTP 400 bad_request)",
		"unknown command /frobnicate",
		"conversation c1",
		"✗ turn failed",
	)
	f.mu.Lock()
	defer f.mu.Unlock()
	if diff := cmp.Diff([]string{"c0:boom", "c0:unknown words", "c1:boom"}, f.messages); diff != "" {
		t.Errorf("messages mismatch (-want +got):\n%s", diff)
	}
}

func TestRunBadToken(t *testing.T) {
	t.Parallel()
	_, srv := newFakeAPI(t)
	err := Run(t.Context(), Options{BaseURL: srv.URL, Token: "wrong", In: strings.NewReader(""), Out: io.Discard, HTTPClient: srv.Client()})
	if err == nil || !strings.Contains(err.Error(), "bad token") {
		t.Errorf("Run() with a bad token = %v, want the server's message", err)
	}
}

func TestSafeName(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, id, want string }{
		{"hello.svg", "a1", "hello.svg"},
		{"../../etc/passwd", "a1", "passwd"},
		{`..\..\x.png`, "a1", "x.png"},
		{"..", "a1", "a1"},
		{"", "a1", "a1"},
		{"dir/", "a1", "dir"},
	}
	for _, tt := range tests {
		if got := safeName(tt.name, tt.id); got != tt.want {
			t.Errorf("safeName(%q, %q) = %q, want %q", tt.name, tt.id, got, tt.want)
		}
	}
}
