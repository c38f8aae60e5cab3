// Package demoagents runs the demo specialists as real A2A servers
// (a2a-go, JSON-RPC): create_svg_artifact, convert_svg_to_png,
// design_valve_flange and publish_artifact. Each agent card carries the
// platform's skill-schema extension (catalog.ExtensionURI), so the
// orchestrator sees typed tools. The agents read input artifacts only
// through the file URIs they are sent and return produced files as A2A
// artifacts with inline bytes; they must not know about conversations,
// the artifact store or the LLM. Valkey, when given, only holds their own
// A2A tasks and publication ledger, so that several instances (Lambda)
// act as one server.
package demoagents

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"github.com/redis/go-redis/v9"

	"github.com/clientagent/clientagent/pkg/a2astore"
	"github.com/clientagent/clientagent/pkg/agents/netguard"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/lambdahttp"
	"github.com/clientagent/clientagent/pkg/telemetry"
)

// Options configures the demo specialists.
type Options struct {
	// HTTPClient fetches input files from FilePart URIs. Default: a client
	// with a 30 s timeout. Whatever the client, a fetch dials only public
	// addresses and FetchOrigins (pkg/agents/netguard, checked on the
	// address dialled, so names and redirects are covered): a nil or
	// *http.Transport gets the guarded dialing; another RoundTripper is
	// trusted to guard its own, and only the URL's text is checked.
	HTTPClient *http.Client
	// FetchOrigins are origins (scheme://host:port) input files may come
	// from although their address is not public. Default: the origin of
	// the public base URL given to Handler (the local stack serves its
	// artifact links there); never the rest of loopback.
	FetchOrigins []string
	// Publications records what publish_artifact published. Default:
	// NewRedisLedger(Redis) when Redis is set, else a new in-memory Ledger.
	Publications *Ledger
	// Redis, when set, keeps the A2A tasks in Valkey (pkg/a2astore), so
	// that a task continued after input-required may reach any instance.
	// Nil: a2a-go's in-memory task store, which keeps every task of the
	// process for its lifetime.
	Redis redis.UniversalClient
	// TaskTTL is how long a task stays in Valkey after its last change.
	// Default a2astore.DefaultTTL (24 h).
	TaskTTL time.Duration
	// StoreTimeout bounds each Valkey call of the task store (default
	// a2astore.DefaultTimeout).
	StoreTimeout time.Duration
	// MaxInputBytes bounds one fetched input file. Default 20 MiB.
	MaxInputBytes int64
	// Logger receives one line per task. Default slog.Default().
	Logger *slog.Logger
	// GuardianWord is the word the demo guardian (PathGuardian) blocks.
	// Default: $CLIENTAGENT_GUARDIAN_WORD, else DefaultGuardianWord.
	GuardianWord string
	// Tracing makes a server span of each A2A request, a child of the
	// caller's traceparent (nil: none), so a turn's trace shows the
	// specialist's side of each call.
	Tracing *telemetry.Tracing
}

// Agent paths under the handler; each is one A2A agent with one skill.
const (
	PathSVG     = "/agents/svg"
	PathPNG     = "/agents/png"
	PathFlange  = "/agents/flange"
	PathPublish = "/agents/publish"
)

var agentPaths = []string{PathSVG, PathPNG, PathFlange, PathPublish}

// AgentURLs lists the base URLs of the four demo agents under
// publicBaseURL; the agent card of each is at <url>/.well-known/agent-card.json.
func AgentURLs(publicBaseURL string) []string {
	base := strings.TrimRight(publicBaseURL, "/")
	out := make([]string, len(agentPaths))
	for i, p := range agentPaths {
		out[i] = base + p
	}
	return out
}

