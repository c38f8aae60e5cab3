package valkey

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

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

// ErrNoURL is Open's and NewClient's error for an empty URL. The embedded
// server of the local stack and tests is pkg/record/valkey/embedded: it
// lives apart so that no Lambda binary links it.
var ErrNoURL = errors.New("open valkey: no URL (the embedded server is pkg/record/valkey/embedded)")

// Open connects to the Valkey/Redis at rawURL (see NewClient) and returns
// the client and a function that closes it; the server is pinged before
// Open returns.
func Open(ctx context.Context, rawURL string, opts ...ClientOption) (redis.UniversalClient, func(), error) {
	c, err := NewClient(rawURL, opts...)
	if err != nil {
		return nil, nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		_ = c.Close()
		return nil, nil, fmt.Errorf("open valkey %s: ping: %w", redactedURL(rawURL), err)
	}
	return c, func() { _ = c.Close() }, nil
}

// NewClient returns a client of the Valkey/Redis at rawURL without
// contacting it: the first command dials. rawURL is redis:// or rediss://
// (TLS) as redis.ParseURL reads it; the query parameter cluster=true
// selects a cluster client (ElastiCache Serverless), with more seed nodes
// given as addr=host:port. Scripts that come at once share round trips
// (SendScriptsTogether). Timeouts default to DialTimeout, IOTimeout and
// PoolTimeout, and retries to MaxRetries; a URL's dial_timeout,
// read_timeout, write_timeout, pool_timeout and max_retries win. A Lambda
// function builds its client with NewClient at cold start, so a store that
// is down then is a step's TransientError (retried by the state machine)
// rather than a function that cannot start.
//
// WithCredentials replaces the URL's user and password with ones asked for
// at each new connection (an IAM auth token: pkg/record/valkey/valkeyiam).
func NewClient(rawURL string, opts ...ClientOption) (redis.UniversalClient, error) {
	var cfg clientConfig
	for _, o := range opts {
		o(&cfg)
	}
	if rawURL == "" {
		return nil, ErrNoURL
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("open valkey: parse url: %w", err)
	}
	q := u.Query()
	cluster := q.Get("cluster") == "true" || q.Get("cluster") == "1"
	q.Del("cluster")
	u.RawQuery = q.Encode()
	if cluster {
		o, err := redis.ParseClusterURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("open valkey: %w", err)
		}
		timeouts(q, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout, &o.MaxRetries)
		o.CredentialsProviderContext = cfg.credentials
		o.Dialer = Dialer(&redis.Options{DialTimeout: o.DialTimeout, TLSConfig: o.TLSConfig})
		c := redis.NewClusterClient(o)
		SendScriptsTogether(c)
		return c, nil
	}
	o, err := redis.ParseURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("open valkey: %w", err)
	}
	timeouts(q, &o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolTimeout, &o.MaxRetries)
	o.CredentialsProviderContext = cfg.credentials
	o.Dialer = Dialer(o)
	c := redis.NewClient(o)
	SendScriptsTogether(c)
	return c, nil
}

// ClientOption changes how NewClient and Open connect.
type ClientOption func(*clientConfig)

type clientConfig struct {
	credentials func(ctx context.Context) (username, password string, err error)
}

// WithCredentials makes every new connection authenticate with what creds
// returns then, instead of the URL's user and password: a short-lived
// token is asked for when a connection is made, not when the client is.
func WithCredentials(creds func(ctx context.Context) (username, password string, err error)) ClientOption {
	return func(c *clientConfig) { c.credentials = creds }
}

// redactedURL is rawURL without its password, for errors and logs.
func redactedURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}
