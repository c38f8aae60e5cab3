// Package chatcli is the terminal client of clientagent (`clientagent chat`):
// a line-oriented REPL over the HTTP API (docs/api/openapi.yaml) that posts messages, shows
// a turn's steps and the reply as they happen (from the conversation's
// event stream, or by polling the turn when the stream is unavailable),
// asks form questions and approvals interactively, prints the reply and
// saves new artifacts to a directory. Ctrl-C while a turn runs asks
// whether to stop it.
// It only speaks the public HTTP API; it must not import the server's
// packages or reach Valkey, S3 or the state machine directly.
package chatcli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Options configures Run.
type Options struct {
	BaseURL string // API origin, e.g. http://127.0.0.1:8080
	Token   string // bearer token
	In      io.Reader
	Out     io.Writer
	// OutDir receives the artifacts that turns produce ("." when empty).
	OutDir string
	// Conversation continues an existing conversation; empty creates one.
	Conversation string
	HTTPClient   *http.Client
	// PollInterval is the pause between polls of a running turn (500ms when zero).
	PollInterval time.Duration
	// NoStream follows turns by polling only, never through the event stream.
	NoStream bool
	// Interrupt delivers Ctrl-C (os.Interrupt): at the prompt it clears the
	// line; while a turn runs it stops the turn and returns to the prompt.
	// The end of In (Ctrl-D) or /exit ends Run. Nil: no interrupts.
	Interrupt <-chan os.Signal
}

// errQuit ends the REPL without an error (/quit or end of input).
var errQuit = errors.New("quit")

// errInterrupted is a Ctrl-C that arrived while the REPL waited.
var errInterrupted = errors.New("interrupted")

// Run runs the REPL until /quit, the end of In, or ctx ends. API errors of
// one message are printed and the REPL goes on; Run returns an error only
// when it cannot continue (no conversation, a broken writer, ctx ended).
func Run(ctx context.Context, opts Options) error {
	s := &session{
		api:    &Client{BaseURL: opts.BaseURL, Token: opts.Token, HTTP: opts.HTTPClient},
		out:    opts.Out,
		outDir: opts.OutDir,
		cid:    opts.Conversation,
		poll:   opts.PollInterval,
		saved:  map[string]bool{},
		names:  map[string]string{},
		lines:  readLines(opts.In),
		intr:   opts.Interrupt,
		stream: !opts.NoStream,
	}
	if s.out == nil {
		s.out = io.Discard
	}
	if s.outDir == "" {
		s.outDir = "."
	}
	if s.poll <= 0 {
		s.poll = 500 * time.Millisecond
	}
	if s.cid == "" {
		if err := s.newConversation(ctx); err != nil {
			return s.unreachable(err)
		}
	} else {
		s.printf("conversation %s\n", s.cid)
	}
	s.printf("Type a message. Commands: /new (new conversation), /upload PATH (attach a file), /quit.\n")
	for {
		s.printf("> ")
		line, err := s.readLine(ctx)
		if errors.Is(err, errInterrupted) {
			// Ctrl-C at the prompt clears the line, as a shell does (the
			// terminal drops what was typed); Ctrl-D or /exit leaves.
			s.printf("\n")
			continue
		}
		if errors.Is(err, errQuit) {
			s.printf("\n")
			return nil
		}
		if err != nil {
			return err
		}
		if err := s.handle(ctx, strings.TrimSpace(line)); err != nil {
			if errors.Is(err, errQuit) {
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			s.printf("error: %v\n", s.unreachable(err))
		}
	}
}

type session struct {
	api     *Client
	out     io.Writer
	outDir  string
	cid     string
	poll    time.Duration
	saved   map[string]bool   // artifact ids already written to outDir
	names   map[string]string // artifact id → name, of the artifacts seen
	pending []string          // uploads named in the next message
	lines   <-chan lineOrErr
	intr    <-chan os.Signal
	stream  bool // follow turns through the event stream (false: polling only)
}

// unreachable adds how to get an API running to an error that says
// nothing answered at the base URL.
func (s *session) unreachable(err error) error {
	var ue *url.Error
	var ae *APIError
	if errors.As(err, &ae) || !errors.As(err, &ue) || errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("%w\nno clientagent API answers at %s: start the local stack with `make run` in the repository (or `clientagent dev`), or point --url (CLIENTAGENT_URL) at a running API", err, s.api.BaseURL)
}

type lineOrErr struct {
	line string
	err  error
}

// readLines reads in on its own goroutine so that a blocked terminal read
// never keeps Run from seeing ctx end.
func readLines(in io.Reader) <-chan lineOrErr {
	ch := make(chan lineOrErr)
	go func() {
		defer close(ch)
		if in == nil {
			return
		}
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			ch <- lineOrErr{line: sc.Text()}
		}
		if err := sc.Err(); err != nil {
			ch <- lineOrErr{err: fmt.Errorf("read input: %w", err)}
		}
	}()
	return ch
}

