// Package embedded runs an in-process Valkey (miniredis) for the local
// stack: `make run` without VALKEY_URL and without a Valkey server on PATH.
// OpenPersistent keeps its keys in a snapshot file (written every few
// seconds when something changed, and at close; loaded at start). It lives
// apart from
// pkg/record/valkey so that only the local stack links miniredis and its
// Lua interpreter; no Lambda function may import it (functions_test.go
// checks).
package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/record/valkey"
)

// Open starts an embedded server and returns a client of it, with
// valkey.Open's timeouts, and a function that closes both. The server's
// clock follows real time, so keys expire in a long `make run` as they do
// in Valkey (a conversation's idle TTL, the card cache).
func Open(ctx context.Context) (redis.UniversalClient, func(), error) {
	mr, c, err := start(ctx)
	if err != nil {
		return nil, nil, err
	}
	stop := expireInRealTime(mr)
	return c, func() { stop(); _ = c.Close(); mr.Close() }, nil
}

func start(ctx context.Context) (*miniredis.Miniredis, *redis.Client, error) {
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
	valkey.SendScriptsTogether(c)
	return mr, c, nil
}

// DefaultSnapshotEvery is how often a changed store is written to its
// snapshot: what a kill -9 can lose is at most the writes of this window.
const DefaultSnapshotEvery = 2 * time.Second

// Persistence says where OpenPersistent keeps the store.
type Persistence struct {
	// Path is the snapshot file (its directory is created, mode 0700).
	Path string
	// Every is how often a changed store is written (default DefaultSnapshotEvery).
	Every  time.Duration
	Logger *slog.Logger
}

// OpenPersistent is Open with the keys kept in p.Path: loaded before the
// client is returned (expired keys left out), written again every p.Every
// when a command may have changed something, and once more at close. A
// snapshot is one consistent moment (see take); it is written to a
// temporary file and renamed, so a crash leaves the previous one whole. An
// unreadable file is an error, not an empty store.
func OpenPersistent(ctx context.Context, p Persistence) (redis.UniversalClient, func(), error) {
	if p.Every <= 0 {
		p.Every = DefaultSnapshotEvery
	}
	log := p.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mr, c, err := start(ctx)
	if err != nil {
		return nil, nil, err
	}
	if _, err := LoadSnapshot(ctx, c, p.Path); err != nil {
		_ = c.Close()
		mr.Close()
		return nil, nil, fmt.Errorf("embedded valkey: %w (move the file away to start empty)", err)
	}
	// Anything but a read may change the store; the snapshot's own
	// commands are reads.
	var dirty atomic.Bool
	mr.Server().SetPreHook(func(_ *server.Peer, cmd string, _ ...string) bool {
		if !quiet[cmd] && !mr.IsReadOnlyCommand(cmd) {
			dirty.Store(true)
		}
		return false
	})
	var mu sync.Mutex // one snapshot at a time
	save := func(ctx context.Context) {
		mu.Lock()
		defer mu.Unlock()
		if !dirty.Swap(false) {
			return
		}
		s, err := take(ctx, c)
		if err == nil {
			err = s.write(p.Path)
		}
		if err != nil {
			dirty.Store(true) // try again at the next tick
			log.WarnContext(ctx, "embedded valkey: snapshot failed", "path", p.Path, "err", err)
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(p.Every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				save(context.Background())
			}
		}
	})
	stopClock := expireInRealTime(mr)
	return c, func() {
		close(done)
		wg.Wait()
		save(context.Background())
		stopClock()
		_ = c.Close()
		mr.Close()
	}, nil
}

// quiet are commands that change nothing a snapshot keeps, though not
// marked read-only (connection setup, transactions' brackets).
var quiet = map[string]bool{"PING": true, "HELLO": true, "CLIENT": true, "SELECT": true, "AUTH": true, "ECHO": true,
	"QUIT": true, "MULTI": true, "EXEC": true, "DISCARD": true, "WATCH": true, "UNWATCH": true, "SCRIPT": true}

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
