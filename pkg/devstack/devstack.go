// Package devstack runs the whole product on one machine (`make run`,
// `clientagent dev`, end-to-end tests): the HTTP API and web page, the
// local Step Functions engine executing statemachine/turn.asl.json (and its
// EXPRESS loop, statemachine/loop.asl.json) with the
// step handlers in process (and answering the Step Functions JSON API, so
// the API uses the real SDK client), a Valkey (one at VALKEY_URL, a
// valkey-server child keeping its AOF under the data directory, or the
// embedded one, in memory or in a snapshot file), a local artifact
// directory and the demo specialists. It wires; it decides nothing.
package devstack

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/redis/go-redis/v9"

	clientagent "github.com/clientagent/clientagent"
	"github.com/clientagent/clientagent/pkg/a2aserver"
	"github.com/clientagent/clientagent/pkg/api"
	"github.com/clientagent/clientagent/pkg/artifact/localstore"
	"github.com/clientagent/clientagent/pkg/audit"
	"github.com/clientagent/clientagent/pkg/auth"
	"github.com/clientagent/clientagent/pkg/awssign"
	"github.com/clientagent/clientagent/pkg/demoagents"
	"github.com/clientagent/clientagent/pkg/guardian"
	"github.com/clientagent/clientagent/pkg/inproc"
	"github.com/clientagent/clientagent/pkg/livepub"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/scripted"
	"github.com/clientagent/clientagent/pkg/mcp"
	"github.com/clientagent/clientagent/pkg/platform"
	"github.com/clientagent/clientagent/pkg/platform/invokeenv"
	"github.com/clientagent/clientagent/pkg/platform/toolenv"
	"github.com/clientagent/clientagent/pkg/procs"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/schemacheck"
	"github.com/clientagent/clientagent/pkg/sfnlocal"
	"github.com/clientagent/clientagent/pkg/telemetry"
	"github.com/clientagent/clientagent/pkg/turn"
	"github.com/clientagent/clientagent/pkg/turn/turnlambda"
	"github.com/clientagent/clientagent/web"
)

// Function names the local engine registers the step handlers under; the
// same placeholders CDK substitutes with the deployed functions' ARNs.
var functionNames = map[string]string{
	"LLMStepFunction":  "clientagent-llmstep",
	"ValidateFunction": "clientagent-validate",
	"AwaitFunction":    "clientagent-await",
	"InvokeFunction":   "clientagent-invoke",
	"AppendFunction":   "clientagent-append",
}

