// Package platform wires the pieces of clientagent together from
// configuration: the conversation store, the specialist registry and
// invoker, the tool catalogue, the loop's step handlers and the HTTP API.
// Lambda mains and the local stack both build from here, so they run the
// same objects. It holds no logic of its own beyond wiring.
package platform

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	clientagent "github.com/clientagent/clientagent"
	"github.com/clientagent/clientagent/pkg/agents"
	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/audit"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/mcp"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/turn"
)

// Config is what a process needs to build the platform.
type Config struct {
	// Agents are the specialists' base URLs.
	Agents []string
	// MCP are the MCP servers whose tools are skills too (CLIENTAGENT_MCP,
	// mcp.LoadConfig), their secret headers resolved (mcp.Resolve).
	MCP []mcp.ServerConfig
	// Limits bound each turn.
	Limits turn.Limits
	// Prices prices LLM calls per model (nil: llm.DefaultPrices;
	// CLIENTAGENT_PRICES adds entries, llm.LoadPrices).
	Prices llm.Prices
	// IdleTTL is how long a conversation's keys live after its last write.
	IdleTTL time.Duration
	// CardTTL is how long a fetched agent card counts as fresh.
	CardTTL time.Duration
	// CatalogTTL is how long one process reuses a built tool catalogue.
	CatalogTTL time.Duration
	// MCPFetchTimeout bounds one listing of an MCP server's tools,
	// connection (or process start) included (zero: mcp's default).
	MCPFetchTimeout time.Duration
	// InvokeTimeout bounds one specialist call.
	InvokeTimeout time.Duration
	// AgentClient carries agent-card fetches and A2A calls (nil: Go's
	// default client); on AWS it may sign them (agents.ClientFromEnv).
	AgentClient *http.Client
	// FileOrigins are origins (scheme://host:port) a specialist's file URL
	// may point at beside public addresses, e.g. the local stack's own URL;
	// AllowPrivateFiles turns the public-address check off
	// (agents.InvokerOptions).
	FileOrigins       []string
	AllowPrivateFiles bool
	// Files bounds each file a specialist returns (zero: the defaults;
	// FilesFromEnv).
	Files agents.FileLimits
	// Audit keeps approvals and executed calls durably (nil: none).
	Audit audit.Log
	// WorkflowsDir is the folder of workflow templates (*.json); empty:
	// the examples built in from testdata/workflows.
	WorkflowsDir string
	Logger       *slog.Logger
}

// LimitsFromEnv reads the turn limits, starting from the defaults of docs/design.md §3.6:
// CLIENTAGENT_MAX_LLM_CALLS, CLIENTAGENT_TOKEN_BUDGET, CLIENTAGENT_MAX_REPEATS,
// CLIENTAGENT_MAX_FAILURES (the re-plan cap), CLIENTAGENT_MAX_CONCURRENCY,
// CLIENTAGENT_COST_BUDGET (US dollars per turn, off by default),
// CLIENTAGENT_AWAIT_TIMEOUT and CLIENTAGENT_TURN_TIMEOUT (Go durations; the
// turn's wall-clock budget, not counting waits for the user, 0 for none).
func LimitsFromEnv(getenv func(string) string) (turn.Limits, error) {
	l := turn.DefaultLimits()
	ints := map[string]*int{
		"CLIENTAGENT_MAX_LLM_CALLS":   &l.MaxLLMCalls,
		"CLIENTAGENT_TOKEN_BUDGET":    &l.TokenBudget,
		"CLIENTAGENT_MAX_REPEATS":     &l.MaxRepeats,
		"CLIENTAGENT_MAX_FAILURES":    &l.MaxFailures,
		"CLIENTAGENT_MAX_CONCURRENCY": &l.MaxConcurrency,
	}
	for k, p := range ints {
		if v := getenv(k); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return l, fmt.Errorf("%s=%q: want a non-negative integer", k, v)
			}
			*p = n
		}
	}
	if v := getenv("CLIENTAGENT_AWAIT_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return l, fmt.Errorf("CLIENTAGENT_AWAIT_TIMEOUT=%q: want a duration of at least 1s, e.g. 30m", v)
		}
		l.AwaitTimeout = d
	}
	if v := getenv("CLIENTAGENT_COST_BUDGET"); v != "" {
		usd, err := strconv.ParseFloat(v, 64)
		if err != nil || usd < 0 {
			return l, fmt.Errorf("CLIENTAGENT_COST_BUDGET=%q: want a non-negative amount of US dollars, e.g. 0.50", v)
		}
		l.CostBudget = int64(usd * 1e6)
	}
	if v := getenv("CLIENTAGENT_TURN_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > 0 && d < time.Second {
			return l, fmt.Errorf("CLIENTAGENT_TURN_TIMEOUT=%q: want 0 (none) or a duration of at least 1s, e.g. 15m", v)
		}
		l.TurnTimeout = d
	}
	return l, nil
}

