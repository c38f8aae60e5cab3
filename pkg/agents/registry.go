package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/capcache"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/keepalive"
	"github.com/clientagent/clientagent/pkg/tool"
)

// AgentCardPath is where an A2A agent publishes its card, under its base URL.
const AgentCardPath = "/.well-known/agent-card.json"

// The cache's keys share the hash tag {agents} (capcache): the card key,
// capcache:{agents}:card:<base URL>, never expires and is the last good
// card; the fresh key beside it expires after the TTL (or the down retry).
// An agent is named by its base URL: another URL is another agent.
const cacheNamespace, cacheValueKey = "agents", "card"

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
	// HTTPClient fetches cards (default keepalive.Client()).
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// Registry is the CapabilityCache (docs/design.md §5): the specialists' agent
// cards, fetched from their base URLs and cached in Valkey, as catalog
// capabilities. It is safe for concurrent use.
type Registry struct {
	urls  []string
	cache *capcache.Cache[string, cachedCard]
	hc    *http.Client
	log   *slog.Logger
}

// NewRegistry returns a registry of the agents at opts.URLs (normalized and
// deduplicated like ParseAgentList).
func NewRegistry(opts RegistryOptions) *Registry {
	r := &Registry{hc: opts.HTTPClient, log: opts.Logger}
	seen := map[string]bool{}
	for _, u := range opts.URLs {
		u = normalizeBaseURL(u)
		if u != "" && !seen[u] {
			seen[u] = true
			r.urls = append(r.urls, u)
		}
	}
	if r.hc == nil {
		r.hc = keepalive.Client()
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	r.cache = capcache.New(capcache.Options{Redis: opts.Redis, Namespace: cacheNamespace, ValueKey: cacheValueKey,
		What: "agent card", TTL: opts.TTL, DownRetry: opts.DownRetry, FetchTimeout: opts.FetchTimeout, Logger: r.log},
		func(u string) string { return u }, r.fetchCard)
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

// Capabilities returns every registered agent's skills as capabilities, in
// URL order with unique tool names. Stale agents are fetched again
// (concurrently); an agent that is down keeps its last good card with every
// capability marked Unavailable, and an agent never seen and down is left
// out (and logged). The error is only for the cache itself failing; it
// wraps record.ErrUnavailable when the cache did not answer.
func (r *Registry) Capabilities(ctx context.Context) ([]catalog.Capability, error) {
	entries, err := r.cache.Get(ctx, r.urls)
	if err != nil {
		return nil, err
	}
	return r.build(entries), nil
}

// Refresh fetches every agent's card now, whatever the cache says. It
// returns the joined fetch failures (each agent's last good card is kept);
// the catalog stays usable either way.
func (r *Registry) Refresh(ctx context.Context) error {
	return r.cache.Refresh(ctx, r.urls)
}

// fetchCard downloads and checks one agent card, with its own deadline.
// The cache gives it its deadline.
func (r *Registry) fetchCard(ctx context.Context, base string) (cachedCard, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+AgentCardPath, nil)
	if err != nil {
		return cachedCard{}, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.hc.Do(req)
	if err != nil {
		return cachedCard{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCardBytes+1))
	if err != nil {
		return cachedCard{}, fmt.Errorf("read card: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return cachedCard{}, fmt.Errorf("HTTP %s: %s", resp.Status, tool.Snippet(body))
	}
	if len(body) > maxCardBytes {
		return cachedCard{}, fmt.Errorf("card larger than %d bytes", maxCardBytes)
	}
	var card a2a.AgentCard
	if err := json.Unmarshal(body, &card); err != nil {
		return cachedCard{}, fmt.Errorf("decode card: %w", err)
	}
	return cachedCard{Card: body, FetchedAt: time.Now().UTC()}, nil
}

// build parses the known cards into the catalog.
func (r *Registry) build(entries []*capcache.Entry[string, cachedCard]) []catalog.Capability {
	var caps []catalog.Capability
	for _, e := range entries {
		if e.Value == nil {
			continue
		}
		var card a2a.AgentCard
		if err := json.Unmarshal(e.Value.Card, &card); err != nil {
			r.log.Warn("capability cache: cached card does not decode", "agent", e.Source, "err", err)
			continue
		}
		for _, c := range CapabilitiesFromCard(&card, e.Source) {
			c.Unavailable = e.Down
			caps = append(caps, c)
		}
	}
	uniqueTools(caps)
	return caps
}

// The registry is the A2A specialists' tool.Lister (a2acall.Invoker their
// tool.Invoker).
var _ tool.Lister = (*Registry)(nil)
