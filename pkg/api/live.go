package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/turn"
	"github.com/clientagent/clientagent/pkg/turnview"
)

// Cancels ends a turn at the user's request; turn.Handlers implements it.
type Cancels interface {
	Cancel(ctx context.Context, r turn.Ref, user string) (*record.Conversation, *record.Turn, error)
}

// Event stream bounds (GET …/events): a heartbeat comment at least every
// heartbeat, and the stream ends after EventsFor (the client reconnects
// with Last-Event-ID).
const (
	heartbeat        = 15 * time.Second
	DefaultEventsFor = 5 * time.Minute
)

// Streams hands out each user's event-stream slots (valkey.Store): a cap
// on the streams one user holds open at once, across every process that
// serves them.
type Streams interface {
	AcquireStream(ctx context.Context, user, id string, until time.Time, max int) (bool, error)
	ReleaseStream(ctx context.Context, user, id string) error
}

// DefaultMaxStreams is Server.MaxStreams's default: a few tabs of one
// user, each with its conversation's stream and the list's (GET /v1/events).
const DefaultMaxStreams = 10

// streamsRetryAfter is the Retry-After of a 429 past the cap: a closed
// tab's stream gives its slot back at once, a lost one at its end.
const streamsRetryAfter = 10 * time.Second

// getEvents streams the conversation's events as Server-Sent Events
// (issue 15, docs/api/openapi.yaml): each event with its log id, type and JSON data. It
// resumes after Last-Event-ID (header, or last_event_id in the query);
// without one it starts with the retained events of the turns still
// running or waiting, so a page opened mid-turn catches up. turn=<tid>
// keeps one turn's events and ends after its turn.ended; timeout=<seconds>
// ends the stream sooner than EventsFor.
func (s *Server) getEvents(w http.ResponseWriter, r *http.Request, user string) error {
	if s.Events == nil {
		return errorf(http.StatusNotImplemented, "not_implemented", "this deployment has no event stream; poll GET …/turns/{tid}")
	}
	ctx := r.Context()
	q := r.URL.Query()
	only := q.Get("turn")
	// The stream needs the conversation's owner and its turns (where the
	// live events start), not its catalog.
	conv, _, err := s.step(ctx, user, r.PathValue("cid"), record.Query{TurnID: only, Artifacts: record.NoCatalog})
	if err != nil {
		return err
	}
	if only != "" {
		if _, ok := conv.Turn(only); !ok {
			return errorf(http.StatusNotFound, "not_found", "no such turn")
		}
	}
	after, err := lastEventID(r)
	if err != nil {
		return err
	}
	if after == "" {
		after = s.startOfLive(conv, only)
	}
	lasts, flusher, release, err := s.openStream(w, r, user, "GET …/turns/{tid}")
	if err != nil {
		return err
	}
	defer release()

	deadline := time.Now().Add(lasts)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	batch := s.LiveBatch
	if batch <= 0 {
		batch = DefaultLiveBatch
	}
	var flushed time.Time // when the events written last went out
	held := false         // events written since, not yet flushed
	flush := func() {
		flusher.Flush()
		flushed, held = time.Now(), false
	}
	for {
		wait := min(heartbeat, time.Until(deadline))
		if held {
			// Events written within a batch of the last flush wait for
			// the batch's end, collecting the ones that follow them.
			if wait = min(wait, time.Until(flushed.Add(batch))); wait <= 0 {
				flush()
				continue
			}
		}
		if wait <= 0 {
			return nil
		}
		evs, err := s.Events.Events(ctx, conv.Meta.ID, after, 200, wait)
		if err != nil {
			if held {
				flush()
			}
			if ctx.Err() == nil {
				s.log().WarnContext(ctx, "event stream ended", "conversation", conv.Meta.ID, "error", err.Error())
			}
			return nil // the client reconnects after its last id
		}
		if len(evs) == 0 {
			if held {
				flush() // the batch's end
				continue
			}
			if _, err := fmt.Fprint(w, ": heartbeat\n\n"); err != nil {
				return nil
			}
			flush()
			continue
		}
		ended, last := false, false
		for _, e := range evs {
			after = e.ID
			if only != "" && e.TurnID != only {
				continue
			}
			b := []byte(e.Raw) // as the log keeps it: not decoded and encoded again
			if len(b) == 0 {
				if b, err = json.Marshal(e); err != nil {
					continue
				}
			}
			if _, err := fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", e.ID, e.Type, b); err != nil {
				return nil
			}
			held = true
			last = last || e.Type == record.EventTurnEnded
			ended = ended || only != "" && e.Type == record.EventTurnEnded
		}
		if held && (last || time.Since(flushed) >= batch) {
			flush()
		}
		if ended {
			return nil
		}
	}
}