// Config configures a local stack. Every field is optional.
type Config struct {
	// StoreOutage is how long a step waits in process for a store that is
	// away (zero: turn.DefaultStoreOutage).
	StoreOutage time.Duration
	// CallLostAfter is how long after a cancel a call that had started
	// before it may still report (zero: turn.DefaultCallLostAfter).
	CallLostAfter time.Duration
	// Addr is where the API, page, demo agents and engine listen (default 127.0.0.1:8080).
	Addr string
	// DataDir holds the signing key, artifacts, the audit log and a local
	// store (StoreDir) (default ./.data).
	DataDir string
	// ValkeyURL points at a real Valkey/Redis; it wins over ValkeyServer
	// and PersistEmbedded.
	ValkeyURL string
	// ValkeyServer is a valkey-server or redis-server binary the stack runs
	// as a child process with its data and AOF in StoreDir (localserver);
	// empty: the embedded Valkey.
	ValkeyServer string
	// PersistEmbedded keeps the embedded Valkey's keys in a snapshot file
	// in StoreDir (embedded.OpenPersistent); false: memory only.
	PersistEmbedded bool
	// LLM is the model; nil means the scripted demo model.
	LLM llm.Provider
	// LLMName describes the model in the start banner.
	LLMName string
	// Agents are extra specialist base URLs beside the demo ones.
	Agents []string
	// MCP are MCP servers whose tools are skills (CLIENTAGENT_MCP,
	// mcp.LoadConfig); stdio servers are allowed here. The stack keeps a
	// session to each open and refreshes the catalog on tools/list_changed.
	MCP []mcp.ServerConfig
	// AgentClient carries card fetches and A2A calls to specialists (nil:
	// Go's default client), e.g. one adding a bearer token for another
	// clientagent registered in Agents (pkg/a2aserver).
	AgentClient *http.Client
	// FileOrigins are origins (scheme://host:port) a specialist's file
	// links may point at although not public, e.g. another local
	// clientagent's (toolenv.Config.FileOrigins).
	FileOrigins []string
	// Files bound stored files: each specialist's file (size, deadline,
	// rate) and each conversation's bytes (zero: the defaults of
	// platform.FilesFromEnv; a negative Quota: none).
	Files platform.Files
	// Limits bound each turn (zero: the defaults of docs/design.md §3.6).
	Limits turn.Limits
	// WorkflowsDir is the folder of workflow templates (empty: the built-in examples).
	WorkflowsDir string
	// FastAgents serves demoagents.FastHandler in place of the demo
	// specialists (same cards and URLs, answers at once, keeps nothing),
	// for load runs (docs/benchmarks.md).
	FastAgents bool
	// ChunkDelay is the scripted demo model's pause between the chunks of
	// text it streams (zero: none; make run shows streaming with a small one).
	ChunkDelay time.Duration
	// Prices prices LLM calls per model (nil: llm.DefaultPrices).
	Prices llm.Prices
	// CardTTL and CatalogTTL are how long a fetched agent card counts as
	// fresh and how long the built tool catalogue is reused (zero: the
	// platform's defaults), so a test can keep the cache still for its run.
	CardTTL, CatalogTTL time.Duration
	// MCPFetchTimeout bounds one listing of an MCP server's tools, a stdio
	// server's start included (zero: mcp's default, 10 s).
	MCPFetchTimeout time.Duration
	// Guardian checks requests, the model's output, calls and results (nil: none; issue 19).
	// The demo guardian agent is served at /agents/guardian.
	Guardian *guardian.Checker
	// GuardianName describes Guardian in the start banner (e.g. the
	// CLIENTAGENT_GUARDIAN setting).
	GuardianName string
	// Retention is how long the engine keeps an ended execution's history
	// in the store (default 1h: with the embedded Valkey it shares this
	// process's memory).
	Retention time.Duration
	// Clock drives the engine's timers (tests use a fake clock for expiry).
	Clock sfnlocal.Clock
	// Tracing exports one trace per turn (telemetry.FromEnv: any OTLP
	// receiver; nil: none). The caller shuts it down.
	Tracing *telemetry.Tracing
	// MaxStreams caps the event streams one user holds open (zero:
	// api.DefaultMaxStreams).
	MaxStreams int
	// Live, when set, publishes every live event to an AppSync Events API
	// as a deployment does (tests: livepubtest's fake), and GET /v1/info
	// tells clients to subscribe there; the SSE endpoint stays.
	Live *Live
	// Procs, when set, is told of every step the engine runs, and sets the
	// processors by how many overlap (pkg/procs; clientagent dev sets it).
	Procs  *procs.Adapter
	Logger *slog.Logger
}

// Live is an AppSync Events API the stack publishes to, signing with
// Credentials for Region (default us-east-1).
type Live struct {
	livepub.Config
	Credentials aws.CredentialsProvider
	Region      string
}

// Stack is a running local stack.
type Stack struct {
	url       string
	srv       *http.Server
	engine    *sfnlocal.Engine
	engineRDB redis.UniversalClient // the engine's persister's Valkey client
	auth      *auth.Local
	closeRDB  func()
	stopMCP   func()
	store     StoreInfo
	guardian  string // the banner's description of the guardian, "" if none
	closeOnce sync.Once
	stopLive  context.CancelFunc
	// Platform is the wired object graph (tests inspect its store).
	Platform *toolenv.Platform
	// Engine is the local Step Functions engine (tests read histories).
	Engine *sfnlocal.Engine
	// StateMachineARN is the turn state machine's ARN on Engine.
	StateMachineARN string
	// LoopStateMachineARN is the EXPRESS loop's, which the turn's executions start.
	LoopStateMachineARN string
	// Redis is the platform's Valkey client (tests add hooks to count round trips).
	Redis redis.UniversalClient
	// Publications is what the demo publish_artifact skill published.
	Publications *demoagents.Ledger
}

