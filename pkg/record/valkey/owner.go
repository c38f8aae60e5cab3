package valkey

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/record"
)

// Owner returns the owner of conversation cid (one HGET of its meta), for
// the live-event publisher's channel (pkg/livepub); record.ErrNotFound
// when there is no such conversation.
func (s *Store) Owner(ctx context.Context, cid string) (string, error) {
	raw, err := s.rdb.HGet(ctx, convKey(cid), fieldMeta).Result()
	if errors.Is(err, redis.Nil) {
		return "", record.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("owner of %s: %w", cid, classify(err))
	}
	m, err := metas.decode(raw)
	if err != nil {
		return "", fmt.Errorf("owner of %s: %w", cid, err)
	}
	return m.Owner, nil
}
