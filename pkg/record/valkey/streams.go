package valkey

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// streamsKey holds the event streams a user has open: a sorted set of
// stream ids scored by when each must have ended (a stream whose process
// died without releasing it frees its slot then).
func streamsKey(user string) string { return "user:{" + user + "}:streams" }

// acquireStreamScript: KEYS streams; ARGV now ms, until ms, id, max. Drops
// the ended entries, then adds id if fewer than max remain; returns 0 when
// full, else 1. The key lives until its last entry's end.
var acquireStreamScript = lazyScript(`
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('PEXPIREAT', KEYS[1], redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
return 1
`)

// AcquireStream takes one of user's max stream slots for stream id until
// until (its end at the latest); false when all are taken. Slots are
// shared by every process serving streams, so the cap holds across
// instances.
func (s *Store) AcquireStream(ctx context.Context, user, id string, until time.Time, max int) (bool, error) {
	now := time.Now()
	n, err := acquireStreamScript().Run(ctx, s.rdb, []string{streamsKey(user)},
		strconv.FormatInt(now.UnixMilli(), 10), strconv.FormatInt(until.UnixMilli(), 10), id, max).Int()
	if err != nil {
		return false, fmt.Errorf("acquire a stream of %s: %w", user, classify(err))
	}
	return n == 1, nil
}

// ReleaseStream gives stream id's slot back.
func (s *Store) ReleaseStream(ctx context.Context, user, id string) error {
	if err := s.rdb.ZRem(ctx, streamsKey(user), id).Err(); err != nil {
		return fmt.Errorf("release a stream of %s: %w", user, classify(err))
	}
	return nil
}
