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
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		return appendEvents(ctx, p, cid, evs)
	})
	if err != nil {
		return fmt.Errorf("emit %d events of %s: %w", len(evs), cid, classify(err))
	}
	return nil
}

// blockingClient is a client with the same options as the store's and a
// pool of its own for blocking reads (the store's client itself when its
// kind is not known).
func (s *Store) blockingClient() redis.UniversalClient {
	s.blockingOnce.Do(func() {
		switch c := s.rdb.(type) {
		case *redis.Client:
			o := *c.Options()
			o.PoolSize, o.MinIdleConns, o.MaxIdleConns = blockingPool, 0, 8
			s.blocking = redis.NewClient(&o)
		case *redis.ClusterClient:
			o := *c.Options()
			o.PoolSize, o.MinIdleConns, o.MaxIdleConns = blockingPool, 0, 8
			s.blocking = redis.NewClusterClient(&o)
		default:
			s.blocking = s.rdb
		}
	})
	return s.blocking
}

// blockingPool bounds the event streams one process serves at once.
const blockingPool = 512

// appendEvents queues evs for cid's event log on p (XADD each, then
// EXPIRE), trimming it to about maxEvents.
func appendEvents(ctx context.Context, p redis.Pipeliner, cid string, evs []record.Event) error {
	if len(evs) == 0 {
		return nil
	}
	key := eventsKey(cid)
	for _, e := range evs {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		p.XAdd(ctx, &redis.XAddArgs{Stream: key, MaxLen: maxEvents, Approx: true, Values: []any{"e", b}})
	}
	p.Expire(ctx, key, eventTTL)
	return nil
}

// Events reads up to count events of cid's log after id after, waiting up
// to block for one (XREAD … BLOCK).
func (s *Store) Events(ctx context.Context, cid, after string, count int, block time.Duration) ([]record.Event, error) {
	if after == "" {
		after = "0"
	}
	args := &redis.XReadArgs{Streams: []string{eventsKey(cid), after}, Count: int64(count), Block: -1}
	rdb := s.rdb
	if block > 0 {
		args.Block = block
		rdb = s.blockingClient()
	}
	res, err := rdb.XRead(ctx, args).Result()
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

// forgetTitleScript: KEYS conv; ARGV text, placeholder. The title is
// replaced only while it is the forgotten text (the first message titles
// a conversation; a rename or an earlier message is left alone).
var forgetTitleScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'title') == ARGV[1] then redis.call('HSET', KEYS[1], 'title', ARGV[2]) end
return 1
`)

// ForgetText removes text, the message of turn turnID the guardian
// blocked, from where the conversation keeps it besides the turn: its
// title (replaced by record.BlockedText) and the event log's turn.started
// of that turn (deleted). It is idempotent, so a retried step may call it
// again.
func (s *Store) ForgetText(ctx context.Context, cid, turnID, text string) error {
	if err := forgetTitleScript.Run(ctx, s.rdb, []string{convKey(cid)}, text, record.BlockedText).Err(); err != nil {
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
		if json.Unmarshal([]byte(raw), &e) == nil && e.TurnID == turnID && e.Type == record.EventTurnStarted {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	if err := s.rdb.XDel(ctx, eventsKey(cid), ids...).Err(); err != nil {
		return fmt.Errorf("forget events of %s: %w", cid, classify(err))
	}
	return nil
}