// Handler serves the demo agents: for each agent path P, the card at
// GET P/.well-known/agent-card.json and the JSON-RPC endpoint at POST P
// (and P/); plus GET /agents/publish/publications, the publication ledger
// as a JSON list, and the demo guardian at PathGuardian. publicBaseURL is the externally visible base of this
// handler (card.URL = publicBaseURL + P); when empty it is derived from
// each request's Host and X-Forwarded-Proto.
func Handler(publicBaseURL string, opts Options) http.Handler {
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if opts.FetchOrigins == nil && publicBaseURL != "" {
		opts.FetchOrigins = []string{publicBaseURL}
	}
	opts.HTTPClient = guarded(opts.HTTPClient, opts.FetchOrigins)
	if opts.Publications == nil {
		opts.Publications = NewMemoryLedger()
		if opts.Redis != nil {
			opts.Publications = NewRedisLedger(opts.Redis)
		}
	}
	if opts.MaxInputBytes <= 0 {
		opts.MaxInputBytes = 20 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	base := strings.TrimRight(publicBaseURL, "/")
	var handlerOpts []a2asrv.RequestHandlerOption
	if opts.Redis != nil {
		// One store for all four agents: task ids are unique across them.
		handlerOpts = append(handlerOpts, a2asrv.WithTaskStore(a2astore.New(opts.Redis, a2astore.Options{TTL: opts.TaskTTL, Timeout: opts.StoreTimeout})))
	}
	mux := http.NewServeMux()
	for _, sk := range skills(opts) {
		ex := &executor{skill: sk, opts: opts}
		rpc := opts.Tracing.Server(sk.path, a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(ex, handlerOpts...)))
		mux.Handle("POST "+sk.path, rpc)
		mux.Handle("POST "+sk.path+"/{$}", rpc)
		mux.Handle(sk.path+a2asrv.WellKnownAgentCardPath, cardHandler(base, sk))
	}
	// The guardian is served here but not listed by AgentURLs: not a tool.
	handleGuardian(mux, base, guardianWord(opts))
	mux.HandleFunc("GET "+PathPublish+"/publications", func(w http.ResponseWriter, r *http.Request) {
		list, err := opts.Publications.ListContext(r.Context())
		if err != nil {
			opts.Logger.Error("list publications", "error", err.Error())
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(list)
	})
	return mux
}

// guarded returns a copy of hc whose transport dials only public addresses
// and the allowed origins.
func guarded(hc *http.Client, allow []string) *http.Client {
	c := *hc
	switch tr := c.Transport.(type) {
	case nil:
		c.Transport = netguard.Transport(netguard.Options{Allow: allow})
	case *http.Transport:
		c.Transport = netguard.Transport(netguard.Options{Allow: allow, Base: tr})
	}
	return &c
}

// cardHandler serves the agent card of sk, built per request so that its
// URL follows the request when no public base URL is configured.
func cardHandler(base string, sk *skill) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		if r.Method == http.MethodOptions {
			w.Header().Set("Access-Control-Allow-Methods", "GET, OPTIONS")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		b := base
		if b == "" {
			b = lambdahttp.RequestBase(r)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(sk.card(b))
	})
}

// card builds the A2A agent card of the agent serving sk.
func (sk *skill) card(base string) *a2a.AgentCard {
	return &a2a.AgentCard{
		Name:               sk.agentName,
		Description:        sk.agentDescription,
		URL:                base + sk.path,
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		ProtocolVersion:    "0.3.0",
		Version:            "1.0.0",
		DefaultInputModes:  []string{"application/json", "text/plain"},
		DefaultOutputModes: sk.outputModes,
		Capabilities: a2a.AgentCapabilities{
			Extensions: []a2a.AgentExtension{{
				URI:         catalog.ExtensionURI,
				Description: "Input schemas, approval and user-input fields of this agent's skills.",
				Params: map[string]any{
					"skills": map[string]catalog.SkillExtension{sk.id: sk.ext},
				},
			}},
		},
		Skills: []a2a.AgentSkill{{
			ID:          sk.id,
			Name:        sk.name,
			Description: sk.description,
			Tags:        sk.tags,
			Examples:    sk.examples,
			InputModes:  []string{"application/json"},
			OutputModes: sk.outputModes,
		}},
	}
}
