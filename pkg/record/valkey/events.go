package valkey

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/record"
)

// eventsKey is the conversation's event log: a stream whose entries hold
// one event's JSON in field "e".
func eventsKey(cid string) string { return "conv:{" + cid + "}:events" }

// Event log bounds: the newest maxEvents entries (trimmed approximately,
// which is cheap), and the whole log goes eventTTL after its last write.
const (
	maxEvents = 2000
	eventTTL  = 24 * time.Hour
)

var _ record.EventLog = (*Store)(nil)

// emitLua defines emit(key, evs), which the scripts that write events
// share: it appends each event's JSON of evs to the log at key (XADD,
// trimmed to about maxEvents), keeps the log eventTTL, and PUBLISHes on
// key what the log gained (eventNews), so that a reader that has read up
// to where the log ended gets the new events from the publication itself,
// without reading the log again.
var emitLua = `
local function emit(key, evs)
  local last = redis.call('XREVRANGE', key, '+', '-', 'COUNT', 1)
  local news = {last[1] and last[1][1] or '0'}
  for _, e in ipairs(evs) do
    news[#news + 1] = redis.call('XADD', key, 'MAXLEN', '~', '` + strconv.Itoa(maxEvents) + `', '*', 'e', e)
    news[#news + 1] = e
  end
  redis.call('EXPIRE', key, ` + strconv.Itoa(int(eventTTL/time.Second)) + `)
  redis.call('PUBLISH', key, table.concat(news, '\n'))
end
`

// emitScript: KEYS events; ARGV the events' JSON.
var emitScript = lazyScript(emitLua, `emit(KEYS[1], ARGV)
return 1`)

// Emit appends evs to cid's event log in one script (emitLua).
func (s *Store) Emit(ctx context.Context, cid string, evs ...record.Event) error {
	if len(evs) == 0 {
		return nil
	}
	args, err := appendEventArgs(make([]any, 0, len(evs)), evs)
	if err != nil {
		return fmt.Errorf("emit %d events of %s: %w", len(evs), cid, err)
	}
	if err := emitScript().Run(ctx, s.rdb, []string{eventsKey(cid)}, args...).Err(); err != nil {
		return fmt.Errorf("emit %d events of %s: %w", len(evs), cid, classify(err))
	}
	return nil
}

// appendEventArgs appends the JSON of each of evs to a script's args.
func appendEventArgs(args []any, evs []record.Event) ([]any, error) {
	for _, e := range evs {
		b, err := e.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("event %s: %w", e.Type, err)
		}
		args = append(args, b)
	}
	return args, nil
}

// dropNews forgets what the publications on cid's log told this Store's
// readers, once events left the log.
func (s *Store) dropNews(cid string) {
	s.wakeups().drop(eventsKey(cid))
}

// wakeups is the Store's Pub/Sub fan-out for the readers that wait, made
// on first use.
func (s *Store) wakeups() *wakes {
	s.wakesOnce.Do(func() { s.wakes = newWakes(s.rdb) })
	return s.wakes
}

// quietWait is the shortest wait without a wake-up after which Events
// forgets what its channel told of the log (a quiet log is read again by
// the next call, whatever a publication might not have said). A shorter
// wait is a stream collecting the events that follow the ones it holds
// (pkg/api's batch of a step's events), a few milliseconds: it keeps what
// it knows, so its next call takes the next events from their
// publication, not from a read.
const quietWait = time.Second

