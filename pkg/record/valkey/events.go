package valkey

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// Emit appends evs to cid's event log in one pipeline (XADD each, then
// EXPIRE), trimming it to about maxEvents.
func (s *Store) Emit(ctx context.Context, cid string, evs ...record.Event) error {
	if len(evs) == 0 {
		return nil
	}
	key := eventsKey(cid)
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, e := range evs {
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			p.XAdd(ctx, &redis.XAddArgs{Stream: key, MaxLen: maxEvents, Approx: true, Values: []any{"e", b}})
		}
		p.Expire(ctx, key, eventTTL)
		return nil
	})
	if err != nil {
		return fmt.Errorf("emit %d events of %s: %w", len(evs), cid, classify(err))
	}
	return nil
}

// Events reads up to count events of cid's log after id after, waiting up
// to block for one (XREAD … BLOCK).
func (s *Store) Events(ctx context.Context, cid, after string, count int, block time.Duration) ([]record.Event, error) {
	if after == "" {
		after = "0"
	}
	args := &redis.XReadArgs{Streams: []string{eventsKey(cid), after}, Count: int64(count), Block: -1}
	if block > 0 {
		args.Block = block
	}
	res, err := s.rdb.XRead(ctx, args).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read events of %s: %w", cid, classify(err))
	}
	var out []record.Event
	for _, st := range res {
		for _, m := range st.Messages {
			raw, _ := m.Values["e"].(string)
			var e record.Event
			if err := json.Unmarshal([]byte(raw), &e); err != nil {
				continue // not an event this version writes: skipped
			}
			e.ID = m.ID
			out = append(out, e)
		}
	}
	return out, nil
}
