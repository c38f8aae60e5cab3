package a2aserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"
)

// An A2A contextId is a conversation of the calling principal. A message
// without one starts a new conversation whose id becomes the contextId; a
// contextId the caller chose is mapped to a conversation in Valkey, per
// principal, both ways (a task's contextId is told back as the caller
// gave it):
//
//	a2a:{<principal hash>}:ctx:<contextId>  → conversation id
//	a2a:{<principal hash>}:conv:<conversation id> → contextId
//
// Another principal's contextId names nothing of this one: the same
// string maps to a conversation of each caller's own.

func (s *Server) keys(principal string) (ctxKey, convKey func(string) string) {
	sum := sha256.Sum256([]byte(principal))
	p := "a2a:{" + hex.EncodeToString(sum[:12]) + "}:"
	return func(c string) string { return p + "ctx:" + c }, func(c string) string { return p + "conv:" + c }
}

func (s *Server) contextTTL() time.Duration {
	if s.ContextTTL > 0 {
		return s.ContextTTL
	}
	return DefaultContextTTL
}

// conversation returns the caller's conversation of contextID, creating
// one (and the mapping) when contextID names none yet. fresh forces a new
// conversation (the mapped one is gone).
func (s *Server) conversation(ctx context.Context, contextID string, fresh bool) (string, error) {
	c, _ := callerFrom(ctx)
	ctxKey, convKey := s.keys(c.principal)
	if contextID != "" && !fresh {
		cid, err := s.Redis.GetEx(ctx, ctxKey(contextID), s.contextTTL()).Result()
		if err == nil {
			return cid, nil
		}
		if !errors.Is(err, redis.Nil) {
			return "", fmt.Errorf("read context %s: %w", contextID, err)
		}
	}
	var out struct {
		ID string `json:"conversation_id"`
	}
	if err := s.do(ctx, http.MethodPost, "/v1/conversations", nil, "", &out); err != nil {
		return "", err
	}
	if contextID == "" {
		contextID = out.ID
	}
	ttl := s.contextTTL()
	_, err := s.Redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, ctxKey(contextID), out.ID, ttl)
		p.Set(ctx, convKey(out.ID), contextID, ttl)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("map context %s: %w", contextID, err)
	}
	return out.ID, nil
}

// contextOf is the contextId the caller knows conversation cid by.
func (s *Server) contextOf(ctx context.Context, cid string) (string, error) {
	c, _ := callerFrom(ctx)
	_, convKey := s.keys(c.principal)
	id, err := s.Redis.Get(ctx, convKey(cid)).Result()
	if errors.Is(err, redis.Nil) {
		return cid, nil
	}
	if err != nil {
		return "", fmt.Errorf("read context of %s: %w", cid, err)
	}
	return id, nil
}
