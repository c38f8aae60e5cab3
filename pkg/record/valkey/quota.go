package valkey

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/artifact"
)

// quotaKey holds a conversation's stored artifact bytes: field "total" and
// one field per object id with its size, so deleting an object releases
// exactly what it reserved. It sits in the conversation's slot.
func quotaKey(cid string) string { return "conv:{" + cid + "}:quota" }

const quotaTotal = "total"

// Usage is artifact.Usage in Valkey: the artifact store's quota counts
// each conversation's bytes here, where every process (each Lambda
// function) sees the same figures.
type Usage struct {
	rdb redis.UniversalClient
	ttl time.Duration
}

var _ artifact.Usage = (*Usage)(nil)

// Usage is the store's artifact.Usage; its keys expire with the
// conversation's (IdleTTL after the last reservation).
func (s *Store) Usage() *Usage { return &Usage{rdb: s.rdb, ttl: s.ttl} }

// Used is the bytes cid stores.
func (u *Usage) Used(ctx context.Context, cid string) (int64, error) {
	n, err := u.rdb.HGet(ctx, quotaKey(cid), quotaTotal).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read storage use of %s: %w", cid, classify(err))
	}
	return n, nil
}

// reserveScript adds ARGV[2] bytes for object ARGV[1] when the total stays
// within ARGV[3]; an object already counted is counted again only by the
// difference (a Put that replaces it).
var reserveScript = lazyScript(`
local total = tonumber(redis.call('HGET', KEYS[1], 'total') or '0')
local old = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local n = tonumber(ARGV[2])
if total - old + n > tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], 'total', total - old + n, ARGV[1], n)
-- The count lives as long as its conversation: no TTL while a turn is
-- active (saveTurnScript), the conversation's idle TTL otherwise.
if redis.call('TTL', KEYS[2]) == -1 then redis.call('PERSIST', KEYS[1]) else redis.call('EXPIRE', KEYS[1], ARGV[4]) end
return 1`)

// Reserve counts n bytes of object id against cid if the total stays
// within limit, atomically.
func (u *Usage) Reserve(ctx context.Context, cid, id string, n, limit int64) (bool, error) {
	ok, err := reserveScript().Run(ctx, u.rdb, []string{quotaKey(cid), convKey(cid)}, id, n, limit, int64(u.ttl/time.Second)).Int()
	if err != nil {
		return false, fmt.Errorf("reserve storage of %s: %w", cid, classify(err))
	}
	return ok == 1, nil
}

var releaseScript = lazyScript(`
local n = redis.call('HGET', KEYS[1], ARGV[1])
if not n then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HINCRBY', KEYS[1], 'total', -tonumber(n))
return 1`)

// Release stops counting object id of cid.
func (u *Usage) Release(ctx context.Context, cid, id string) error {
	if err := releaseScript().Run(ctx, u.rdb, []string{quotaKey(cid)}, id).Err(); err != nil {
		return fmt.Errorf("release storage of %s/%s: %w", cid, id, classify(err))
	}
	return nil
}

// Reset forgets cid's use.
func (u *Usage) Reset(ctx context.Context, cid string) error {
	if err := u.rdb.Del(ctx, quotaKey(cid)).Err(); err != nil {
		return fmt.Errorf("reset storage use of %s: %w", cid, classify(err))
	}
	return nil
}
