// Package embedded runs an in-process Valkey (miniredis) for the local
// stack: `make run` without VALKEY_URL. It lives apart from
// pkg/record/valkey so that only the local stack links miniredis and its
// Lua interpreter; no Lambda function may import it (functions_test.go
// checks).
package embedded

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/record/valkey"
)

// Open starts an embedded server and returns a client of it, with
// valkey.Open's timeouts, and a function that closes both. The server's
// clock follows real time, so keys expire in a long `make run` as they do
// in Valkey (a conversation's idle TTL, the card cache).
func Open(ctx context.Context) (redis.UniversalClient, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return nil, nil, fmt.Errorf("start embedded valkey: %w", err)
	}
	// The server shares the process and its CPU: under load (it interprets
	// every Lua script afresh) a reply can take longer than a real
	// server's, and it cannot be paused or partitioned away, so its
	// timeouts are generous; those of a real server stay short (valkey).
	c := redis.NewClient(&redis.Options{Addr: mr.Addr(), DialTimeout: valkey.DialTimeout, ReadTimeout: embeddedTimeout,
		WriteTimeout: embeddedTimeout, PoolTimeout: embeddedTimeout + time.Second, MaxRetries: valkey.MaxRetries})
	stop := expireInRealTime(mr)
	return c, func() { stop(); _ = c.Close(); mr.Close() }, nil
}

// embeddedTimeout bounds one call to the embedded server.
const embeddedTimeout = 5 * time.Second

// tick is how often the embedded server's clock follows real time.
const tick = 100 * time.Millisecond

// expireInRealTime moves miniredis's clock, which only moves when told to,
// with real time. It returns a stop function.
func expireInRealTime(mr *miniredis.Miniredis) func() {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(tick)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				mr.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	return func() { close(done) }
}