func (s *session) readLine(ctx context.Context) (string, error) {
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-s.intr:
		return "", errInterrupted
	case l, ok := <-s.lines:
		if !ok {
			s.printf("\n")
			return "", errQuit
		}
		return l.line, l.err
	}
}

func (s *session) printf(format string, args ...any) {
	fmt.Fprintf(s.out, format, args...)
}

// listWorkflows prints the catalog's workflows with their inputs.
func (s *session) listWorkflows(ctx context.Context) error {
	wfs, err := s.api.Workflows(ctx)
	if err != nil {
		return fmt.Errorf("list workflows: %w", err)
	}
	if len(wfs) == 0 {
		s.printf("no workflows\n")
	}
	for _, w := range wfs {
		s.printf("%s — %s: %s\n", w.ID, w.Name, w.Description)
		for _, in := range w.Inputs {
			s.printf("    %s (%s) %s\n", in.Path, in.Type, in.Description)
		}
	}
	return nil
}

func (s *session) handle(ctx context.Context, line string) error {
	switch {
	case line == "":
		return nil
	case line == "/quit" || line == "/exit":
		return errQuit
	case line == "/new":
		return s.newConversation(ctx)
	case line == "/help":
		s.printf("/new starts a conversation, /upload PATH attaches a file to the next message,\n" +
			"/workflows lists the workflows, /workflow ID [text] starts one (its missing inputs are asked), /quit ends.\n")
		return nil
	case strings.HasPrefix(line, "/upload "):
		return s.upload(ctx, strings.TrimSpace(strings.TrimPrefix(line, "/upload ")))
	case line == "/workflows":
		return s.listWorkflows(ctx)
	case line == "/workflow" || strings.HasPrefix(line, "/workflow "):
		// The API reads the command itself (docs/design.md §3.4): sent as it is.
	case strings.HasPrefix(line, "/"):
		s.printf("unknown command %s (try /help)\n", strings.Fields(line)[0])
		return nil
	}
	files := s.pending
	s.pending = nil
	tid, err := s.api.SendMessage(ctx, s.cid, line, files)
	if err != nil {
		return fmt.Errorf("send message: %w", err)
	}
	return s.follow(ctx, tid)
}

func (s *session) newConversation(ctx context.Context) error {
	cid, err := s.api.CreateConversation(ctx)
	if err != nil {
		return fmt.Errorf("create conversation: %w", err)
	}
	s.cid, s.pending = cid, nil
	s.printf("conversation %s\n", cid)
	return nil
}

func (s *session) upload(ctx context.Context, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("upload: %w", err)
	}
	defer f.Close()
	typ := mime.TypeByExtension(filepath.Ext(path))
	if typ == "" {
		typ = "application/octet-stream"
	}
	a, err := s.api.UploadArtifact(ctx, s.cid, filepath.Base(path), typ, f)
	if err != nil {
		return fmt.Errorf("upload %s: %w", path, err)
	}
	s.pending = append(s.pending, a.ID)
	s.names[a.ID] = a.Name
	s.printf("attached %s to your next message\n", a.Name)
	return nil
}

// Waits while the service answers 503 (its store is unavailable or full):
// the server's Retry-After, else unavailableWait, within [poll, maxRetryWait];
// after maxUnavailable of 503s in a row following a turn gives up.
const (
	unavailableWait = 2 * time.Second
	maxRetryWait    = time.Minute
	maxUnavailable  = 2 * time.Minute
)