// Platform is the built object graph.
type Platform struct {
	Store    *valkey.Store
	Registry *agents.Registry
	Invoker  *agents.Invoker
	// MCP lists the MCP servers' tools (nil without servers); the local
	// stack keeps sessions to them open with MCP.Watch.
	MCP      *mcp.Source
	Catalogs *Catalogs
	Handlers *turn.Handlers
}

// New builds the whole platform on a Valkey client, an artifact store and a
// model: every handler has every dependency. The local stack runs all the
// steps in one process; a Lambda function builds only its role's part
// (Env).
func New(cfg Config, rdb redis.UniversalClient, arts artifact.Store, model llm.Provider) (*Platform, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	workflows, err := loadWorkflows(cfg)
	if err != nil {
		return nil, err
	}
	store := valkey.New(rdb, valkey.Options{IdleTTL: cfg.IdleTTL})
	cfg.Logger = log
	cats := newCatalogs(cfg, rdb, workflows)
	inv := newInvoker(cfg, arts)
	h := newHandlers(cfg, store)
	h.LLM, h.Catalogs, h.Invoker, h.Audit = model, cats, withMCP(cfg, arts, inv), cfg.Audit
	return &Platform{Store: store, Registry: cats.Registry, Invoker: inv, MCP: cats.MCP, Catalogs: cats, Handlers: h}, nil
}

// loadWorkflows reads the workflow templates of cfg.WorkflowsDir, or the
// built-in examples.
func loadWorkflows(cfg Config) ([]catalog.Workflow, error) {
	wfFS, wfDir := fs.FS(clientagent.Workflows), clientagent.WorkflowsDir
	if cfg.WorkflowsDir != "" {
		wfFS, wfDir = os.DirFS(cfg.WorkflowsDir), "."
	}
	workflows, err := catalog.LoadWorkflows(wfFS, wfDir)
	if err != nil {
		return nil, fmt.Errorf("load workflow templates: %w", err)
	}
	return workflows, nil
}

// newCatalogs is the tool catalogue over the agent cards of cfg.Agents,
// cached in rdb.
func newCatalogs(cfg Config, rdb redis.UniversalClient, workflows []catalog.Workflow) *Catalogs {
	reg := agents.NewRegistry(agents.RegistryOptions{URLs: cfg.Agents, Redis: rdb, TTL: cfg.CardTTL, HTTPClient: cfg.AgentClient, Logger: cfg.Logger})
	c := &Catalogs{Registry: reg, Workflows: workflows, TTL: cfg.CatalogTTL, Logger: cfg.Logger}
	if len(cfg.MCP) > 0 {
		c.MCP = mcp.NewSource(mcp.SourceOptions{Servers: cfg.MCP, Redis: rdb, TTL: cfg.CardTTL, FetchTimeout: cfg.MCPFetchTimeout, Logger: cfg.Logger})
	}
	return c
}

// withMCP is the invoker of the MCP servers' tools in front of the A2A
// invoker next, or next alone when no server is configured.
func withMCP(cfg Config, arts artifact.Store, next *agents.Invoker) turn.Invoker {
	if len(cfg.MCP) == 0 {
		return next
	}
	return mcp.NewInvoker(mcp.InvokerOptions{Servers: cfg.MCP, Artifacts: arts, Timeout: cfg.InvokeTimeout, Next: next, Logger: cfg.Logger})
}

