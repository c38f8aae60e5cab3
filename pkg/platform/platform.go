// Package platform wires the pieces of clientagent together from
// configuration: the conversation store, the sources of capabilities (the
// specialist registry, the MCP servers), the tool catalogue and the loop's
// step handlers; the invokers of calls are pkg/platform/invokeenv's, so a
// function that runs none does not link the A2A client. Lambda mains and
// the local stack both build from here, so they run the same objects. It
// holds no logic of its own beyond wiring.
package platform

import (
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	clientagent "github.com/clientagent/clientagent"
	"github.com/clientagent/clientagent/pkg/agents"
	"github.com/clientagent/clientagent/pkg/agents/files"
	"github.com/clientagent/clientagent/pkg/artifact"
	"github.com/clientagent/clientagent/pkg/audit"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/mcp"
	"github.com/clientagent/clientagent/pkg/record"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/tool"
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
	// default client); on AWS it may sign them (agentauth.ClientFromEnv).
	AgentClient *http.Client
	// FileOrigins are origins (scheme://host:port) a specialist's file URL
	// may point at beside public addresses, e.g. the local stack's own URL;
	// AllowPrivateFiles turns the public-address check off
	// (a2acall.InvokerOptions).
	FileOrigins       []string
	AllowPrivateFiles bool
	// Files bounds each file a specialist returns (zero: the defaults;
	// FilesFromEnv).
	Files files.Limits
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
	// MCP lists the MCP servers' tools (nil without servers); the local
	// stack keeps sessions to them open with MCP.Watch.
	MCP      *mcp.Source
	Catalogs *tool.Catalogs
	Handlers *turn.Handlers
}

// New builds the whole platform on a Valkey client, an artifact store, a
// model and the invoker of the tools' calls (pkg/platform/invokeenv.Router,
// which this package does not link: most functions run no call): every
// handler has every dependency. The local stack runs all the steps in one
// process; a Lambda function builds only its role's part (Env).
func New(cfg Config, rdb redis.UniversalClient, arts artifact.Store, model llm.Provider, inv turn.Invoker) (*Platform, error) {
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
	reg, src := newSources(cfg, rdb)
	cats := newCatalogs(cfg, workflows, reg, src)
	h := newHandlers(cfg, store)
	h.LLM, h.Catalogs, h.Invoker, h.Audit = model, cats, inv, cfg.Audit
	return &Platform{Store: store, Registry: reg, MCP: src, Catalogs: cats, Handlers: h}, nil
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

// newSources are the sources of capabilities cfg names, cached in rdb:
// the agent registry, and the MCP servers' tools (nil without servers).
func newSources(cfg Config, rdb redis.UniversalClient) (*agents.Registry, *mcp.Source) {
	reg := agents.NewRegistry(agents.RegistryOptions{URLs: cfg.Agents, Redis: rdb, TTL: cfg.CardTTL, HTTPClient: cfg.AgentClient, Logger: cfg.Logger})
	if len(cfg.MCP) == 0 {
		return reg, nil
	}
	return reg, mcp.NewSource(mcp.SourceOptions{Servers: cfg.MCP, Redis: rdb, TTL: cfg.CardTTL, FetchTimeout: cfg.MCPFetchTimeout, Logger: cfg.Logger})
}

// newCatalogs is the tool catalogue over the sources (an MCP source may
// be nil) and the workflow templates.
func newCatalogs(cfg Config, workflows []catalog.Workflow, reg *agents.Registry, src *mcp.Source) *tool.Catalogs {
	c := &tool.Catalogs{Sources: []tool.Lister{reg}, Workflows: workflows, TTL: cfg.CatalogTTL, Logger: cfg.Logger}
	if src != nil {
		c.Sources = append(c.Sources, src)
	}
	return c
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