// follow shows a turn until it ends, asking the user whenever it waits for
// input or approval: from the turn's event stream, or by polling when the
// stream is unavailable. Ctrl-C meanwhile stops the turn.
func (s *session) follow(ctx context.Context, tid string) error {
	f := &following{tid: tid, printed: map[string]string{}}
	err := errNoStream
	if s.stream {
		err = s.followStream(ctx, f)
	}
	if errors.Is(err, errNoStream) {
		err = s.pollTurn(ctx, f)
	}
	switch {
	case errors.Is(err, errTurnShown):
		return nil
	case errors.Is(err, errInterrupted):
		return s.stopTurn(ctx, tid)
	}
	return err
}

// stopTurn stops the running turn after Ctrl-C, as a REPL stops the
// command it runs, and returns to the prompt.
func (s *session) stopTurn(ctx context.Context, tid string) error {
	t, err := s.api.CancelTurn(ctx, s.cid, tid)
	var ae *APIError
	switch {
	case err == nil:
		s.printf("\nstopped: %s\n", firstNonEmpty(t.Reply, "the turn was cancelled"))
	case errors.As(err, &ae) && ae.Status == http.StatusConflict:
		s.printf("\nthe turn had already ended (%s)\n", ae.Message)
	default:
		s.printf("\ncould not stop the turn: %v\n", err)
	}
	return nil
}

// following is what has been shown of one turn, shared by the stream and
// the polling that may take over from it.
type following struct {
	tid     string
	printed map[string]string // step key → last printed status
	llmCall int               // the LLM call whose text is being printed
	text    string            // that call's text so far
	lastID  string            // the last event's id, to resume the stream
}

// errNoStream says the event stream is not available: the caller polls.
var errNoStream = errors.New("event stream unavailable")

// errTurnShown ends following a turn: its end is printed.
var errTurnShown = errors.New("turn shown")

// followStream follows a turn through its events (GET …/events?turn=),
// reconnecting after the last event when the server ends the stream. It
// returns errNoStream when the stream cannot be had (never connected, or
// broken twice in a row without an event between), so the caller polls:
// the turn's read is the source of truth either way.
func (s *session) followStream(ctx context.Context, f *following) error {
	broken := 0 // streams in a row that broke before an event
	for {
		got, err := s.readStream(ctx, f)
		switch {
		case err == nil:
			// The server ended the stream (it does after a few minutes):
			// resume after the last event.
			broken = 0
			continue
		case !errors.Is(err, errStreamBroken):
			return err
		case got > 0:
			broken = 0
		}
		if broken++; broken >= 2 || f.lastID == "" {
			return errNoStream
		}
	}
}

// errStreamBroken is a stream that could not be opened or read.
var errStreamBroken = errors.New("event stream broken")

// readStream shows the events of one connection of the stream. It returns
// how many events it got, and nil when the server ended the stream,
// errTurnShown once the turn's end is printed, an error wrapping
// errStreamBroken when the stream failed, or why following must stop.
func (s *session) readStream(ctx context.Context, f *following) (got int, err error) {
	events := make(chan Event)
	done := make(chan error, 1)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		done <- s.api.Events(sctx, s.cid, f.tid, f.lastID, func(ev Event) error {
			select {
			case events <- ev:
				return nil
			case <-sctx.Done():
				return sctx.Err()
			}
		})
	}()
	for {
		select {
		case <-ctx.Done():
			return got, ctx.Err()
		case <-s.intr:
			return got, errInterrupted
		case ev := <-events:
			got++
			if ev.ID != "" {
				f.lastID = ev.ID
			}
			end, err := s.onEvent(ctx, f, ev)
			if err != nil {
				return got, err
			}
			if end {
				return got, errTurnShown
			}
		case err := <-done:
			if err == nil {
				return got, nil
			}
			if ctx.Err() != nil {
				return got, ctx.Err()
			}
			return got, fmt.Errorf("%w: %w", errStreamBroken, err)
		}
	}
}