// DefaultLiveBatch is how long an event stream may hold an event to send
// it with the ones that follow (Server.LiveBatch): the events of a step
// come a fraction of a millisecond apart, and each flush is a write and a
// wake-up of the page. An event that comes a batch or more after the last
// flush goes at once, as does a turn's end: a page gets an event at most
// this much later, and a turn.ended never later.
const DefaultLiveBatch = 2 * time.Millisecond

// startOfLive is where a stream without Last-Event-ID starts: a second
// before the oldest turn still running or waiting started (its
// turn.started is written after its start), else the log's end ("$" is
// not used: the log's ids come from the server's clock, and now is close
// enough for a conversation with nothing running).
func (s *Server) startOfLive(conv *record.Conversation, only string) string {
	var from time.Time
	for _, t := range conv.Turns {
		if t.Status.Final() || only != "" && t.ID != only {
			continue
		}
		if from.IsZero() || t.StartedAt.Before(from) {
			from = t.StartedAt
		}
	}
	if from.IsZero() {
		if only != "" {
			return "0" // an ended turn: its events, as far as they are kept
		}
		from = s.now()
	}
	return strconv.FormatInt(from.Add(-time.Second).UnixMilli(), 10) + "-0"
}

// validEventID reports whether id looks like a stream id (<ms>-<seq>).
func validEventID(id string) bool {
	ms, seq, ok := strings.Cut(id, "-")
	if !ok {
		return false
	}
	_, err1 := strconv.ParseUint(ms, 10, 64)
	_, err2 := strconv.ParseUint(seq, 10, 64)
	return err1 == nil && err2 == nil
}

// cancelTurn ends a running or waiting turn (issue 15): the record first
// (turn.Handlers.Cancel), then its execution is stopped. 409 when the turn
// has already ended, with what ended it.
func (s *Server) cancelTurn(w http.ResponseWriter, r *http.Request, user string) error {
	if s.Cancels == nil {
		return errorf(http.StatusNotImplemented, "not_implemented", "this deployment cannot cancel turns")
	}
	ctx := r.Context()
	conv, t, _, err := s.turn(r, user, false)
	if err != nil {
		return err
	}
	tid := t.ID
	if t.Status.Final() {
		return turnEnded(t)
	}
	conv, t, err = s.Cancels.Cancel(ctx, turn.Ref{ConversationID: conv.Meta.ID, TurnID: tid}, user)
	if errors.Is(err, turn.ErrTurnEnded) && t != nil {
		return turnEnded(t)
	}
	if err != nil {
		return fmt.Errorf("cancel turn %s: %w", tid, err)
	}
	if _, err := s.Executions.StopExecution(ctx, &sfn.StopExecutionInput{
		ExecutionArn: aws.String(s.executionARN(tid)), Error: aws.String("Cancelled"), Cause: aws.String("cancelled by the user"),
	}); err != nil {
		var gone *types.ExecutionDoesNotExist
		if !errors.As(err, &gone) {
			// The turn is cancelled in the record: a step still running
			// cannot write over it, and its execution ends at its next step.
			s.log().WarnContext(ctx, "stop cancelled execution", "turn", tid, "error", err.Error())
		}
	}
	writeJSON(w, http.StatusAccepted, turnview.New(conv, t, nil))
	return nil
}

// turnEnded is the 409 for a turn that has already ended, saying how.
func turnEnded(t *record.Turn) error {
	return errorf(http.StatusConflict, "turn_ended", fmt.Sprintf("the turn has already ended (%s); there is nothing to cancel", t.Status))
}

// renameConversation sets a conversation's title (PATCH {"title"}).
// maxTitle is the longest conversation title, in characters.
const maxTitle = 200

