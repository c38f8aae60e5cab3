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

// fakeAPI is a scripted stand-in for the HTTP API (docs/api/openapi.yaml): each message
// text picks a script of Turn states; every GET of the turn advances one
// state (the last one repeats), and input answers swap in a new script.
type fakeAPI struct {
	t *testing.T

	mu        sync.Mutex
	convs     []string
	turns     map[string]*fakeTurn
	inputs    []Input  // every POST …/input body, in order
	calls     []string // "GET t1", "POST t1/input": the order of turn reads and answers
	messages  []string
	artifacts map[string]string // id → bytes
}

type fakeTurn struct {
	frames  []Turn
	i       int
	onInput func(in Input) fakeReply
}

// fakeReply is the fake's answer to an input: 202 hands it to the turn
// (next becomes its script); an error status leaves the turn waiting, with
// next (when set) as its new script.
type fakeReply struct {
	status    int
	code, msg string
	next      []Turn
}

// accepted is a 202 fakeReply after which the turn shows next.
func accepted(next ...Turn) fakeReply {
	return fakeReply{status: http.StatusAccepted, next: next}
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
		f.calls = append(f.calls, "GET "+parts[4])
		t := ft.frames[ft.i]
		if ft.i < len(ft.frames)-1 {
			ft.i++
		}
		t.TurnID = parts[4]
		writeJSON(w, http.StatusOK, t)
	case r.Method == http.MethodPost && len(parts) == 6 && parts[5] == "input":
		ft := f.turns[parts[4]]
		var in Input
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			writeErr(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		f.inputs = append(f.inputs, in)
		f.calls = append(f.calls, "POST "+parts[4]+"/input")
		if ft == nil || ft.onInput == nil {
			writeErr(w, http.StatusConflict, "not_waiting", "nothing waits for input")
			return
		}
		rep := ft.onInput(in)
		if rep.next != nil {
			ft.frames, ft.i = rep.next, 0
		}
		if rep.status != http.StatusAccepted {
			writeErr(w, rep.status, rep.code, rep.msg)
			return
		}
		ft.onInput = nil
		writeJSON(w, http.StatusAccepted, Turn{TurnID: parts[4], Status: StatusRunning})
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
			onInput: func(in Input) fakeReply {
				if n, _ := in.Answers["q1"]["count"].(float64); n < 1 {
					return fakeReply{status: http.StatusBadRequest, code: "invalid_answer", msg: "count must be at least 1"}
				}
				return accepted(Turn{Status: StatusSucceeded, Reply: "Thanks for the answers.", Steps: []Step{{Tool: "ask_user", CallID: "q1", Status: "answered"}}})
			},
		}, true
	case "publish":
		return &fakeTurn{frames: []Turn{publishFrame("ap1", "web")}, onInput: publishInput("ap1", "web")}, true
	case "publish stale":
		// The approval the client first reads is replaced (as after a
		// specialist's input-required answer) before the client answers.
		ft := &fakeTurn{frames: []Turn{publishFrame("ap1", "web")}}
		ft.onInput = func(in Input) fakeReply {
			ft.onInput = publishInput("ap2", "print")
			return fakeReply{status: http.StatusConflict, code: "stale_approval", msg: "the approval changed",
				next: []Turn{publishFrame("ap2", "print")}}
		}
		return ft, true
	case "boom":
		return &fakeTurn{frames: []Turn{{Status: StatusFailed, Reply: "the specialist is unreachable"}}}, true
	}
	return nil, false
}

// publishFrame is a turn waiting for approval of publishing a1 to channel.
func publishFrame(id, channel string) Turn {
	return Turn{Status: StatusAwaitingApproval, Approval: &Approval{ID: id, Calls: []ApprovalCall{
		{CallID: "p1", Tool: "publish_artifact", Arguments: map[string]any{"artifact_id": "a1", "channel": channel}},
	}}}
}

