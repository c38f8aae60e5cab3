package a2aserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/clientagent/clientagent/pkg/wire"
)

// apiError is an error answer of the API: its status and the
// {"error": {"code", "message"}} body.
type apiError struct {
	status        int
	code, message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("API %d %s: %s", e.status, e.code, e.message)
}

// asA2A maps an API error onto the A2A error a caller can act on: a
// refused request (4xx) is invalid params with the API's own words, a
// missing turn or conversation is task-not-found; anything else is ours.
func (s *Server) asA2A(ctx context.Context, op string, err error) error {
	var ae *apiError
	if errors.As(err, &ae) {
		switch {
		case ae.status == http.StatusNotFound:
			return fmt.Errorf("%w: %s", a2a.ErrTaskNotFound, ae.message)
		case ae.status >= 400 && ae.status < 500:
			return fmt.Errorf("%w: %s (%s)", a2a.ErrInvalidParams, ae.message, ae.code)
		}
	}
	return s.internal(ctx, op, err)
}

// do sends one request to the API in process, as the caller, and decodes
// a 2xx JSON answer into out (when not nil).
func (s *Server) do(ctx context.Context, method, path string, body io.Reader, contentType string, out any) error {
	req, err := s.request(ctx, method, path, body)
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := &recorder{header: http.Header{}}
	s.API.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.status >= 300 {
		return decodeError(rec.status, rec.body.Bytes())
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(rec.body.Bytes(), out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}

func (s *Server) request(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	c, ok := callerFrom(ctx)
	if !ok {
		return nil, errors.New("no authenticated caller in the request context")
	}
	// The request keeps ctx: on Lambda the authorizer's claims travel in
	// it (lambdahttp), and the API reads the caller from them.
	req, err := http.NewRequestWithContext(ctx, method, "http://clientagent.internal"+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", c.authorization)
	return req, nil
}

func decodeError(status int, body []byte) error {
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &env)
	if env.Error.Message == "" {
		env.Error.Message = http.StatusText(status)
	}
	return &apiError{status: status, code: env.Error.Code, message: env.Error.Message}
}

func jsonBody(v any) io.Reader {
	b, _ := json.Marshal(v)
	return bytes.NewReader(b)
}

// recorder is the http.ResponseWriter of an in-process request.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}

// taskRef names a turn: a task id is "<conversation id>.<turn id>", so a
// task needs no store of its own and tasks/get is the turn's GET.
type taskRef struct{ cid, tid string }

func (r taskRef) id() a2a.TaskID { return a2a.TaskID(r.cid + "." + r.tid) }

func (r taskRef) path() string {
	return "/v1/conversations/" + url.PathEscape(r.cid) + "/turns/" + url.PathEscape(r.tid)
}

// parseTaskID reads a task id; one that is not ours is not found.
func parseTaskID(id a2a.TaskID) (taskRef, error) {
	cid, tid, ok := strings.Cut(string(id), ".")
	if !ok || !plainID(cid) || !plainID(tid) {
		return taskRef{}, fmt.Errorf("%w: %q is not a task of this agent", a2a.ErrTaskNotFound, id)
	}
	return taskRef{cid: cid, tid: tid}, nil
}

// plainID reports whether s is a non-empty id of letters, digits, _ and -.
func plainID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func (s *Server) getTurn(ctx context.Context, ref taskRef) (wire.Turn, error) {
	var v wire.Turn
	if err := s.do(ctx, http.MethodGet, ref.path(), nil, "", &v); err != nil {
		return wire.Turn{}, s.asA2A(ctx, "get turn", err)
	}
	return v, nil
}

func (s *Server) cancel(ctx context.Context, ref taskRef) (wire.Turn, error) {
	var v wire.Turn
	err := s.do(ctx, http.MethodPost, ref.path()+"/cancel", nil, "", &v)
	var ae *apiError
	if errors.As(err, &ae) && ae.status == http.StatusConflict {
		return wire.Turn{}, fmt.Errorf("%w: %s", a2a.ErrTaskNotCancelable, ae.message)
	}
	if err != nil {
		return wire.Turn{}, s.asA2A(ctx, "cancel turn", err)
	}
	return v, nil
}

// artifactLink is a URL of artifact aid that works without credentials for
// a few minutes (a presigned S3 URL on AWS, a signed link locally), and
// the API's own URL of it, which works with the caller's token.
func (s *Server) artifactLink(ctx context.Context, cid, aid string) (link, api string, err error) {
	path := "/v1/conversations/" + url.PathEscape(cid) + "/artifacts/" + url.PathEscape(aid)
	var out struct {
		URL string `json:"url"`
	}
	if err := s.do(ctx, http.MethodGet, path+"?redirect=false", nil, "", &out); err != nil {
		return "", "", err
	}
	c, _ := callerFrom(ctx)
	return out.URL, c.base + path, nil
}

// liveEvent is one event of GET …/events.
type liveEvent struct {
	id string
	wire.Event
}

// errNoStream is the events route's refusal to stream (no event log in
// this deployment): the turn is then polled.
var errNoStream = errors.New("the API has no event stream")

// events reads the turn's events (GET …/events?turn=<tid>) after the
// event id after (empty: from the turn's start), calling on for each
// until on returns false, the turn ends, or the stream ends (EventsFor).
// It returns the last event id read.
func (s *Server) events(ctx context.Context, ref taskRef, after string, on func(liveEvent) bool) (string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := url.Values{"turn": {ref.tid}}
	if after != "" {
		q.Set("last_event_id", after)
	}
	path := "/v1/conversations/" + url.PathEscape(ref.cid) + "/events?" + q.Encode()
	req, err := s.request(ctx, http.MethodGet, path, nil)
	if err != nil {
		return after, err
	}
	req.Header.Set("Accept", "text/event-stream")
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, status: make(chan int, 1)}
	go func() {
		s.API.ServeHTTP(w, req)
		w.WriteHeader(http.StatusOK)
		pw.Close()
	}()
	defer pr.Close() // a handler still writing gets an error and ends with ctx
	status := <-w.status
	if status != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(pr, 64<<10))
		err := decodeError(status, body)
		var ae *apiError
		if errors.As(err, &ae) && ae.status == http.StatusNotImplemented {
			return after, errNoStream
		}
		return after, err
	}
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	var ev liveEvent
	var data []byte
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(data) > 0 {
				if json.Unmarshal(data, &ev.Event) == nil {
					after = ev.id
					if !on(ev) {
						return after, nil
					}
				}
			}
			ev, data = liveEvent{}, nil
		case strings.HasPrefix(line, "id:"):
			ev.id = strings.TrimSpace(line[3:])
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimSpace(line[5:])...)
		}
	}
	return after, ctx.Err()
}