// onEvent shows one event of the turn. end is true once the turn has ended
// and its final state is printed.
func (s *session) onEvent(ctx context.Context, f *following, ev Event) (end bool, err error) {
	if ev.TurnID != "" && ev.TurnID != f.tid {
		return false, nil
	}
	switch ev.Type {
	case "step.started":
		if ev.Tool != "llm" {
			s.printStep(f, Step{Tool: ev.Tool, CallID: ev.CallID, Status: "running"}, 0)
		}
	case "step.ended":
		if ev.Tool != "llm" {
			s.printStep(f, Step{Tool: ev.Tool, CallID: ev.CallID, Status: ev.Status}, 0)
		}
	case "llm.delta":
		s.printDelta(f, ev)
	case "form", "approval":
		return false, s.answerWaiting(ctx, f)
	case "turn.ended":
		t, err := s.api.GetTurn(ctx, s.cid, f.tid)
		if err != nil {
			return false, errNoStream // the polling reads it (and waits out a 503)
		}
		if t.Status == StatusRunning || t.Status == StatusAwaitingInput || t.Status == StatusAwaitingApproval {
			return false, errNoStream // the record is being written: poll until it shows the end
		}
		s.finish(ctx, f, t)
		return true, nil
	}
	return false, nil
}

// printDelta prints a chunk of the model's answer as it streams in. A new
// LLM call starts a new paragraph; an offset before the text printed means
// a retried call restarted, which is marked.
func (s *session) printDelta(f *following, ev Event) {
	if ev.LLMCall != f.llmCall {
		if f.text != "" && !strings.HasSuffix(f.text, "\n") {
			s.printf("\n")
		}
		f.llmCall, f.text = ev.LLMCall, ""
		s.printf("\n")
	}
	if ev.Offset < len(f.text) {
		s.printf("\n↺ ")
		f.text = f.text[:ev.Offset]
		s.printf("%s", f.text)
	}
	f.text += ev.Text
	s.printf("%s", ev.Text)
}

