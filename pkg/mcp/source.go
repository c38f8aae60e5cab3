package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/capcache"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/tool"
)

// The cache's keys (capcache) share the hash tag {mcp}: the tools key,
// capcache:{mcp}:tools:<id>, never expires and is the last good list, the
// fresh key beside it expires after the TTL (or the down retry). A
// server's id is its name and a hash of its address (cacheID), so a
// changed configuration never reads an old list.
const cacheNamespace, cacheValueKey = "mcp", "tools"

// defaultFetchTimeout bounds one listing: longer than a card fetch's,
// since it opens a session first (for stdio, starts a process).
const defaultFetchTimeout = 10 * time.Second

// emptySchema is the input schema of a tool that declares none.
var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// SourceOptions configures a Source.
type SourceOptions struct {
	Servers []ServerConfig
	// Redis holds the cache; nil fetches every list on every call.
	Redis redis.UniversalClient
	// TTL is how long a fetched list counts as fresh (default 5 minutes).
	TTL time.Duration
	// DownRetry is how long a server whose fetch failed is left alone
	// (default the smaller of TTL and 30 seconds).
	DownRetry time.Duration
	// FetchTimeout bounds one listing, connection included (default 10 seconds).
	FetchTimeout time.Duration
	// HTTPClient carries streamable HTTP sessions (default a new client).
	HTTPClient *http.Client
	Logger     *slog.Logger
}

// Source is the catalog source of the MCP servers' tools. It is safe for
// concurrent use.
type Source struct {
	servers      []ServerConfig
	cache        *capcache.Cache[ServerConfig, cachedTools]
	fetchTimeout time.Duration
	hc           *http.Client
	log          *slog.Logger
}

// NewSource returns the source of opts.Servers' tools.
func NewSource(opts SourceOptions) *Source {
	s := &Source{servers: opts.Servers, fetchTimeout: opts.FetchTimeout, hc: opts.HTTPClient, log: opts.Logger}
	if s.fetchTimeout <= 0 {
		s.fetchTimeout = defaultFetchTimeout
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.cache = capcache.New(capcache.Options{Redis: opts.Redis, Namespace: cacheNamespace, ValueKey: cacheValueKey,
		What: "MCP tool list", TTL: opts.TTL, DownRetry: opts.DownRetry, FetchTimeout: s.fetchTimeout, Logger: s.log},
		cacheID, s.list)
	return s
}

// Servers returns the configured servers.
func (s *Source) Servers() []ServerConfig { return append([]ServerConfig(nil), s.servers...) }

// cachedTools is the value of a tools key.
type cachedTools struct {
	Tools     []*sdk.Tool `json:"tools"`
	FetchedAt time.Time   `json:"fetched_at"`
}

// Capabilities returns every server's tools as capabilities, in server
// order. Stale servers are listed again (concurrently); a server that is
// down keeps its last good list with every capability Unavailable, and a
// server never seen and down is left out (and logged). The error is only
// for the cache failing; it wraps record.ErrUnavailable.
func (s *Source) Capabilities(ctx context.Context) ([]catalog.Capability, error) {
	entries, err := s.cache.Get(ctx, s.servers)
	if err != nil {
		return nil, err
	}
	var caps []catalog.Capability
	for _, e := range entries {
		if e.Value == nil {
			continue
		}
		for _, t := range e.Value.Tools {
			c := CapabilityFromTool(e.Source, t)
			c.Unavailable = e.Down
			caps = append(caps, c)
		}
	}
	return caps, nil
}

// Refresh lists every server's tools now, whatever the cache says, and
// returns the joined failures (each server keeps its last good list).
func (s *Source) Refresh(ctx context.Context) error {
	return s.cache.Refresh(ctx, s.servers)
}

// refreshServer lists one server's tools now.
func (s *Source) refreshServer(ctx context.Context, name string) error {
	for _, sc := range s.servers {
		if sc.Name == name {
			return s.cache.Refresh(ctx, []ServerConfig{sc})
		}
	}
	return fmt.Errorf("no MCP server %q", name)
}

func cacheID(sc ServerConfig) string {
	sum := sha256.Sum256([]byte(sc.Endpoint() + "\x00" + strings.Join(sc.Args, "\x00")))
	return sc.Name + ":" + hex.EncodeToString(sum[:4])
}

// list reads a server's tools, every page, in a session of its own,
// within the deadline the cache gives it.
func (s *Source) list(ctx context.Context, sc ServerConfig) (cachedTools, error) {
	cs, err := connect(ctx, sc, s.hc, nil, false)
	if err != nil {
		return cachedTools{}, err
	}
	defer cs.Close()
	tools := []*sdk.Tool{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return cachedTools{}, err
		}
		tools = append(tools, t)
	}
	return cachedTools{Tools: tools, FetchedAt: time.Now().UTC()}, nil
}

// CapabilityFromTool is the catalog capability of tool t of server sc
// (docs/design.md §3.2 for skills): its name is <server>_<tool>, sanitized (catalog.New
// makes it unique); its description the tool's title and description; its
// parameters the tool's inputSchema. It requires approval when the tool is
// annotated destructive and not read-only, unless the configuration of the
// tool says otherwise.
func CapabilityFromTool(sc ServerConfig, t *sdk.Tool) catalog.Capability {
	c := catalog.Capability{
		Tool:        catalog.SanitizeToolName(sc.Name + "_" + t.Name),
		SkillID:     t.Name,
		Agent:       sc.Name,
		AgentURL:    sc.Endpoint(),
		MCPServer:   sc.Name,
		Description: toolDescription(t),
	}
	c.InputSchema = emptySchema
	if t.InputSchema != nil {
		if b, err := json.Marshal(t.InputSchema); err == nil && string(b) != "null" && string(b) != "{}" {
			c.InputSchema = b
		}
	}
	if a := t.Annotations; a != nil && a.DestructiveHint != nil && *a.DestructiveHint && !a.ReadOnlyHint {
		c.RequiresApproval = true
	}
	if o, ok := sc.Tools[t.Name]; ok && o.RequiresApproval != nil {
		c.RequiresApproval = *o.RequiresApproval
	}
	return c
}

func toolDescription(t *sdk.Tool) string {
	title := strings.TrimSpace(t.Title)
	if title == "" && t.Annotations != nil {
		title = strings.TrimSpace(t.Annotations.Title)
	}
	desc := strings.TrimSpace(t.Description)
	switch {
	case title == "" && desc == "":
		return t.Name
	case title == "" || strings.EqualFold(title, desc):
		return desc
	case desc == "":
		return title
	}
	return title + ": " + desc
}

// Source is the MCP servers' tool.Lister; Invoker their tool.Invoker.
var (
	_ tool.Lister  = (*Source)(nil)
	_ tool.Invoker = (*Invoker)(nil)
)
