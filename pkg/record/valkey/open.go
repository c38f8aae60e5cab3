package valkey

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Client timeouts: every Valkey call has a deadline even when a caller's
// context has none.
const (
	DialTimeout = 5 * time.Second
	IOTimeout   = 3 * time.Second
	pingTimeout = 5 * time.Second
)

// Open connects to the Valkey/Redis at rawURL and returns the client and a
// function that closes it. An empty rawURL starts an embedded server
// (miniredis) for the local stack and tests; closing stops it. Otherwise
// rawURL is redis:// or rediss:// (TLS) as redis.ParseURL reads it; the
// query parameter cluster=true selects a cluster client (ElastiCache
// Serverless), with more seed nodes given as addr=host:port. Read and write
// timeouts default to IOTimeout (a URL's read_timeout/write_timeout win
// when positive), and the server is pinged before Open returns.
func Open(ctx context.Context, rawURL string) (redis.UniversalClient, func(), error) {
	if rawURL == "" {
		mr := miniredis.NewMiniRedis()
		if err := mr.Start(); err != nil {
			return nil, nil, fmt.Errorf("start embedded valkey: %w", err)
		}
		c := redis.NewClient(&redis.Options{Addr: mr.Addr(), DialTimeout: DialTimeout, ReadTimeout: IOTimeout, WriteTimeout: IOTimeout})
		stop := expireInRealTime(mr)
		return c, func() { stop(); _ = c.Close(); mr.Close() }, nil
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, fmt.Errorf("open valkey: parse url: %w", err)
	}
	q := u.Query()
	cluster := q.Get("cluster") == "true" || q.Get("cluster") == "1"
	q.Del("cluster")
	u.RawQuery = q.Encode()
	var c redis.UniversalClient
	if cluster {
		o, err := redis.ParseClusterURL(u.String())
		if err != nil {
			return nil, nil, fmt.Errorf("open valkey: %w", err)
		}
		o.DialTimeout = positive(o.DialTimeout, DialTimeout)
		o.ReadTimeout = positive(o.ReadTimeout, IOTimeout)
		o.WriteTimeout = positive(o.WriteTimeout, IOTimeout)
		c = redis.NewClusterClient(o)
	} else {
		o, err := redis.ParseURL(u.String())
		if err != nil {
			return nil, nil, fmt.Errorf("open valkey: %w", err)
		}
		o.DialTimeout = positive(o.DialTimeout, DialTimeout)
		o.ReadTimeout = positive(o.ReadTimeout, IOTimeout)
		o.WriteTimeout = positive(o.WriteTimeout, IOTimeout)
		c = redis.NewClient(o)
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		_ = c.Close()
		return nil, nil, fmt.Errorf("open valkey %s: ping: %w", u.Redacted(), err)
	}
	return c, func() { _ = c.Close() }, nil
}

func positive(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// embeddedTick is how often the embedded server's clock follows real time.
const embeddedTick = 100 * time.Millisecond

// expireInRealTime moves miniredis's clock, which only moves when told to,
// with real time, so keys expire in a long `make run` as they do in Valkey
// (a conversation's idle TTL, the card cache). It returns a stop function.
func expireInRealTime(mr *miniredis.Miniredis) func() {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(embeddedTick)
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