// pipeWriter is the http.ResponseWriter of an in-process event stream.
type pipeWriter struct {
	header http.Header
	pw     *io.PipeWriter
	status chan int
	wrote  bool
}

func (w *pipeWriter) Header() http.Header { return w.header }
func (w *pipeWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		w.status <- code
	}
}
func (w *pipeWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(b)
}
func (w *pipeWriter) Flush() {}

// settled reports whether a turn waits for the caller or has ended.
func settled(v wire.Turn) bool { return v.Status != wire.StatusRunning && v.Status != "" }

// follow follows turn ref until it settles, MaxWait passes or ctx ends,
// passing its live events to on (nil: none), and returns its last view.
// since is an event id to start after (empty: the turn's start). Without
// an event stream it polls the turn.
func (s *Server) follow(ctx context.Context, ref taskRef, since string, on func(liveEvent)) (wire.Turn, error) {
	wctx, cancel := context.WithTimeout(ctx, s.maxWait())
	defer cancel()
	v, err := s.getTurn(wctx, ref)
	if err != nil || settled(v) {
		return v, err
	}
	after := since
	poll := false
	for wctx.Err() == nil {
		if !poll {
			after, err = s.events(wctx, ref, after, func(ev liveEvent) bool {
				if on != nil {
					on(ev)
				}
				switch ev.Type {
				case wire.EventForm, wire.EventApproval, wire.EventTurnEnded:
					// The record is saved before these are told.
					if nv, err := s.getTurn(wctx, ref); err == nil {
						v = nv
					}
					return !settled(v)
				}
				return true
			})
			if errors.Is(err, errNoStream) {
				poll = true
			} else if err != nil && wctx.Err() == nil {
				return v, s.asA2A(ctx, "follow turn", err)
			}
		} else {
			select {
			case <-wctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
		if settled(v) {
			return v, nil
		}
		if wctx.Err() != nil {
			break
		}
		if v, err = s.getTurn(wctx, ref); err != nil || settled(v) {
			return v, err
		}
	}
	if ctx.Err() != nil {
		return v, ctx.Err()
	}
	// MaxWait passed: the turn as it is now, still working.
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer rcancel()
	return s.getTurn(rctx, ref)
}

// eventIDAt is an event id just before t, for following a turn from the
// moment it was answered (its earlier events are not told again).
func eventIDAt(t time.Time) string {
	return fmt.Sprintf("%d-0", t.Add(-time.Second).UnixMilli())
}
