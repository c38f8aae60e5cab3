// Package capcache is the one cache of capability lists that every source
// of tools shares (agent cards in pkg/agents, MCP tool lists in pkg/mcp):
// each source's last good value in Valkey, a freshness key beside it, the
// stale ones fetched again concurrently, and the last good value kept —
// marked down — while its source does not answer.
//
// It knows nothing of what it caches: the caller names each source (ID),
// fetches its value (Fetch) and turns the values into capabilities. It must
// not decide what a value means or fail a caller because a source is down:
// only the cache itself not answering is an error.
package capcache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/record"
)

// Freshness values. While the fresh key exists its source is not fetched
// again; its value says whether the last fetch failed.
const (
	freshUp   = "up"
	freshDown = "down"
)

// Defaults of Options.
const (
	DefaultTTL          = 5 * time.Minute
	DefaultFetchTimeout = 5 * time.Second
	maxDownRetry        = 30 * time.Second
)

// Options configures a Cache.
type Options struct {
	// Redis holds the cache. Nil disables caching: every call fetches
	// every source.
	Redis redis.UniversalClient
	// Namespace is the keys' hash tag ("agents", "mcp"), so one MGET
	// reads a whole cache on a cluster (ElastiCache Serverless).
	Namespace string
	// ValueKey names the value keys ("card", "tools"):
	// capcache:{<Namespace>}:<ValueKey>:<id>, which never expire (the
	// last good value), beside capcache:{<Namespace>}:fresh:<id>.
	ValueKey string
	// What names a value in log lines ("agent card", "MCP tool list").
	What string
	// TTL is how long a fetched value counts as fresh (default 5 minutes).
	TTL time.Duration
	// DownRetry is how long a source whose fetch failed is left alone
	// before it is tried again (default the smaller of TTL and 30 seconds),
	// so a dead source does not cost every call a fetch deadline.
	DownRetry time.Duration
	// FetchTimeout is the deadline of one fetch (default 5 seconds).
	FetchTimeout time.Duration
	Logger       *slog.Logger
}

// Cache caches one value per source of type K. It is safe for concurrent
// use.
type Cache[K, V any] struct {
	opts  Options
	id    func(K) string
	fetch func(context.Context, K) (V, error)
}

// Entry is one source's state: its last good value (nil: never fetched,
// or unreadable) and whether its last fetch failed.
type Entry[K, V any] struct {
	Source K
	Value  *V
	// Down is set when the last fetch failed: Value, when set, is the last
	// good one, and the caller marks what it gives unavailable.
	Down  bool
	fresh string
}