// Events reads up to count events of cid's log after id after, waiting up
// to block for one. A reader that waits holds no connection: it subscribes
// to the log's wake-ups (one Pub/Sub connection per Store), reads, and
// reads again at each wake-up; it returns as soon as ctx ends.
func (s *Store) Events(ctx context.Context, cid, after string, count int, block time.Duration) ([]record.Event, error) {
	if after == "" {
		after = "0"
	}
	if block <= 0 {
		evs, _, err := s.readEvents(ctx, cid, after, count)
		return evs, err
	}
	h := s.wakeups()
	w, err := h.watch(ctx, eventsKey(cid))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("watch events of %s: %w", cid, classify(err))
	}
	w.cursor = after
	defer h.leave(w) // reads w.cursor as the call returns
	t := time.NewTimer(block)
	defer t.Stop()
	for {
		// Subscribed before this read, so an event written after it wakes
		// us. A read is skipped when the subscription knows the log ends
		// at after and has had no wake-up since it learnt that: a stream
		// that comes back for the next batch of events reads once per
		// batch, not a second time to find nothing new.
		if evs, ok := h.fromNews(w, after, count); ok {
			if len(evs) > 0 {
				w.cursor = evs[len(evs)-1].ID
				return evs, nil
			}
		} else if !h.endsAt(w, after) {
			gen := h.generation(w)
			evs, end, err := s.readEvents(ctx, cid, after, count)
			if err != nil {
				return nil, err
			}
			if end != "" {
				h.ended(w, end, gen)
			}
			if len(evs) > 0 {
				w.cursor = evs[len(evs)-1].ID
				return evs, nil
			}
		}
		select {
		case <-w.c:
		case <-t.C:
			if block >= quietWait {
				h.forget(w) // a quiet log is read again by the next call
			}
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// readEvents is one XREAD of cid's log after after, without blocking. end
// is where the log ends, when the read reached its end: the last id read,
// or after when there was nothing (and "" when count cut the read short).
func (s *Store) readEvents(ctx context.Context, cid, after string, count int) (out []record.Event, end string, err error) {
	res, err := s.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{eventsKey(cid), after}, Count: int64(count), Block: -1}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, after, nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("read events of %s: %w", cid, classify(err))
	}
	end = after
	for _, st := range res {
		if len(st.Messages) >= count {
			end = ""
		} else if len(st.Messages) > 0 {
			end = st.Messages[len(st.Messages)-1].ID
		}
		for _, m := range st.Messages {
			raw, _ := m.Values["e"].(string)
			if e, ok := decodeEvent(m.ID, raw); ok {
				out = append(out, e)
			} // else not an event this version writes: skipped
		}
	}
	return out, end, nil
}

// decodeEvent is the event of log entry id, whose JSON is raw. Only what
// readers filter on is decoded: a stream sends Raw as it is, and a reader
// of the fields asks (Event.Fields).
func decodeEvent(id, raw string) (record.Event, bool) {
	var h struct {
		Type   string `json:"type"`
		TurnID string `json:"turn_id"`
		At     string `json:"at"`
	}
	if id == "" || unmarshal([]byte(raw), &h) != nil {
		return record.Event{}, false
	}
	at, _ := time.Parse(time.RFC3339Nano, h.At)
	return record.Event{ID: id, Type: h.Type, TurnID: h.TurnID, At: at, Raw: json.RawMessage(raw)}, true
}

// forgetTitleScript: KEYS conv; ARGV text, placeholder. The title is
// replaced only while it is the forgotten text (the first message titles
// a conversation; a rename or an earlier message is left alone).
var forgetTitleScript = lazyScript(`
if redis.call('HGET', KEYS[1], 'title') == ARGV[1] then redis.call('HSET', KEYS[1], 'title', ARGV[2]) end
return 1
`)

// ForgetText removes text, the message of turn turnID the guardian
// blocked, from where the conversation keeps it besides the turn: its
// title (replaced by record.BlockedText) and the event log's turn.started
// of that turn (deleted). It is idempotent, so a retried step may call it
// again.
func (s *Store) ForgetText(ctx context.Context, cid, turnID, text string) error {
	if err := forgetTitleScript().Run(ctx, s.rdb, []string{convKey(cid)}, text, record.BlockedText).Err(); err != nil {
		return fmt.Errorf("forget the title of %s: %w", cid, classify(err))
	}
	msgs, err := s.rdb.XRange(ctx, eventsKey(cid), "-", "+").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("read events of %s: %w", cid, classify(err))
	}
	var ids []string
	for _, m := range msgs {
		raw, _ := m.Values["e"].(string)
		var e struct {
			Type   string `json:"type"`
			TurnID string `json:"turn_id"`
		}
		if unmarshal([]byte(raw), &e) == nil && e.TurnID == turnID && e.Type == record.EventTurnStarted {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	// What the publications told of the log may hold a deleted event: it
	// is dropped here, and by every other process's readers at the bare
	// wake-up after the deletion.
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.XDel(ctx, eventsKey(cid), ids...)
		p.Publish(ctx, eventsKey(cid), "")
		return nil
	})
	s.dropNews(cid)
	if err != nil {
		return fmt.Errorf("forget events of %s: %w", cid, classify(err))
	}
	return nil
}
