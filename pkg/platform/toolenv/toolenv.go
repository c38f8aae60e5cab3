// Package toolenv wires the tools' side of the platform: the sources of
// capabilities (the specialists' agent cards of CLIENTAGENT_AGENTS, the MCP
// servers of CLIENTAGENT_MCP), the workflow templates and the tool
// catalogue over them; and New, the local stack's whole graph. The
// functions that build the catalogue (api, llmstep, validate, append,
// invoke) and the local stack import it; await and events do not, so they
// link neither the A2A types, the MCP SDK nor their package initialisers.
//
// What a Lambda function's environment gives it (FromEnv, Catalogs):
//
//	CLIENTAGENT_AGENTS             specialist base URLs, comma-separated
//	CLIENTAGENT_MCP                MCP servers whose tools are skills, read by
//	                               pkg/platform/mcpenv.Servers (streamable HTTP only:
//	                               stdio is refused on Lambda; "secret:<arn>" headers
//	                               are read from Secrets Manager)
//	CLIENTAGENT_WORKFLOWS_DIR      a folder of workflow templates (default: the built-in examples)
//	CLIENTAGENT_ALLOW_PRIVATE_FILE_URLS=1  let specialists return files on private addresses
package toolenv

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
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
	"github.com/clientagent/clientagent/pkg/platform"
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
	// One process runs every step of a turn: a step's read of the turn
	// the step before it wrote takes back what was written.
	store := valkey.New(rdb, valkey.Options{IdleTTL: cfg.IdleTTL, ReadBack: true})
	cfg.Logger = log
	reg, src := newSources(cfg, rdb)
	cats := newCatalogs(cfg, workflows, reg, src)
	h := platform.NewHandlers(store, platform.HandlerOptions{Limits: cfg.Limits, CallTimeout: cfg.InvokeTimeout, Prices: cfg.Prices, Logger: log})
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

// Catalogs is a Lambda function's tool catalogue: the agent cards of
// CLIENTAGENT_AGENTS (cached in Valkey, fetched when stale), the tools of
// servers (CLIENTAGENT_MCP with its secret headers read:
// pkg/platform/mcpenv.Servers) and the workflow templates.
func Catalogs(ctx context.Context, env *platform.Env, servers []mcp.ServerConfig) (*tool.Catalogs, error) {
	rdb, err := env.Valkey()
	if err != nil {
		return nil, err
	}
	cfg := FromEnv(env)
	workflows, err := loadWorkflows(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.AgentClient, err = env.AgentClient(ctx); err != nil {
		return nil, err
	}
	cfg.MCP = servers
	reg, src := newSources(cfg, rdb)
	return newCatalogs(cfg, workflows, reg, src), nil
}

// FromEnv is the part of Config the environment sets for every Lambda
// role that builds the catalogue or calls tools.
func FromEnv(env *platform.Env) Config {
	return Config{
		Agents:            agents.ParseAgentList(env.Getenv("CLIENTAGENT_AGENTS")),
		InvokeTimeout:     platform.InvokeTimeout,
		AllowPrivateFiles: env.Getenv("CLIENTAGENT_ALLOW_PRIVATE_FILE_URLS") != "",
		WorkflowsDir:      env.Getenv("CLIENTAGENT_WORKFLOWS_DIR"),
		Logger:            env.Logger,
	}
}