// answerWaiting reads the turn and asks the user what it waits for; it
// asks again while an answer leaves it waiting for something new (a stale
// approval's replacement).
func (s *session) answerWaiting(ctx context.Context, f *following) error {
	for range 5 {
		t, err := s.api.GetTurn(ctx, s.cid, f.tid)
		if err != nil {
			return errNoStream
		}
		switch t.Status {
		case StatusAwaitingInput:
			err = s.answerForm(ctx, f.tid, t.Form)
		case StatusAwaitingApproval:
			err = s.answerApproval(ctx, f.tid, t.Approval)
		default:
			return nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// finish prints a turn's end: the reply (unless it was streamed as it is)
// with the count of LLM calls, or why it did not succeed; then it saves the
// artifacts.
func (s *session) finish(ctx context.Context, f *following, t Turn) {
	for _, a := range t.Artifacts {
		s.names[a.ID] = a.Name
	}
	s.printSteps(f, t.Steps)
	switch t.Status {
	case StatusSucceeded:
		if f.text != "" && strings.TrimSpace(f.text) == strings.TrimSpace(t.Reply) {
			if !strings.HasSuffix(f.text, "\n") {
				s.printf("\n")
			}
		} else {
			s.printf("\n%s\n", s.named(t.Reply))
		}
	case StatusBlocked:
		s.printf("\n⛔ blocked by policy: %s\n", firstNonEmpty(t.Reply, "no reason given"))
	case StatusCancelled:
		s.printf("\n■ turn stopped: %s\n", firstNonEmpty(t.Reply, "cancelled"))
	default:
		s.printf("\n✗ turn %s: %s\n", t.Status, firstNonEmpty(t.Reply, "no details"))
	}
	s.printf("(%s)\n", usage(t))
	s.saveArtifacts(ctx, t.Artifacts)
}

// usage is what a turn spent: "1 LLM call, 1,234 tokens, $0.0012" (the
// tokens and cost when there are any).
func usage(t Turn) string {
	parts := []string{llmCalls(t.LLMCalls)}
	if t.Tokens > 0 {
		parts = append(parts, thousands(t.Tokens)+" tokens")
	}
	if t.CostUSD > 0 {
		parts = append(parts, fmt.Sprintf("$%.4f", t.CostUSD))
	}
	return strings.Join(parts, ", ")
}

// thousands writes n with commas between thousands.
func thousands(n int) string {
	d := strconv.Itoa(n)
	for i := len(d) - 3; i > 0; i -= 3 {
		d = d[:i] + "," + d[i:]
	}
	return d
}

// artifactIDs are the ids the platform gives artifacts.
var artifactIDs = regexp.MustCompile(`\bart_[A-Za-z0-9_-]+`)

// named writes the artifacts' ids in text as their names (the id stays
// with an artifact this session has not seen).
func (s *session) named(text string) string {
	return artifactIDs.ReplaceAllStringFunc(text, func(id string) string {
		if n, ok := s.names[id]; ok {
			return n
		}
		return id
	})
}

// llmCalls is "1 LLM call" or "N LLM calls".
func llmCalls(n int) string {
	if n == 1 {
		return "1 LLM call"
	}
	return fmt.Sprintf("%d LLM calls", n)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// pollTurn polls a turn until it ends, printing steps as they appear and
// asking the user whenever the turn waits for input or approval. While the
// service answers 503 it says so once and polls only every Retry-After.
func (s *session) pollTurn(ctx context.Context, f *following) error {
	tid := f.tid
	failures := 0
	var down time.Time // when the current run of 503s began
	for {
		t, err := s.api.GetTurn(ctx, s.cid, tid)
		if ae := Unavailable(err); ae != nil && ctx.Err() == nil {
			wait := ae.RetryAfter
			if wait <= 0 {
				wait = unavailableWait
			}
			wait = min(max(wait, s.poll), maxRetryWait)
			if down.IsZero() {
				down = time.Now()
				s.printf("the service is unavailable, retrying in %s (%s)\n", wait, ae.Code)
			} else if time.Since(down) > maxUnavailable {
				return fmt.Errorf("read turn %s: the service has been unavailable for %s: %w", tid, time.Since(down).Round(time.Second), err)
			}
			if err := s.sleep(ctx, wait); err != nil {
				return err
			}
			continue
		}
		if err == nil && !down.IsZero() {
			down = time.Time{}
			s.printf("the service is back\n")
		}
		if err != nil {
			if ctx.Err() != nil || IsClientError(err) {
				return fmt.Errorf("read turn %s: %w", tid, err)
			}
			// Transient (network, 5xx): retry a few times before giving up.
			if failures++; failures > 3 {
				return fmt.Errorf("read turn %s: %w", tid, err)
			}
			if err := s.sleep(ctx, s.poll*time.Duration(failures)); err != nil {
				return err
			}
			continue
		}
		failures = 0
		s.printSteps(f, t.Steps)
		switch t.Status {
		case StatusAwaitingInput:
			if err := s.answerForm(ctx, tid, t.Form); err != nil {
				return err
			}
			continue
		case StatusAwaitingApproval:
			if err := s.answerApproval(ctx, tid, t.Approval); err != nil {
				return err
			}
			continue
		case StatusSucceeded, StatusFailed, StatusExpired, StatusSuperseded, StatusCancelled, StatusBlocked:
			s.finish(ctx, f, t)
			return nil
		}
		if err := s.sleep(ctx, s.poll); err != nil {
			return err
		}
	}
}

var stepIcons = map[string]string{
	"succeeded":    "✓",
	"failed":       "✗",
	"rejected":     "⊘",
	"not_executed": "–",
	"answered":     "✎",
}

// printSteps prints each tool step when it starts and when it ends. LLM
// calls are left out of the lines; their count comes with the reply.
func (s *session) printSteps(f *following, steps []Step) {
	for i, st := range steps {
		if st.Tool != "llm" {
			s.printStep(f, st, i)
		}
	}
}

// printStep prints a step's line unless that status was printed already
// (i keys a step without a call id).
func (s *session) printStep(f *following, st Step, i int) {
	key := st.CallID
	if key == "" {
		key = strconv.Itoa(i)
	}
	if f.printed[key] == st.Status || (st.Status == "running" && f.printed[key] != "") {
		return
	}
	f.printed[key] = st.Status
	if f.text != "" && !strings.HasSuffix(f.text, "\n") {
		// A step after streamed text starts on its own line.
		s.printf("\n")
		f.text += "\n"
	}
	if st.Status == "running" {
		s.printf("→ %s … running\n", st.Tool)
		return
	}
	icon := stepIcons[st.Status]
	if icon == "" {
		icon = "•"
	}
	s.printf("%s %s %s\n", icon, st.Tool, strings.ReplaceAll(st.Status, "_", " "))
}

// answerForm asks every field of every paused call, sends the answers and
// asks again, showing the server's message, while the server rejects them.
func (s *session) answerForm(ctx context.Context, tid string, form *Form) error {
	if form == nil || len(form.Calls) == 0 {
		return fmt.Errorf("turn %s waits for input but shows no form", tid)
	}
	for {
		answers := map[string]map[string]any{}
		for _, call := range form.Calls {
			s.printf("%s needs some input:\n", call.Tool)
			answers[call.CallID] = map[string]any{}
			for _, f := range call.Fields {
				v, ok, err := s.askField(ctx, f)
				if err != nil {
					return err
				}
				if ok {
					answers[call.CallID][f.Name] = v
				}
			}
		}
		_, err := s.api.SendInput(ctx, s.cid, tid, Input{Answers: answers})
		var ae *APIError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ae) && ae.Status == http.StatusConflict:
			s.printf("(%s)\n", ae.Message)
			return nil // the caller re-reads the turn and shows what happened
		case IsClientError(err):
			s.printf("server: %s — please answer again.\n", ae.Message)
		default:
			return fmt.Errorf("send answers: %w", err)
		}
	}
}

// askField asks one field until the answer parses; ok is false when an
// optional field was left empty.
func (s *session) askField(ctx context.Context, f FormField) (v any, ok bool, err error) {
	hint := f.Type
	if len(f.Enum) > 0 {
		hint += ", one of " + strings.Join(f.Enum, "|")
	}
	if f.Type == "boolean" {
		hint += ", y/n"
	}
	if f.Required {
		hint += ", required"
	}
	prompt := fmt.Sprintf("  %s (%s)", f.Name, hint)
	if f.Description != "" {
		prompt += " — " + f.Description
	}
	for {
		s.printf("%s: ", prompt)
		line, err := s.readLine(ctx)
		if err != nil {
			return nil, false, err
		}
		line = strings.TrimSpace(line)
		if line == "" {
			if !f.Required {
				return nil, false, nil
			}
			s.printf("  %s is required\n", f.Name)
			continue
		}
		v, err := parseField(f, line)
		if err != nil {
			s.printf("  %v\n", err)
			continue
		}
		return v, true, nil
	}
}

func parseField(f FormField, in string) (any, error) {
	switch f.Type {
	case "integer":
		n, err := strconv.ParseInt(in, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s must be a whole number", f.Name)
		}
		return n, nil
	case "number":
		x, err := strconv.ParseFloat(in, 64)
		if err != nil {
			return nil, fmt.Errorf("%s must be a number", f.Name)
		}
		return x, nil
	case "boolean":
		switch strings.ToLower(in) {
		case "y", "yes", "true", "1":
			return true, nil
		case "n", "no", "false", "0":
			return false, nil
		}
		return nil, fmt.Errorf("%s: answer y or n", f.Name)
	}
	if len(f.Enum) > 0 && !slices.Contains(f.Enum, in) {
		return nil, fmt.Errorf("%s must be one of %s", f.Name, strings.Join(f.Enum, ", "))
	}
	return in, nil
}

// staleApproval is what the user reads when the server refused an answer
// because the approval changed since it was shown (409 stale_approval).
const staleApproval = "The approval changed; please review it again."

// answerApproval shows the exact arguments of the batch and asks y/N/e;
// text after the answer ("n too expensive") becomes the note. e edits the
// calls' arguments and approves the edited batch. An answer the server
// refuses for its arguments is asked again; one to an approval that has
// changed (409 stale_approval) returns, and the caller reads the turn
// again and shows the new approval.
func (s *session) answerApproval(ctx context.Context, tid string, ap *Approval) error {
	if ap == nil || len(ap.Calls) == 0 {
		return fmt.Errorf("turn %s waits for approval but shows no calls", tid)
	}
	for {
		d, err := s.askApproval(ctx, ap)
		if err != nil {
			return err
		}
		_, err = s.api.SendInput(ctx, s.cid, tid, Input{Approval: &d})
		var ae *APIError
		switch {
		case err == nil:
			if d.Decision == "approve" {
				s.printf("approved\n")
			} else {
				s.printf("rejected\n")
			}
			return nil
		case errors.As(err, &ae) && ae.Code == "stale_approval":
			s.printf("%s\n", staleApproval)
			return nil
		case errors.As(err, &ae) && ae.Status == http.StatusConflict:
			s.printf("(%s)\n", ae.Message)
			return nil // the caller re-reads the turn and shows what happened
		case errors.As(err, &ae) && (ae.Code == "invalid_arguments" || ae.Code == "invalid_edit"):
			s.printf("server: %s — please answer again.\n", ae.Message)
		default:
			return fmt.Errorf("send approval: %w", err)
		}
	}
}

// askApproval prints the batch and reads one decision, with its edits when
// the answer is e.
func (s *session) askApproval(ctx context.Context, ap *Approval) (Decision, error) {
	for {
		for _, c := range ap.Calls {
			for i, st := range c.Steps {
				s.printf("  %s step %d %s: %s %s\n", c.Tool, i+1, st.Name, st.Skill, s.withNames(argsJSON(st.Arguments)))
			}
		}
		if len(ap.Calls) == 1 {
			s.printf("Approve %s %s? [y/N/e] ", ap.Calls[0].Tool, s.withNames(argsJSON(ap.Calls[0].Arguments)))
		} else {
			for _, c := range ap.Calls {
				s.printf("  %s %s\n", c.Tool, s.withNames(argsJSON(c.Arguments)))
			}
			s.printf("Approve these %d calls? [y/N/e] ", len(ap.Calls))
		}
		line, err := s.readLine(ctx)
		if err != nil {
			return Decision{}, err
		}
		word, note, _ := strings.Cut(strings.TrimSpace(line), " ")
		d := Decision{ID: ap.ID, Decision: "reject", Note: strings.TrimSpace(note)}
		switch strings.ToLower(word) {
		case "y", "yes":
			d.Decision = "approve"
		case "e", "edit":
			edits, err := s.editArguments(ctx, ap.Calls)
			if err != nil {
				return Decision{}, err
			}
			if len(edits) == 0 {
				// e is not y: approving unchanged arguments needs its own yes.
				s.printf("no arguments changed\n")
				continue
			}
			d.Decision, d.Arguments = "approve", edits
		}
		return d, nil
	}
}

// editArguments shows each call's arguments as one line of JSON and reads
// one replacement line per call (empty keeps them). It returns the changed
// calls' arguments by call id; a line that is not a JSON object is asked
// again.
func (s *session) editArguments(ctx context.Context, calls []ApprovalCall) (map[string]map[string]any, error) {
	edits := map[string]map[string]any{}
	for _, c := range calls {
		s.printf("  %s %s\n", c.Tool, compact(argsJSON(c.Arguments)))
		for {
			s.printf("  new arguments for %s (JSON object, empty keeps them): ", c.Tool)
			line, err := s.readLine(ctx)
			if err != nil {
				return nil, err
			}
			line = strings.TrimSpace(line)
			if line == "" {
				break
			}
			// Numbers stay as typed (json.Number), not rounded through float64.
			var obj map[string]any
			dec := json.NewDecoder(strings.NewReader(line))
			dec.UseNumber()
			if err := dec.Decode(&obj); err != nil || obj == nil || dec.More() {
				s.printf("  not a JSON object: %s\n", line)
				continue
			}
			if !sameJSON(line, argsJSON(c.Arguments)) {
				edits[c.CallID] = obj
			}
			break
		}
	}
	return edits, nil
}

// sameJSON reports whether the edit holds the same value as the shown
// arguments, so that retyping them with other spacing or key order is no
// edit.
func sameJSON(edit string, shown json.RawMessage) bool {
	var a, b any
	if json.Unmarshal([]byte(edit), &a) != nil || json.Unmarshal(shown, &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

// argsJSON is a call's arguments as JSON (nil for none).
func argsJSON(args map[string]any) json.RawMessage {
	if args == nil {
		return nil
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil
	}
	return b
}

// withNames is compact(raw), followed by the names of the artifacts it
// names by id: "{…"art_1"…} (art_1 is hello.svg)".
func (s *session) withNames(raw json.RawMessage) string {
	js := compact(raw)
	var named []string
	for _, id := range artifactIDs.FindAllString(js, -1) {
		if n, ok := s.names[id]; ok && !slices.Contains(named, id+" is "+n) {
			named = append(named, id+" is "+n)
		}
	}
	if len(named) == 0 {
		return js
	}
	return js + " (" + strings.Join(named, ", ") + ")"
}

// compact prints JSON on one line as a person reads it: the server's
// encoder escapes <, > and & (as \u003c …), which compact shows as the
// characters again, so a plan's "<artifact 1 of step 1>" reads as such.
func compact(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return unescapeHTML(b.String())
}

// unescapeHTML turns the \u003c, \u003e and \u0026 escapes of JSON text
// back into <, > and &; every other escape, and an escaped backslash
// followed by "u003c", stays as it is.
func unescapeHTML(js string) string {
	if !strings.Contains(js, `\u00`) {
		return js
	}
	var b strings.Builder
	for i := 0; i < len(js); i++ {
		if js[i] != '\\' || i+1 >= len(js) {
			b.WriteByte(js[i])
			continue
		}
		if js[i+1] == 'u' && i+6 <= len(js) {
			switch strings.ToLower(js[i+2 : i+6]) {
			case "003c":
				b.WriteByte('<')
				i += 5
				continue
			case "003e":
				b.WriteByte('>')
				i += 5
				continue
			case "0026":
				b.WriteByte('&')
				i += 5
				continue
			}
		}
		b.WriteString(js[i : i+2]) // any other escape, \\ included, kept whole
		i++
	}
	return b.String()
}

// saveArtifacts writes every artifact not saved before into outDir and
// prints its path; a failed download is reported and the rest go on.
func (s *session) saveArtifacts(ctx context.Context, arts []ArtifactRef) {
	for _, a := range arts {
		if s.saved[a.ID] {
			continue
		}
		path, err := s.saveArtifact(ctx, a)
		if err != nil {
			s.printf("could not save %s: %v\n", a.Name, err)
			continue
		}
		s.saved[a.ID] = true
		s.printf("saved %s (%s) to %s\n", a.Name, a.MimeType, path)
	}
}

func (s *session) saveArtifact(ctx context.Context, a ArtifactRef) (string, error) {
	if err := os.MkdirAll(s.outDir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", s.outDir, err)
	}
	f, path, err := createUnique(s.outDir, safeName(a.Name, a.ID))
	if err != nil {
		return "", err
	}
	if err := s.api.DownloadArtifact(ctx, s.cid, a.ID, f); err != nil {
		f.Close()
		os.Remove(path)
		return "", fmt.Errorf("download artifact %s: %w", a.ID, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return path, nil
}

// safeName keeps an artifact's name a plain file name: the server's name is
// data, and must not steer the write outside outDir.
func safeName(name, id string) string {
	name = filepath.Base(strings.ReplaceAll(name, "\\", "/"))
	if name == "." || name == "/" || name == ".." || strings.TrimSpace(name) == "" {
		name = id
	}
	if name == "" {
		name = "artifact"
	}
	return name
}

// createUnique creates dir/name, or dir/base-2.ext, dir/base-3.ext … when
// the name is taken, so an earlier file is never overwritten.
func createUnique(dir, name string) (*os.File, string, error) {
	ext := filepath.Ext(name)
	base := strings.TrimSuffix(name, ext)
	for i := 1; i < 10000; i++ {
		cand := name
		if i > 1 {
			cand = fmt.Sprintf("%s-%d%s", base, i, ext)
		}
		path := filepath.Join(dir, cand)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			return f, path, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, "", fmt.Errorf("create %s: %w", path, err)
		}
	}
	return nil, "", fmt.Errorf("no free file name for %s in %s", name, dir)
}

// sleep waits d; it returns early with ctx's error, or errInterrupted on Ctrl-C.
func (s *session) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.intr:
		return errInterrupted
	case <-t.C:
		return nil
	}
}