// Start builds and starts a stack; Close stops it.
func Start(ctx context.Context, cfg Config) (*Stack, error) {
	schemacheck.Use() // the stack validates calls and API requests, as the validate and api functions do
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:8080"
	}
	if cfg.DataDir == "" {
		cfg.DataDir = ".data"
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	model := cfg.LLM
	if model == nil {
		model = scripted.Demo()
	}
	if sp, ok := model.(*scripted.Provider); ok && cfg.ChunkDelay > 0 {
		sp.Stream(cfg.ChunkDelay) // the scripted model streams like a real one
	}
	limits := cfg.Limits
	if limits == (turn.Limits{}) {
		limits = turn.DefaultLimits()
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	url := "http://" + ln.Addr().String()
	st := &Stack{url: url}
	ok := false
	defer func() {
		if !ok {
			ln.Close()
			st.Close()
		}
	}()

	rdb, closeRDB, info, err := openStore(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	st.closeRDB, st.store = closeRDB, info
	key, err := auth.LoadOrCreateKey(filepath.Join(cfg.DataDir, "signing.key"))
	if err != nil {
		return nil, err
	}
	st.auth = &auth.Local{Key: key}
	local, err := localstore.New(filepath.Join(cfg.DataDir, "artifacts"), url, key)
	if err != nil {
		return nil, fmt.Errorf("artifact directory: %w", err)
	}
	if cfg.Files == (platform.Files{}) {
		cfg.Files, _ = platform.FilesFromEnv(func(string) string { return "" })
	}
	arts := cfg.Files.WithQuota(local, rdb, 0)
	// The demo agents (which are other services) get a Valkey client of
	// their own, so the platform's traffic can be measured alone
	// (docs/benchmarks.md). They are no part of the platform and need not
	// fail fast: their task store keeps its tasks through a busy moment (on
	// a loaded machine the platform's 700 ms dial and I/O timeouts failed
	// their tasks, issue 31).
	agentsRDB := st.sibling(rdb, agentStoreTimeout)
	st.Publications = demoagents.NewRedisLedger(agentsRDB)
	var agents http.Handler
	if cfg.FastAgents {
		agents = demoagents.FastHandler(url)
	} else {
		agents = demoagents.Handler(url, demoagents.Options{Publications: st.Publications, Redis: agentsRDB, StoreTimeout: agentStoreTimeout, Tracing: cfg.Tracing, Logger: log})
	}
	// This process serves the demo specialists, so its A2A client reaches
	// them in process: the same requests and answers without a socket
	// (pkg/inproc). Every other specialist is called over the network.
	cfg.AgentClient = inproc.Client(cfg.AgentClient, ln.Addr().String(), agentsPrefix, agents)
	agentURLs := append(demoagents.AgentURLs(url), cfg.Agents...)
	pcfg := toolenv.Config{Agents: agentURLs, MCP: cfg.MCP, Limits: limits, Prices: cfg.Prices, Audit: audit.Dir{Path: filepath.Join(cfg.DataDir, "audit")}, WorkflowsDir: cfg.WorkflowsDir, AgentClient: cfg.AgentClient, FileOrigins: cfg.FileOrigins, Files: cfg.Files.Limits, CardTTL: cfg.CardTTL, CatalogTTL: cfg.CatalogTTL, MCPFetchTimeout: cfg.MCPFetchTimeout, Logger: log}
	p, err := toolenv.New(pcfg, rdb, arts, model, invokeenv.Router(pcfg, arts))
	if err != nil {
		return nil, err
	}
	st.Platform = p
	if p.MCP != nil {
		st.stopMCP = p.MCP.Watch(p.Catalogs.Invalidate)
	}
	p.Handlers.Guardian = cfg.Guardian
	if cfg.Guardian != nil {
		st.guardian = cmp.Or(cfg.GuardianName, "on")
	}
	p.Handlers.Tracing = cfg.Tracing
	p.Handlers.StoreOutage = cfg.StoreOutage
	p.Handlers.CallLostAfter = cfg.CallLostAfter

	st.Redis = rdb
	// The engine (which on AWS is Step Functions itself) gets a client of
	// its own, as the demo agents do.
	engineRDB := st.sibling(rdb, 0)
	st.engineRDB = engineRDB
	if cfg.Retention <= 0 {
		cfg.Retention = time.Hour
	}
	// InvokeTimeout: as Lambda's function timeout, a step's context has a
	// deadline, so LLM and specialist calls end in time for their outcome
	// to be stored (turn.withMargin).
	st.engine = sfnlocal.New(sfnlocal.Options{Clock: cfg.Clock, Persist: &sfnlocal.RedisPersister{Client: engineRDB, Retention: cfg.Retention},
		InvokeTimeout: 15 * time.Minute, Logger: log})
	st.Engine = st.engine
	h := p.Handlers
	register := func(name string, f sfnlocal.Handler) {
		step := f
		if a := cfg.Procs; a != nil {
			step = func(ctx context.Context, payload json.RawMessage) (json.RawMessage, error) {
				defer a.Enter()()
				return f(ctx, payload)
			}
		}
		st.engine.RegisterFunction(functionNames[name], step)
	}
	register("LLMStepFunction", turnlambda.LLMStepOrEvent(h))
	register("ValidateFunction", turnlambda.JSON(h.Validate))
	register("AwaitFunction", turnlambda.JSON(h.Await))
	register("InvokeFunction", turnlambda.JSON(h.Invoke))
	register("AppendFunction", turnlambda.JSON(h.Append))
	// The turn is a STANDARD execution whose loop runs in EXPRESS children,
	// from the same two files the stack deploys.
	loopARN, err := st.engine.CreateStateMachineOfType("clientagent-loop", sfnlocal.TypeExpress, sfnlocal.Substitute(clientagent.LoopStateMachine, functionNames))
	if err != nil {
		return nil, fmt.Errorf("load the loop state machine: %w", err)
	}
	subs := maps.Clone(functionNames)
	subs["LoopStateMachine"] = loopARN
	smARN, err := st.engine.CreateStateMachine("clientagent-turn", sfnlocal.Substitute(clientagent.TurnStateMachine, subs))
	if err != nil {
		return nil, fmt.Errorf("load the turn state machine: %w", err)
	}
	st.StateMachineARN, st.LoopStateMachineARN = smARN, loopARN
	// As the stack's EventBridge rule does on AWS: a turn whose execution
	// ended abnormally without a step recording it is recorded as failed.
	st.engine.AddStatusRule(sfnlocal.StatusRule{StateMachineArn: smARN, Target: functionNames["LLMStepFunction"],
		Statuses: []string{sfnlocal.StatusFailed, sfnlocal.StatusTimedOut, sfnlocal.StatusAborted}})

	// The API calls the engine in process (sfnlocal.Client: the SDK
	// client's inputs, outputs and errors, without an HTTP request and its
	// signature per call). The stack serves no Step Functions endpoint, so
	// nothing but our API drives executions or answers task tokens.
	server := &api.Server{
		Store:           p.Store,
		Artifacts:       arts,
		Executions:      sfnlocal.Client{Engine: st.engine},
		StateMachineARN: smARN,
		Catalogs:        p.Catalogs,
		Auth:            st.auth,
		Limits:          limits,
		MaxUpload:       20 << 20,
		MaxText:         16000,
		Failures:        p.Handlers,
		Cancels:         p.Handlers,
		Events:          p.Store,
		Streams:         p.Store,
		MaxStreams:      cfg.MaxStreams,
		Tracing:         cfg.Tracing,
		Info:            &api.Info{Store: api.StoreInfo{Kind: info.Kind, Persistent: info.Persistent, Description: info.Description()}},
		Logger:          log,
	}
	if cfg.Live != nil {
		region := cmp.Or(cfg.Live.Region, "us-east-1")
		lctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		st.stopLive = stop
		pub := (&livepub.Publisher{Endpoint: cfg.Live.PublishURL(), Namespace: cfg.Live.Namespace, Owners: p.Store, Logger: log,
			Client: awssign.Client(nil, cfg.Live.Credentials, region, livepub.SigV4Service)}).Start(lctx)
		p.Handlers.Live, server.Live = pub, pub
		server.Info.Events = &api.EventsInfo{Delivery: "appsync", RealtimeURL: cfg.Live.RealtimeURL(), Host: cfg.Live.Host(),
			Namespace: cmp.Or(cfg.Live.Namespace, livepub.DefaultNamespace)}
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", server.Handler())
	mux.Handle("/files/", local.Handler())
	// clientagent itself as an A2A agent, a client of the same API.
	a2a := (&a2aserver.Server{API: server.Handler(), Auth: st.auth, Catalogs: p.Catalogs, Redis: rdb, Path: "/a2a", PublicURL: url, Streaming: true, Logger: log}).Handler()
	mux.Handle("/a2a", a2a)
	mux.Handle("/a2a/", a2a)
	mux.Handle("/.well-known/agent-card.json", a2a)
	mux.Handle(agentsPrefix, agents)
	mux.Handle("/", web.Handler())
	st.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := st.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server", "error", err)
		}
	}()
	if err := st.engine.Resume(ctx); err != nil {
		return nil, fmt.Errorf("resume waiting turns: %w", err)
	}
	ok = true
	return st, nil
}

// mcpStatus is one line on the MCP servers: each one's tools, or why it
// has none.
func (s *Stack) mcpStatus(ctx context.Context) string {
	caps, _ := s.Platform.MCP.Capabilities(ctx)
	tools, down := map[string]int{}, map[string]int{}
	for _, c := range caps {
		tools[c.MCPServer]++
		if c.Unavailable {
			down[c.MCPServer]++
		}
	}
	var parts []string
	for _, sc := range s.Platform.MCP.Servers() {
		n := tools[sc.Name]
		switch {
		case sc.Unusable != nil:
			parts = append(parts, sc.Name+" (not configured: its tools are unavailable; see the log)")
		case n == 0:
			parts = append(parts, sc.Name+" (not reachable yet: see the log)")
		case down[sc.Name] == n:
			parts = append(parts, fmt.Sprintf("%s (%d tools, unavailable: not reachable)", sc.Name, n))
		default:
			parts = append(parts, fmt.Sprintf("%s (%d tools)", sc.Name, n))
		}
	}
	return strings.Join(parts, ", ")
}

// agentsPrefix is the path under which the stack serves the demo agents
// (demoagents.AgentURLs).
const agentsPrefix = "/agents/"

// agentStoreTimeout is the dial and I/O timeout of the demo agents' Valkey client.
const agentStoreTimeout = 5 * time.Second

// sibling opens another client to the server rdb talks to, closed with the
// stack, with rdb's timeouts or, when timeout is set, that one.
func (s *Stack) sibling(rdb redis.UniversalClient, timeout time.Duration) redis.UniversalClient {
	c, ok := rdb.(*redis.Client)
	if !ok {
		return rdb
	}
	o := c.Options()
	dial, read, write := o.DialTimeout, o.ReadTimeout, o.WriteTimeout
	if timeout > 0 {
		dial, read, write = timeout, timeout, timeout
	}
	so := &redis.Options{Network: o.Network, Addr: o.Addr, DB: o.DB, Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig,
		DialTimeout: dial, ReadTimeout: read, WriteTimeout: write}
	so.Dialer = valkey.Dialer(so)
	sib := redis.NewClient(so)
	prev := s.closeRDB
	s.closeRDB = func() { sib.Close(); prev() }
	return sib
}

// URL is the base URL of the API and page.
func (s *Stack) URL() string { return s.url }

// Token mints a token for user.
func (s *Stack) Token(user string) (string, error) { return s.auth.Mint(user) }

// Close stops the server, the engine and the store; a second call does
// nothing.
func (s *Stack) Close() error {
	s.closeOnce.Do(s.close)
	return nil
}

func (s *Stack) close() {
	if s.srv != nil {
		// Requests in flight get a moment to finish; then the rest is
		// closed. (Shutdown alone waits up to 5 s for connections a client
		// dialled but never used, which Go's HTTP client leaves behind.)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := s.srv.Shutdown(ctx); err != nil {
			_ = s.srv.Close()
		}
		cancel()
	}
	if s.engine != nil {
		s.engine.Close()
	}
	if s.stopMCP != nil {
		s.stopMCP()
	}
	if s.stopLive != nil {
		s.stopLive()
	}
	if s.closeRDB != nil {
		s.closeRDB()
	}
}