// New returns the cache of the values fetch gets; id names a source in
// its keys (stable across processes: a changed source must change its id).
func New[K, V any](opts Options, id func(K) string, fetch func(context.Context, K) (V, error)) *Cache[K, V] {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.DownRetry <= 0 {
		opts.DownRetry = min(opts.TTL, maxDownRetry)
	}
	if opts.FetchTimeout <= 0 {
		opts.FetchTimeout = DefaultFetchTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Cache[K, V]{opts: opts, id: id, fetch: fetch}
}

// FetchTimeout is the deadline of one fetch.
func (c *Cache[K, V]) FetchTimeout() time.Duration { return c.opts.FetchTimeout }

func (c *Cache[K, V]) valueKey(id string) string {
	return "capcache:{" + c.opts.Namespace + "}:" + c.opts.ValueKey + ":" + id
}

func (c *Cache[K, V]) freshKey(id string) string {
	return "capcache:{" + c.opts.Namespace + "}:fresh:" + id
}

// Get returns every source's entry, in order: the stale ones are fetched
// again (concurrently). A source that is down keeps its last good value
// with Down set; one never seen and down has no Value (and is logged).
// The error is only for the cache itself failing; it wraps
// record.ErrUnavailable when the cache did not answer.
func (c *Cache[K, V]) Get(ctx context.Context, sources []K) ([]*Entry[K, V], error) {
	entries, err := c.load(ctx, sources)
	if err != nil {
		return nil, err
	}
	var stale []*Entry[K, V]
	for _, e := range entries {
		if e.fresh == "" {
			stale = append(stale, e)
		}
	}
	c.fetchAll(ctx, stale)
	return entries, nil
}

// Refresh fetches the sources now, whatever the cache says. It returns the
// joined fetch failures (each source's last good value is kept).
func (c *Cache[K, V]) Refresh(ctx context.Context, sources []K) error {
	entries, err := c.load(ctx, sources)
	if err != nil {
		return err
	}
	return c.fetchAll(ctx, entries)
}

// load reads every source's value and fresh keys in one MGET.
func (c *Cache[K, V]) load(ctx context.Context, sources []K) ([]*Entry[K, V], error) {
	entries := make([]*Entry[K, V], len(sources))
	for i, s := range sources {
		entries[i] = &Entry[K, V]{Source: s}
	}
	if c.opts.Redis == nil || len(sources) == 0 {
		return entries, nil
	}
	keys := make([]string, 0, 2*len(sources))
	for _, s := range sources {
		id := c.id(s)
		keys = append(keys, c.valueKey(id), c.freshKey(id))
	}
	vals, err := c.opts.Redis.MGet(ctx, keys...).Result()
	if err != nil {
		// A read that failed is a store that did not answer (paused,
		// unreachable, pool exhausted): callers answer 503, not 500.
		return nil, fmt.Errorf("read capability cache {%s}: %w: %w", c.opts.Namespace, record.ErrUnavailable, err)
	}
	for i, e := range entries {
		if v, ok := vals[2*i].(string); ok {
			var val V
			if err := json.Unmarshal([]byte(v), &val); err != nil {
				c.opts.Logger.WarnContext(ctx, "capability cache: unreadable entry", "what", c.opts.What, "source", c.id(e.Source), "err", err)
			} else {
				e.Value = &val
			}
		}
		if v, ok := vals[2*i+1].(string); ok {
			e.fresh = v
			e.Down = v == freshDown
		}
	}
	return entries, nil
}

// fetchAll fetches the entries' sources concurrently and records each
// outcome in the entries and the cache.
func (c *Cache[K, V]) fetchAll(ctx context.Context, entries []*Entry[K, V]) error {
	errs := make([]error, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Go(func() { errs[i] = c.fetchOne(ctx, e) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *Cache[K, V]) fetchOne(ctx context.Context, e *Entry[K, V]) error {
	fctx, cancel := context.WithTimeout(ctx, c.opts.FetchTimeout)
	v, err := c.fetch(fctx, e.Source)
	cancel()
	id := c.id(e.Source)
	if err != nil {
		e.fresh, e.Down = freshDown, true
		if e.Value != nil {
			c.opts.Logger.WarnContext(ctx, c.opts.What+" fetch failed; keeping the last good one, its capabilities unavailable",
				"source", id, "err", err)
		} else {
			c.opts.Logger.WarnContext(ctx, c.opts.What+" fetch failed; source left out of the catalog", "source", id, "err", err)
		}
		c.store(ctx, id, nil, freshDown, c.opts.DownRetry)
		return fmt.Errorf("fetch %s of %s: %w", c.opts.What, id, err)
	}
	e.Value, e.fresh, e.Down = &v, freshUp, false
	c.store(ctx, id, e.Value, freshUp, c.opts.TTL)
	return nil
}

// store writes a fetch outcome. A cache write failure is logged, not
// returned: the caller already has its value, the next call just fetches
// again.
func (c *Cache[K, V]) store(ctx context.Context, id string, v *V, fresh string, ttl time.Duration) {
	if c.opts.Redis == nil {
		return
	}
	_, err := c.opts.Redis.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if v != nil {
			b, err := json.Marshal(v)
			if err != nil {
				return err
			}
			p.Set(ctx, c.valueKey(id), b, 0)
		}
		p.Set(ctx, c.freshKey(id), fresh, ttl)
		return nil
	})
	if err != nil {
		c.opts.Logger.WarnContext(ctx, "capability cache write failed", "what", c.opts.What, "source", id, "err", err)
	}
}