// publishInput answers an approval like the API: the id must be the open
// approval's, and edited arguments are checked like the skill's schema.
func publishInput(id, channel string) func(Input) fakeReply {
	return func(in Input) fakeReply {
		ap := in.Approval
		switch {
		case ap == nil:
			return fakeReply{status: http.StatusBadRequest, code: "invalid_input", msg: "approval expected"}
		case ap.ID == "":
			return fakeReply{status: http.StatusBadRequest, code: "missing_approval_id", msg: "approval.id is required"}
		case ap.ID != id:
			return fakeReply{status: http.StatusConflict, code: "stale_approval", msg: "the approval changed"}
		case ap.Decision != "approve":
			if len(ap.Arguments) > 0 {
				return fakeReply{status: http.StatusBadRequest, code: "invalid_edit", msg: "arguments only with approve"}
			}
			return accepted(Turn{Status: StatusSucceeded, Reply: "Not published.", Steps: []Step{{Tool: "publish_artifact", CallID: "p1", Status: "rejected"}}})
		}
		if edited, ok := ap.Arguments["p1"]; ok {
			var args struct{ Channel string }
			args.Channel, _ = edited["channel"].(string)
			if args.Channel != "web" && args.Channel != "print" && args.Channel != "archive" {
				return fakeReply{status: http.StatusBadRequest, code: "invalid_arguments", msg: "channel: " + args.Channel + " is not one of web, print, archive"}
			}
			channel = args.Channel
		}
		return accepted(Turn{Status: StatusSucceeded, Reply: "Published to " + channel + ".", Steps: []Step{{Tool: "publish_artifact", CallID: "p1", Status: "succeeded"}}})
	}
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

// Progress, reply and artifact: steps print as they start and end (docs/design.md
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

// Form round trip (docs/design.md §3.3: a missing user input pauses with a typed
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

// Approval (docs/design.md §3.3 "then approval"; docs/design.md §8: the approval covers
// exactly the arguments shown; docs/api/openapi.yaml: the answer names the approval by its
// id): the prompt shows the compact arguments; y approves, n rejects with
// the rest of the line as the note, and e edits the arguments (one JSON line
// per call) and approves the edited call. Edits the server refuses are
// shown and asked again.
func TestRunApproval(t *testing.T) {
	t.Parallel()
	prompt := `Approve publish_artifact {"artifact_id":"a1","channel":"web"}? [y/N/e] `
	approve := func(note string, args map[string]map[string]any) Input {
		return Input{Approval: &Decision{ID: "ap1", Decision: "approve", Note: note, Arguments: args}}
	}
	archive := map[string]map[string]any{"p1": {"artifact_id": "a1", "channel": "archive"}}
	tests := []struct {
		name    string
		answers []string // lines after the message "publish"
		want    []Input  // every input sent
		wantOut []string // in order
	}{
		{
			name:    "y approves with the id",
			answers: []string{"y"},
			want:    []Input{approve("", nil)},
			wantOut: []string{prompt, "approved", "✓ publish_artifact succeeded\n\nPublished to web."},
		},
		{
			name:    "n with a note rejects",
			answers: []string{"n not today"},
			want:    []Input{{Approval: &Decision{ID: "ap1", Decision: "reject", Note: "not today"}}},
			wantOut: []string{prompt, "rejected", "⊘ publish_artifact rejected\n\nNot published."},
		},
		{
			name:    "empty rejects",
			answers: []string{""},
			want:    []Input{{Approval: &Decision{ID: "ap1", Decision: "reject"}}},
			wantOut: []string{prompt, "Not published."},
		},
		{
			name:    "e sends the edited arguments",
			answers: []string{"e", ` {"channel": "archive",  "artifact_id": "a1"} `},
			// The edit is sent as typed (compacted), not re-encoded.
			want: []Input{approve("", map[string]map[string]any{"p1": {"channel": "archive", "artifact_id": "a1"}})},
			wantOut: []string{
				prompt,
				`  publish_artifact {"artifact_id":"a1","channel":"web"}` + "\n",
				"  new arguments for publish_artifact (JSON object, empty keeps them): ",
				"approved",
				"Published to archive.",
			},
		},
		{
			name:    "e with a note",
			answers: []string{"e for the records", `{"artifact_id":"a1","channel":"archive"}`},
			want:    []Input{approve("for the records", archive)},
			wantOut: []string{"Published to archive."},
		},
		{
			name:    "e re-asks a line that is not a JSON object",
			answers: []string{"e", `{"channel":`, `["archive"]`, `{"artifact_id":"a1","channel":"archive"}`},
			want:    []Input{approve("", archive)},
			wantOut: []string{`not a JSON object: {"channel":`, `not a JSON object: ["archive"]`, "Published to archive."},
		},
		{
			name:    "e without a change asks again",
			answers: []string{"e", "", "e", `{"artifact_id": "a1", "channel": "web"}`, "y"},
			want:    []Input{approve("", nil)},
			wantOut: []string{prompt, "no arguments changed", prompt, "no arguments changed", prompt, "Published to web."},
		},
		{
			name:    "invalid_arguments is shown and asked again",
			answers: []string{"e", `{"artifact_id":"a1","channel":"radio"}`, "e", `{"artifact_id":"a1","channel":"archive"}`},
			want: []Input{
				approve("", map[string]map[string]any{"p1": {"artifact_id": "a1", "channel": "radio"}}),
				approve("", archive),
			},
			wantOut: []string{"server: channel: radio is not one of web, print, archive — please answer again.", prompt, "Published to archive."},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, srv := newFakeAPI(t)
			out := run(t, srv, "publish\n"+strings.Join(tt.answers, "\n")+"\n/quit\n", Options{})
			wantInOrder(t, out, tt.wantOut...)
			f.mu.Lock()
			defer f.mu.Unlock()
			if diff := cmp.Diff(tt.want, f.inputs); diff != "" {
				t.Errorf("inputs sent mismatch (-want +got):\n%s\noutput:\n%s", diff, out)
			}
		})
	}
}

