package valkey

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Client defaults: every Valkey call has a deadline even when a caller's
// context has none, and a store that is paused, unreachable or
// overloaded is an answer within about 2 s (one retry of 700 ms each):
// the API's 503 store_unavailable, a step's TransientError the state
// machine retries — well inside API Gateway's 29 s and a page's polling.
// A URL's dial_timeout, read_timeout, write_timeout, pool_timeout and
// max_retries parameters win.
const (
	DialTimeout = 700 * time.Millisecond
	IOTimeout   = 700 * time.Millisecond
	PoolTimeout = time.Second
	MaxRetries  = 1
	pingTimeout = 5 * time.Second
)

// timeouts applies the defaults to the options a URL left unset.
func timeouts(q url.Values, dial, read, write, pool *time.Duration, retries *int) {
	set := func(name string, d *time.Duration, def time.Duration) {
		if q.Get(name) == "" || *d <= 0 {
			*d = def
		}
	}
	set("dial_timeout", dial, DialTimeout)
	set("read_timeout", read, IOTimeout)
	set("write_timeout", write, IOTimeout)
	set("pool_timeout", pool, PoolTimeout)
	if q.Get("max_retries") == "" {
		*retries = MaxRetries
	}
}

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
		c := redis.NewClient(&redis.Options{Addr: mr.Addr(), DialTimeout: DialTimeout, ReadTimeout: IOTimeout, WriteTimeout: IOTimeout, PoolTimeout: PoolTimeout, MaxRetries: MaxRetries})
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
		timeouts(q, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout, &o.MaxRetries)
		c = redis.NewClusterClient(o)
	} else {
		o, err := redis.ParseURL(u.String())
		if err != nil {
			return nil, nil, fmt.Errorf("open valkey: %w", err)
		}
		timeouts(q, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout, &o.MaxRetries)
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
