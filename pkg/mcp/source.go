package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/record"
)

// Cache key layout, as agent cards (pkg/agents): the tools key never
// expires and is the last good list; the fresh key expires after the TTL
// (or the down retry) and says whether the last fetch failed. Keys share
// one hash tag, so one MGET reads them on a cluster, and end in a hash of
// the server's address, so a changed configuration never reads an old list.
const (
	toolsKeyPrefix = "capcache:{mcp}:tools:"
	freshKeyPrefix = "capcache:{mcp}:fresh:"
	freshUp        = "up"
	freshDown      = "down"
)

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
	rdb          redis.UniversalClient
	ttl          time.Duration
	downRetry    time.Duration
	fetchTimeout time.Duration
	hc           *http.Client
	log          *slog.Logger
}

// NewSource returns the source of opts.Servers' tools.
func NewSource(opts SourceOptions) *Source {
	s := &Source{servers: opts.Servers, rdb: opts.Redis, ttl: opts.TTL, downRetry: opts.DownRetry,
		fetchTimeout: opts.FetchTimeout, hc: opts.HTTPClient, log: opts.Logger}
	if s.ttl <= 0 {
		s.ttl = 5 * time.Minute
	}
	if s.downRetry <= 0 {
		s.downRetry = min(s.ttl, 30*time.Second)
	}
	if s.fetchTimeout <= 0 {
		s.fetchTimeout = 10 * time.Second
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	return s
}

// Servers returns the configured servers.
func (s *Source) Servers() []ServerConfig { return append([]ServerConfig(nil), s.servers...) }

// cachedTools is the value of a tools key.
type cachedTools struct {
	Tools     []*sdk.Tool `json:"tools"`
	FetchedAt time.Time   `json:"fetched_at"`
}

type serverState struct {
	server ServerConfig
	tools  *cachedTools // last good list, nil if never seen
	fresh  string
}

// Capabilities returns every server's tools as capabilities, in server
// order. Stale servers are listed again (concurrently); a server that is
// down keeps its last good list with every capability Unavailable, and a
// server never seen and down is left out (and logged). The error is only
// for the cache failing; it wraps record.ErrUnavailable.
func (s *Source) Capabilities(ctx context.Context) ([]catalog.Capability, error) {
	states, err := s.load(ctx)
	if err != nil {
		return nil, err
	}
	var stale []*serverState
	for _, st := range states {
		if st.fresh == "" {
			stale = append(stale, st)
		}
	}
	s.fetchAll(ctx, stale)
	var caps []catalog.Capability
	for _, st := range states {
		if st.tools == nil {
			continue
		}
		for _, t := range st.tools.Tools {
			c := CapabilityFromTool(st.server, t)
			c.Unavailable = st.fresh == freshDown
			caps = append(caps, c)
		}
	}
	return caps, nil
}

// Refresh lists every server's tools now, whatever the cache says, and
// returns the joined failures (each server keeps its last good list).
func (s *Source) Refresh(ctx context.Context) error {
	states, err := s.load(ctx)
	if err != nil {
		return err
	}
	return s.fetchAll(ctx, states)
}

// refreshServer lists one server's tools now.
func (s *Source) refreshServer(ctx context.Context, name string) error {
	states, err := s.load(ctx)
	if err != nil {
		return err
	}
	for _, st := range states {
		if st.server.Name == name {
			return s.fetchOne(ctx, st)
		}
	}
	return fmt.Errorf("no MCP server %q", name)
}

func cacheID(sc ServerConfig) string {
	sum := sha256.Sum256([]byte(sc.Endpoint() + "\x00" + strings.Join(sc.Args, "\x00")))
	return sc.Name + ":" + hex.EncodeToString(sum[:4])
}

func (s *Source) load(ctx context.Context) ([]*serverState, error) {
	states := make([]*serverState, len(s.servers))
	for i, sc := range s.servers {
		states[i] = &serverState{server: sc}
	}
	if s.rdb == nil || len(states) == 0 {
		return states, nil
	}
	keys := make([]string, 0, 2*len(states))
	for _, st := range states {
		id := cacheID(st.server)
		keys = append(keys, toolsKeyPrefix+id, freshKeyPrefix+id)
	}
	vals, err := s.rdb.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("read MCP tool cache: %w: %w", record.ErrUnavailable, err)
	}
	for i, st := range states {
		if v, ok := vals[2*i].(string); ok {
			var ct cachedTools
			if err := json.Unmarshal([]byte(v), &ct); err != nil {
				s.log.WarnContext(ctx, "MCP tool cache: unreadable entry", "server", st.server.Name, "err", err)
			} else {
				st.tools = &ct
			}
		}
		if v, ok := vals[2*i+1].(string); ok {
			st.fresh = v
		}
	}
	return states, nil
}

func (s *Source) fetchAll(ctx context.Context, states []*serverState) error {
	errs := make([]error, len(states))
	var wg sync.WaitGroup
	for i, st := range states {
		wg.Go(func() { errs[i] = s.fetchOne(ctx, st) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (s *Source) fetchOne(ctx context.Context, st *serverState) error {
	tools, err := s.list(ctx, st.server)
	if err != nil {
		st.fresh = freshDown
		if st.tools != nil {
			s.log.WarnContext(ctx, "MCP tool list failed; keeping the last good list, tools unavailable",
				"server", st.server.Name, "fetched_at", st.tools.FetchedAt, "err", err)
		} else {
			s.log.WarnContext(ctx, "MCP tool list failed; server left out of the catalog", "server", st.server.Name, "err", err)
		}
		s.store(ctx, st.server, nil, freshDown, s.downRetry)
		return fmt.Errorf("list tools of MCP server %s: %w", st.server.Name, err)
	}
	st.tools = &cachedTools{Tools: tools, FetchedAt: time.Now().UTC()}
	st.fresh = freshUp
	s.store(ctx, st.server, st.tools, freshUp, s.ttl)
	return nil
}

// list reads a server's tools, every page, in a session of its own.
func (s *Source) list(ctx context.Context, sc ServerConfig) ([]*sdk.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.fetchTimeout)
	defer cancel()
	cs, err := connect(ctx, sc, s.hc, nil, false)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	tools := []*sdk.Tool{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// store writes a fetch outcome; a failed write is logged (the next call
// fetches again).
func (s *Source) store(ctx context.Context, sc ServerConfig, ct *cachedTools, fresh string, ttl time.Duration) {
	if s.rdb == nil {
		return
	}
	id := cacheID(sc)
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if ct != nil {
			b, err := json.Marshal(ct)
			if err != nil {
				return err
			}
			p.Set(ctx, toolsKeyPrefix+id, b, 0)
		}
		p.Set(ctx, freshKeyPrefix+id, fresh, ttl)
		return nil
	})
	if err != nil {
		s.log.WarnContext(ctx, "MCP tool cache write failed", "server", sc.Name, "err", err)
	}
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