// A stale approval (docs/api/openapi.yaml: 409 stale_approval, nothing ran): the client
// says so, reads the turn again and asks about the new approval, whose id
// its answer then carries.
func TestRunApprovalStale(t *testing.T) {
	t.Parallel()
	f, srv := newFakeAPI(t)
	out := run(t, srv, "publish stale\ny\ny\n/quit\n", Options{})
	wantInOrder(t, out,
		`Approve publish_artifact {"artifact_id":"a1","channel":"web"}? [y/N/e] `,
		"The approval changed; please review it again.\n",
		`Approve publish_artifact {"artifact_id":"a1","channel":"print"}? [y/N/e] `,
		"approved",
		"Published to print.",
	)
	f.mu.Lock()
	defer f.mu.Unlock()
	want := []Input{
		{Approval: &Decision{ID: "ap1", Decision: "approve"}},
		{Approval: &Decision{ID: "ap2", Decision: "approve"}},
	}
	if diff := cmp.Diff(want, f.inputs); diff != "" {
		t.Errorf("inputs sent mismatch (-want +got):\n%s\noutput:\n%s", diff, out)
	}
	// The second answer follows a fresh read of the turn.
	wantCalls := []string{"GET t1", "POST t1/input", "GET t1", "POST t1/input", "GET t1"}
	if diff := cmp.Diff(wantCalls, f.calls); diff != "" {
		t.Errorf("turn reads and answers mismatch (-want +got):\n%s", diff)
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

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		t    Turn
		want string
	}{
		{Turn{LLMCalls: 1}, "1 LLM call"},
		{Turn{LLMCalls: 2, Tokens: 1234567}, "2 LLM calls, 1,234,567 tokens"},
		{Turn{LLMCalls: 3, Tokens: 999, CostUSD: 0.00125}, "3 LLM calls, 999 tokens, $0.0013"},
	} {
		if got := usage(tc.t); got != tc.want {
			t.Errorf("usage(%+v) = %q, want %q", tc.t, got, tc.want)
		}
	}
}
