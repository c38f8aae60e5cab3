package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/clientagent/clientagent/pkg/record"
)

// userEvent appends one event to user's own log (record.UserLog): the
// conversation list's changes, which GET /v1/events streams. The log is a
// convenience for live pages, so a failed write is logged, not returned.
func (s *Server) userEvent(ctx context.Context, user, typ, cid string, data map[string]any) {
	if s.Events == nil {
		return
	}
	d := map[string]any{"conversation_id": cid}
	for k, v := range data {
		d[k] = v
	}
	ev := record.Event{Type: typ, At: s.now(), Data: d}
	if tid, ok := d["turn_id"].(string); ok {
		ev.TurnID = tid
		delete(d, "turn_id")
	}
	if err := s.Events.Emit(context.WithoutCancel(ctx), record.UserLog(user), ev); err != nil {
		s.log().WarnContext(ctx, "user event not written", "type", typ, "conversation", cid, "error", err.Error())
	} else if s.Live != nil {
		s.Live.Publish(ctx, record.UserLog(user), ev)
	}
}

// getUserEvents streams the user's own events as Server-Sent Events
// (docs/api/openapi.yaml GET /v1/events): conversation.created, .renamed,
// .deleted and .status, from every client. It resumes after Last-Event-ID
// (header, or last_event_id in the query); without one it starts now.
// timeout=<seconds> ends it sooner than EventsFor.
func (s *Server) getUserEvents(w http.ResponseWriter, r *http.Request, user string) error {
	if s.Events == nil {
		return errorf(http.StatusNotImplemented, "not_implemented", "this deployment has no event stream; poll GET /v1/conversations")
	}
	after, err := lastEventID(r)
	if err != nil {
		return err
	}
	if after == "" {
		after = strconv.FormatInt(s.now().Add(-time.Second).UnixMilli(), 10) + "-0"
	}
	lasts, flusher, release, err := s.openStream(w, r, user, "GET /v1/conversations")
	if err != nil {
		return err
	}
	defer release()

	log := record.UserLog(user)
	deadline := time.Now().Add(lasts)
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	defer cancel()
	for {
		wait := min(heartbeat, time.Until(deadline))
		if wait <= 0 {
			return nil
		}
		evs, err := s.Events.Events(ctx, log, after, 200, wait)
		if err != nil {
			if ctx.Err() == nil {
				s.log().WarnContext(ctx, "user event stream ended", "error", err.Error())
			}
			return nil
		}
		if len(evs) == 0 {
			if _, err := fmt.Fprint(w, ": heartbeat\n\n"); err != nil {
				return nil
			}
			flusher.Flush()
			continue
		}
		for _, e := range evs {
			after = e.ID
			b, err := json.Marshal(e)
			if err != nil {
				continue
			}
			if _, err := fmt.Fprintf(w, "id: %s\nevent: %s\ndata: %s\n\n", e.ID, e.Type, b); err != nil {
				return nil
			}
		}
		flusher.Flush()
	}
}
