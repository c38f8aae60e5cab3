package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/record"
)

// AgentCardPath is where an A2A agent publishes its card, under its base URL.
const AgentCardPath = "/.well-known/agent-card.json"

// Cache key layout. Every key shares the hash tag {agents} so that one MGET
// reads the whole cache in one round trip on a cluster (ElastiCache
// Serverless). The card key never expires: it is the last good card. The
// fresh key expires after the TTL (or the down retry): while it exists the
// agent is not fetched again, and its value says whether the last fetch
// failed.
const (
	cardKeyPrefix  = "capcache:{agents}:card:"
	freshKeyPrefix = "capcache:{agents}:fresh:"
	freshUp        = "up"
	freshDown      = "down"
)

// maxCardBytes bounds a card download; real cards are a few KiB.
const maxCardBytes = 1 << 20

// RegistryOptions configures a Registry.
type RegistryOptions struct {
	// URLs are the agents' base URLs, in the order that decides which of two
	// equal tool names keeps the plain name.
	URLs []string
	// Redis is the Valkey client holding the cache. Nil disables caching:
	// every call fetches every card.
	Redis redis.UniversalClient
	// TTL is how long a fetched card counts as fresh (default 5 minutes).
	TTL time.Duration
	// DownRetry is how long an agent whose fetch failed is left alone before
	// it is tried again (default the smaller of TTL and 30 seconds), so a
	// dead agent does not cost every turn a fetch deadline.
	DownRetry time.Duration
	// FetchTimeout is the deadline of one card download (default 5 seconds).
	FetchTimeout time.Duration
	// HTTPClient fetches cards (default http.DefaultClient).
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// Registry is the CapabilityCache (docs/design.md §5): the specialists' agent
// cards, fetched from their base URLs and cached in Valkey, as catalog
// capabilities. It is safe for concurrent use.
type Registry struct {
	urls         []string
	rdb          redis.UniversalClient
	ttl          time.Duration
	downRetry    time.Duration
	fetchTimeout time.Duration
	hc           *http.Client
	log          *slog.Logger
}

// NewRegistry returns a registry of the agents at opts.URLs (normalized and
// deduplicated like ParseAgentList).
func NewRegistry(opts RegistryOptions) *Registry {
	r := &Registry{
		rdb:          opts.Redis,
		ttl:          opts.TTL,
		downRetry:    opts.DownRetry,
		fetchTimeout: opts.FetchTimeout,
		hc:           opts.HTTPClient,
		log:          opts.Logger,
	}
	seen := map[string]bool{}
	for _, u := range opts.URLs {
		u = normalizeBaseURL(u)
		if u != "" && !seen[u] {
			seen[u] = true
			r.urls = append(r.urls, u)
		}
	}
	if r.ttl <= 0 {
		r.ttl = 5 * time.Minute
	}
	if r.downRetry <= 0 {
		r.downRetry = min(r.ttl, 30*time.Second)
	}
	if r.fetchTimeout <= 0 {
		r.fetchTimeout = 5 * time.Second
	}
	if r.hc == nil {
		r.hc = http.DefaultClient
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	return r
}

// URLs returns the registered base URLs in order.
func (r *Registry) URLs() []string { return append([]string(nil), r.urls...) }

// cachedCard is the value of a card key: the card as the agent served it
// and when it was fetched.
type cachedCard struct {
	Card      json.RawMessage `json:"card"`
	FetchedAt time.Time       `json:"fetched_at"`
}

// agentState is one agent's entry while building the catalog.
type agentState struct {
	url   string
	card  *cachedCard // last good card, nil if never seen
	fresh string      // "", freshUp or freshDown
}

// Capabilities returns every registered agent's skills as capabilities, in
// URL order with unique tool names. Stale agents are fetched again
// (concurrently); an agent that is down keeps its last good card with every
// capability marked Unavailable, and an agent never seen and down is left
// out (and logged). The error is only for the cache itself failing; it
// wraps record.ErrUnavailable when the cache did not answer.
func (r *Registry) Capabilities(ctx context.Context) ([]catalog.Capability, error) {
	states, err := r.load(ctx)
	if err != nil {
		return nil, err
	}
	var stale []*agentState
	for _, s := range states {
		if s.fresh == "" {
			stale = append(stale, s)
		}
	}
	r.fetchAll(ctx, stale)
	return r.build(states), nil
}

// Refresh fetches every agent's card now, whatever the cache says. It
// returns the joined fetch failures (each agent's last good card is kept);
// the catalog stays usable either way.
func (r *Registry) Refresh(ctx context.Context) error {
	states, err := r.load(ctx)
	if err != nil {
		return err
	}
	return r.fetchAll(ctx, states)
}

// load reads every agent's card and fresh keys in one MGET.
func (r *Registry) load(ctx context.Context) ([]*agentState, error) {
	states := make([]*agentState, len(r.urls))
	for i, u := range r.urls {
		states[i] = &agentState{url: u}
	}
	if r.rdb == nil || len(r.urls) == 0 {
		return states, nil
	}
	keys := make([]string, 0, 2*len(r.urls))
	for _, u := range r.urls {
		keys = append(keys, cardKeyPrefix+u, freshKeyPrefix+u)
	}
	vals, err := r.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		// A read that failed is a store that did not answer (paused,
		// unreachable, pool exhausted): callers answer 503, not 500.
		return nil, fmt.Errorf("read capability cache: %w: %w", record.ErrUnavailable, err)
	}
	for i, s := range states {
		if v, ok := vals[2*i].(string); ok {
			var cc cachedCard
			if err := json.Unmarshal([]byte(v), &cc); err != nil {
				r.log.WarnContext(ctx, "capability cache: unreadable card entry", "agent", s.url, "err", err)
			} else {
				s.card = &cc
			}
		}
		if v, ok := vals[2*i+1].(string); ok {
			s.fresh = v
		}
	}
	return states, nil
}

// fetchAll fetches the given agents' cards concurrently and records each
// outcome in the states and the cache.
func (r *Registry) fetchAll(ctx context.Context, states []*agentState) error {
	errs := make([]error, len(states))
	var wg sync.WaitGroup
	for i, s := range states {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = r.fetchOne(ctx, s)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (r *Registry) fetchOne(ctx context.Context, s *agentState) error {
	raw, err := r.fetchCard(ctx, s.url)
	if err != nil {
		s.fresh = freshDown
		if s.card != nil {
			r.log.WarnContext(ctx, "agent card fetch failed; keeping last good card, capabilities unavailable",
				"agent", s.url, "fetched_at", s.card.FetchedAt, "err", err)
		} else {
			r.log.WarnContext(ctx, "agent card fetch failed; agent left out of the catalog", "agent", s.url, "err", err)
		}
		r.store(ctx, s.url, nil, freshDown, r.downRetry)
		return fmt.Errorf("fetch agent card of %s: %w", s.url, err)
	}
	s.card = &cachedCard{Card: raw, FetchedAt: time.Now().UTC()}
	s.fresh = freshUp
	r.store(ctx, s.url, s.card, freshUp, r.ttl)
	return nil
}

// store writes a fetch outcome. A cache write failure is logged, not
// returned: the catalog of this call is already known, the next call just
// fetches again.
func (r *Registry) store(ctx context.Context, u string, c *cachedCard, fresh string, ttl time.Duration) {
	if r.rdb == nil {
		return
	}
	_, err := r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if c != nil {
			b, err := json.Marshal(c)
			if err != nil {
				return err
			}
			p.Set(ctx, cardKeyPrefix+u, b, 0)
		}
		p.Set(ctx, freshKeyPrefix+u, fresh, ttl)
		return nil
	})
	if err != nil {
		r.log.WarnContext(ctx, "capability cache write failed", "agent", u, "err", err)
	}
}

// fetchCard downloads and checks one agent card, with its own deadline.
func (r *Registry) fetchCard(ctx context.Context, base string) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, r.fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+AgentCardPath, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCardBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read card: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %s: %s", resp.Status, snippet(body))
	}
	if len(body) > maxCardBytes {
		return nil, fmt.Errorf("card larger than %d bytes", maxCardBytes)
	}
	var card a2a.AgentCard
	if err := json.Unmarshal(body, &card); err != nil {
		return nil, fmt.Errorf("decode card: %w", err)
	}
	return json.RawMessage(body), nil
}

// build parses the known cards into the catalog.
func (r *Registry) build(states []*agentState) []catalog.Capability {
	var caps []catalog.Capability
	for _, s := range states {
		if s.card == nil {
			continue
		}
		var card a2a.AgentCard
		if err := json.Unmarshal(s.card.Card, &card); err != nil {
			r.log.Warn("capability cache: cached card does not decode", "agent", s.url, "err", err)
			continue
		}
		for _, c := range CapabilitiesFromCard(&card, s.url) {
			c.Unavailable = s.fresh == freshDown
			caps = append(caps, c)
		}
	}
	uniqueTools(caps)
	return caps
}