// newInvoker is the A2A invoker, storing what specialists return in arts.
func newInvoker(cfg Config, arts artifact.Store) *agents.Invoker {
	return agents.NewInvoker(agents.InvokerOptions{Artifacts: arts, HTTPClient: cfg.AgentClient, Timeout: cfg.InvokeTimeout,
		FileOrigins: cfg.FileOrigins, AllowPrivateFiles: cfg.AllowPrivateFiles, Files: cfg.Files, Logger: cfg.Logger})
}

// newHandlers are the step handlers with what every step uses (the store,
// the limits, the logger); each role adds its own dependencies.
func newHandlers(cfg Config, store record.Store) *turn.Handlers {
	limits := cfg.Limits
	if limits == (turn.Limits{}) {
		limits = turn.DefaultLimits()
	}
	h := &turn.Handlers{Store: store, Limits: limits, CallTimeout: cfg.InvokeTimeout, Prices: cfg.Prices, Logger: cfg.Logger}
	if ev, ok := store.(record.EventLog); ok {
		h.Events = ev
	}
	return h
}

// Catalogs builds the tool catalogue from the registry's capabilities and
// the workflow templates, and reuses it for TTL so a step does not
// recompile schemas it compiled a moment ago.
type Catalogs struct {
	Registry *agents.Registry
	// MCP adds the MCP servers' tools (nil: none).
	MCP       *mcp.Source
	Workflows []catalog.Workflow
	TTL       time.Duration
	// Logger hears of the workflow templates that do not compile against
	// the skills whenever that set changes: one WARN naming the skills no
	// specialist offers, an ERROR for each template broken otherwise.
	Logger *slog.Logger

	mu       sync.Mutex
	built    *catalog.Catalog
	at       time.Time
	rejected string
}

// Invalidate drops the built catalogue, so the next Catalog builds it
// again: an MCP server's tool list changed (mcp.Source.Watch).
func (c *Catalogs) Invalidate() {
	c.mu.Lock()
	c.built = nil
	c.mu.Unlock()
}

// Catalog returns the current catalogue.
func (c *Catalogs) Catalog(ctx context.Context) (*catalog.Catalog, error) {
	ttl := c.TTL
	if ttl == 0 {
		ttl = 10 * time.Second
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.built != nil && time.Since(c.at) < ttl {
		return c.built, nil
	}
	caps, err := c.Registry.Capabilities(ctx)
	if err != nil {
		return nil, fmt.Errorf("capabilities: %w", err)
	}
	if c.MCP != nil {
		tools, err := c.MCP.Capabilities(ctx)
		if err != nil {
			return nil, fmt.Errorf("MCP tools: %w", err)
		}
		caps = append(caps, tools...)
	}
	c.built, c.at = catalog.New(caps, c.Workflows), time.Now()
	errs := c.built.WorkflowErrors()
	if s := fmt.Sprint(errs); s != c.rejected && c.Logger != nil {
		logWorkflowErrors(ctx, c.Logger, errs)
	}
	c.rejected = fmt.Sprint(errs)
	return c.built, nil
}

// logWorkflowErrors reports the workflow templates a catalogue left out:
// the ones whose skills no specialist offers in one WARN line naming each
// missing skill (a deployment without those specialists is configured, not
// broken), any other error as an ERROR of its own.
func logWorkflowErrors(ctx context.Context, log *slog.Logger, errs []error) {
	var missing []string
	for _, err := range errs {
		if m, ok := errors.AsType[*catalog.MissingSkillError](err); ok {
			missing = append(missing, m.Workflow+" needs "+m.Skill)
			continue
		}
		log.ErrorContext(ctx, "workflow template left out", "error", err)
	}
	if len(missing) > 0 {
		log.WarnContext(ctx, "workflow templates left out: no specialist offers their skills", "missing", strings.Join(missing, ", "))
	}
}