// Banner is what `clientagent dev` prints at start.
func (s *Stack) Banner(model string) string {
	tok, _ := s.Token("dev")
	var b strings.Builder
	fmt.Fprintf(&b, "clientagent is running.\n")
	fmt.Fprintf(&b, "  web page:  %s/#token=%s\n", s.url, tok)
	fmt.Fprintf(&b, "  API:       %s/v1/\n", s.url)
	fmt.Fprintf(&b, "  A2A agent: %s/a2a (card: %s/.well-known/agent-card.json)\n", s.url, s.url)
	fmt.Fprintf(&b, "  model:     %s\n", model)
	fmt.Fprintf(&b, "  store:     %s\n", s.store.Description())
	fmt.Fprintf(&b, "  try:       Create a PNG image with the word Popelnase\n")
	// Building the catalog now shows a template that does not compile
	// against the skills at start, not at the first turn.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if cat, err := s.Platform.Catalogs.Catalog(ctx); err == nil {
		var ids []string
		for _, w := range cat.Workflows() {
			ids = append(ids, w.ID)
		}
		fmt.Fprintf(&b, "  workflows: %s (or: /workflow <id> [text])\n", strings.Join(ids, ", "))
		for _, err := range cat.WorkflowErrors() {
			fmt.Fprintf(&b, "  left out:  %v\n", err)
		}
	}
	if s.guardian != "" {
		fmt.Fprintf(&b, "  guardian:  %s\n", s.guardian)
	}
	if s.Platform.MCP != nil {
		fmt.Fprintf(&b, "  MCP:       %s\n", s.mcpStatus(ctx))
	}
	fmt.Fprintf(&b, "token for the user dev:\n%s\n", tok)
	return b.String()
}