func (s *Server) renameConversation(w http.ResponseWriter, r *http.Request, user string) error {
	var body struct {
		Title *string `json:"title"`
	}
	if err := decode(r, 4096, &body); err != nil {
		return err
	}
	if body.Title == nil || strings.TrimSpace(*body.Title) == "" {
		return errorf(http.StatusBadRequest, "missing_title", "title is required")
	}
	if err := checkText("title", *body.Title); err != nil {
		return err
	}
	title := strings.Join(strings.Fields(*body.Title), " ")
	if n := len([]rune(title)); n > maxTitle {
		return errorf(http.StatusBadRequest, "title_too_long", fmt.Sprintf("title is %d characters; the limit is %d", n, maxTitle))
	}
	ctx := r.Context()
	conv, _, err := s.step(ctx, user, r.PathValue("cid"), record.Query{Artifacts: record.NoCatalog})
	if err != nil {
		return err
	}
	if err := s.Store.Rename(ctx, conv.Meta.ID, title); errors.Is(err, record.ErrNotFound) {
		return errNotFound
	} else if err != nil {
		return fmt.Errorf("rename: %w", err)
	}
	s.userEvent(ctx, user, record.EventConversationRenamed, conv.Meta.ID, map[string]any{"title": title})
	// Answer with the conversation as the list shows it.
	metas, err := s.Store.List(ctx, user)
	if err != nil {
		return fmt.Errorf("rename: %w", err)
	}
	for _, m := range metas {
		if m.ID == conv.Meta.ID {
			writeJSON(w, http.StatusOK, summary(m))
			return nil
		}
	}
	return errNotFound
}

// lastEventID is the id a stream resumes after: the Last-Event-ID header,
// or last_event_id in the query ("" for none); 400 for one no stream sent.
func lastEventID(r *http.Request) (string, error) {
	after := r.Header.Get("Last-Event-ID")
	if after == "" {
		after = r.URL.Query().Get("last_event_id")
	}
	if after != "" && !validEventID(after) {
		return "", errorf(http.StatusBadRequest, "invalid_event_id", "Last-Event-ID must be an id this stream sent (<ms>-<seq>)")
	}
	return after, nil
}

// openStream starts an event stream of user's (a conversation's or the
// user's own): how long it lasts (EventsFor, or the shorter
// timeout=<seconds>), one of the user's stream slots (past MaxStreams a
// 429), the headers and the client's retry. release gives the slot back;
// poll is what a client that cannot stream reads instead.
func (s *Server) openStream(w http.ResponseWriter, r *http.Request, user, poll string) (lasts time.Duration, flusher http.Flusher, release func(), err error) {
	ctx := r.Context()
	lasts = s.EventsFor
	if lasts <= 0 {
		lasts = DefaultEventsFor
	}
	if v := r.URL.Query().Get("timeout"); v != "" {
		secs, err := strconv.Atoi(v)
		if err != nil || secs < 1 {
			return 0, nil, nil, errorf(http.StatusBadRequest, "invalid_timeout", "timeout is a number of seconds, at least 1")
		}
		lasts = min(lasts, time.Duration(secs)*time.Second)
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		return 0, nil, nil, errorf(http.StatusNotImplemented, "not_implemented", "this server cannot stream; poll "+poll)
	}
	release = func() {}
	if s.Streams != nil {
		max := s.MaxStreams
		if max <= 0 {
			max = DefaultMaxStreams
		}
		id := newID("s_")
		// The slot outlives the stream's bound a little, so a process that
		// dies mid-stream frees it soon after.
		got, err := s.Streams.AcquireStream(ctx, user, id, s.now().Add(lasts+30*time.Second), max)
		if err != nil {
			return 0, nil, nil, err
		}
		if !got {
			return 0, nil, nil, &Error{Status: http.StatusTooManyRequests, Code: "too_many_streams", RetryAfter: streamsRetryAfter,
				Message: fmt.Sprintf("you have %d event streams open, the most one user may; close one (another tab) or retry later", max)}
		}
		release = func() {
			if err := s.Streams.ReleaseStream(context.WithoutCancel(ctx), user, id); err != nil {
				s.log().WarnContext(ctx, "release event stream", "error", err.Error())
			}
		}
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // proxies must not buffer the stream
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "retry: 2000\n\n")
	flusher.Flush()
	return lasts, flusher, release, nil
}
