// Command clientagent is the local stack and command-line client:
//
//	clientagent dev                 run everything on one machine (make run)
//	clientagent bench               time turns through a running stack's API (make bench-peers)
//	clientagent token --user NAME   print a token for NAME (last line of stdout)
//	clientagent chat                chat with a local or deployed API in the terminal
//	clientagent eval DIR            run eval scenarios through the API (docs/evals.md)
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/clientagent/clientagent/cmd/clientagent/internal/bench"
	"github.com/clientagent/clientagent/pkg/agentauth"
	"github.com/clientagent/clientagent/pkg/agents"
	"github.com/clientagent/clientagent/pkg/auth"
	"github.com/clientagent/clientagent/pkg/awsconfig/sharedconfig"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/chatcli"
	"github.com/clientagent/clientagent/pkg/demoagents"
	"github.com/clientagent/clientagent/pkg/devstack"
	"github.com/clientagent/clientagent/pkg/eval/evalcli"
	"github.com/clientagent/clientagent/pkg/guardian/guardianconfig"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/llmconfig"
	"github.com/clientagent/clientagent/pkg/mcp"
	"github.com/clientagent/clientagent/pkg/platform"
	"github.com/clientagent/clientagent/pkg/platform/mcpenv"
	"github.com/clientagent/clientagent/pkg/procs"
	"github.com/clientagent/clientagent/pkg/record/valkey"
	"github.com/clientagent/clientagent/pkg/record/valkey/localserver"
	"github.com/clientagent/clientagent/pkg/smoke"
	"github.com/clientagent/clientagent/pkg/telemetry"
)

const usage = `usage:
  clientagent dev [--fast-agents] [--cpuprofile FILE] [--memprofile FILE]
                                       run the local stack (API, web page, engine, Valkey, demo agents);
                                       --fast-agents (or CLIENTAGENT_FAST_AGENTS=1): the demo specialists
                                       answer at once with a tiny artifact and keep nothing (load runs);
                                       CLIENTAGENT_LOG_LEVEL=debug|info|warn|error (default info),
                                       CLIENTAGENT_LOG=FILE (logs to FILE instead of stderr),
                                       CLIENTAGENT_STORE=auto|server|embedded|memory (where conversations
                                       are kept when VALKEY_URL is not set; default auto: a valkey-server
                                       or redis-server on PATH, its data under .data, else the embedded one),
                                       CLIENTAGENT_MAX_STREAMS=N (event streams one user may hold open, default 10)
  clientagent bench [--url URL] [--token TOKEN] [--turns N] [--c C] [--watch=false --poll 5ms] [--after N] [--pid PID,…] [--valkey URL] [--cpuprofile FILE]
                                       run N Popelnase turns, C at a time, through the API and print
                                       p50/p99 ms, turns/s and the stack's memory as one JSON line
  clientagent smoke [--url URL | --env ENV] [--token TOKEN] [--origin ORIGIN]
                                       check a deployment end to end, one pass/fail line per step
                                       (default: the local stack)
  clientagent token --user NAME        print a token for another user of the local stack
  clientagent chat [--url URL] [--token TOKEN] [--out DIR]
                                       chat in the terminal (default: the local stack)
  clientagent workflows check DIR      compile the workflow templates in DIR against the
                                       specialists' skills (CLIENTAGENT_AGENTS, default the
                                       local stack's demo agents) and show their inputs
` + evalcli.Usage

func main() {
	sharedconfig.Use() // a person's AWS profiles, SSO and shared config files; the Lambda functions read their environment only
	if err := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr); errors.Is(err, flag.ErrHelp) {
		return // -h / --help: the usage was printed, as asked
	} else if err != nil {
		fmt.Fprintln(os.Stderr, "clientagent:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("no command")
	}
	dataDir := env("CLIENTAGENT_DATA", ".data")
	switch args[0] {
	case "dev":
		fs := flag.NewFlagSet("dev", flag.ContinueOnError)
		fast := fs.Bool("fast-agents", env("CLIENTAGENT_FAST_AGENTS", "") == "1", "demo specialists that answer at once with a tiny artifact (load runs; docs/benchmarks.md)")
		cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the stack to this file until it stops")
		memprofile := fs.String("memprofile", "", "write the stack's allocations (a heap profile) to this file when it stops")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return dev(dataDir, *fast, profiles{cpu: *cpuprofile, mem: *memprofile}, stdout)
	case "bench":
		return benchCmd(dataDir, args[1:], stdout)
	case "smoke":
		return smokeCmd(dataDir, args[1:], stdout)
	case "token":
		fs := flag.NewFlagSet("token", flag.ContinueOnError)
		user := fs.String("user", "dev", "the user (JWT subject)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return token(dataDir, *user, stdout)
	case "chat":
		fs := flag.NewFlagSet("chat", flag.ContinueOnError)
		url := fs.String("url", env("CLIENTAGENT_URL", "http://"+env("CLIENTAGENT_ADDR", "127.0.0.1:8080")), "the API's base URL")
		tok := fs.String("token", os.Getenv("CLIENTAGENT_TOKEN"), "a bearer token (default: minted for dev from the local stack's key)")
		out := fs.String("out", "artifacts", "where to save artifacts")
		conv := fs.String("conversation", "", "continue this conversation")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if *tok == "" {
			t, err := mint(dataDir, "dev")
			if err != nil {
				return fmt.Errorf("no --token given and no local stack key: %w (or pass --url and --token for another API)", err)
			}
			*tok = t
		}
		// Ctrl-C goes to the chat: it stops a running turn, or clears the
		// prompt's line; Ctrl-D or /exit leaves with status 0.
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		intr := make(chan os.Signal, 1)
		signal.Notify(intr, os.Interrupt)
		defer signal.Stop(intr)
		return chatcli.Run(ctx, chatcli.Options{BaseURL: *url, Token: *tok, In: stdin, Out: stdout, OutDir: *out, Conversation: *conv, Interrupt: intr})
	case "eval":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return evalcli.Run(ctx, args[1:], evalcli.Options{Stdout: stdout, Stderr: stderr, Getenv: os.Getenv})
	case "workflows":
		if len(args) != 3 || args[1] != "check" {
			fmt.Fprint(stderr, usage)
			return errors.New("usage: clientagent workflows check DIR")
		}
		agentURLs := agents.ParseAgentList(os.Getenv("CLIENTAGENT_AGENTS"))
		if len(agentURLs) == 0 {
			agentURLs = demoagents.AgentURLs(env("CLIENTAGENT_URL", "http://"+env("CLIENTAGENT_ADDR", "127.0.0.1:8080")))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return checkWorkflows(ctx, os.DirFS(args[2]), agentURLs, stdout)
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", args[0])
	}
}

// gcPercent is the collector's target for the local stack, unless GOGC
// says otherwise: a server whose live heap is a few tens of MB lets it
// grow to three times that (GOGC=200) before collecting, not twice (Go's
// default, 100), and spends less CPU per turn collecting
// (docs/benchmarks.md).
func gcPercent(getenv func(string) string) (int, bool) {
	if getenv("GOGC") != "" {
		return 0, false
	}
	return 200, true
}

// profileCPU writes a CPU profile of this process to path until the
// returned stop is called; with path empty it does nothing.
func profileCPU(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// profiles names the files dev writes its profiles to ("" for none).
type profiles struct{ cpu, mem string }

// profileMem writes this process's heap profile (every allocation since
// it started, and what is in use) to path when the returned stop is
// called; with path empty it does nothing.
func profileMem(path string) (stop func() error) {
	if path == "" {
		return func() error { return nil }
	}
	return func() error {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
}

func dev(dataDir string, fastAgents bool, prof profiles, stdout io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A sign of life at once: Valkey, the engine and the agents take a moment.
	fmt.Fprintln(stdout, "starting the local stack…")
	if p, ok := gcPercent(os.Getenv); ok {
		debug.SetGCPercent(p)
	}
	stopProfile, err := profileCPU(prof.cpu)
	if err != nil {
		return err
	}
	defer stopProfile()
	defer func() {
		if err := profileMem(prof.mem)(); err != nil {
			fmt.Fprintln(os.Stderr, "memprofile:", err)
		}
	}()
	model, modelName, err := llmconfig.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	limits, err := platform.LimitsFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(env("CLIENTAGENT_LOG_LEVEL", "info"))); err != nil {
		return fmt.Errorf("CLIENTAGENT_LOG_LEVEL: %w", err)
	}
	// CLIENTAGENT_LOG=FILE sends the logs there, so the banner's URL and
	// token stay on the screen.
	logOut := io.Writer(os.Stderr)
	if path := os.Getenv("CLIENTAGENT_LOG"); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("CLIENTAGENT_LOG: %w", err)
		}
		defer f.Close()
		logOut = f
	}
	logger := slog.New(slog.NewJSONHandler(logOut, &slog.HandlerOptions{Level: level}))
	start := devstack.Start
	if fastAgents {
		start = devstack.StartFast
	}
	prices, err := llm.LoadPrices(os.Getenv("CLIENTAGENT_PRICES"))
	if err != nil {
		return fmt.Errorf("CLIENTAGENT_PRICES: %w", err)
	}
	// The scripted demo model streams its replies a little slowly, so the
	// page shows them arriving (CLIENTAGENT_STREAM_DELAY, a Go duration).
	chunkDelay, err := time.ParseDuration(env("CLIENTAGENT_STREAM_DELAY", "40ms"))
	if err != nil {
		return fmt.Errorf("CLIENTAGENT_STREAM_DELAY: %w", err)
	}
	if fastAgents {
		chunkDelay = 0
	}
	// The event streams one user may hold open at once (default
	// api.DefaultMaxStreams: a few tabs); a load run that watches every
	// turn as the page does raises it.
	maxStreams := 0
	if v := os.Getenv("CLIENTAGENT_MAX_STREAMS"); v != "" {
		if maxStreams, err = strconv.Atoi(v); err != nil || maxStreams < 1 {
			return fmt.Errorf("CLIENTAGENT_MAX_STREAMS=%q: want a positive number", v)
		}
	}
	// The guardian (issue 19), e.g. the demo one:
	// CLIENTAGENT_GUARDIAN=a2a:http://127.0.0.1:8080/agents/guardian.
	guard, err := guardianconfig.FromEnv(ctx, os.Getenv, guardianconfig.Options{})
	if err != nil {
		return err
	}
	// Traces (issue 16): OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318
	// sends one trace per turn to any local OTLP/HTTP receiver.
	tracing, err := telemetry.FromEnv(ctx, os.Getenv, telemetry.Options{ServiceName: "clientagent-dev"})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tracing.Shutdown(sctx)
	}()
	// MCP servers whose tools are skills too (CLIENTAGENT_MCP: a JSON list
	// or a file; README "MCP servers").
	mcpServers, err := mcp.LoadConfig(os.Getenv)
	if err != nil {
		return err
	}
	// Headers naming a Secrets Manager secret are read now, with your AWS
	// credentials, as a Lambda function reads them at cold start. A server
	// whose secret cannot be read does not stop the stack: it is logged,
	// and its tools are unavailable (issue 28).
	secrets, err := mcpenv.Secrets(ctx, mcpServers)
	if err != nil {
		logger.WarnContext(ctx, "MCP secret headers cannot be read", "err", err)
	}
	rctx, cancel := context.WithTimeout(ctx, mcpSecretsTimeout)
	mcpServers = mcp.ResolveEach(rctx, mcpServers, secrets)
	cancel()
	for _, s := range mcpServers {
		if s.Unusable != nil {
			logger.WarnContext(ctx, "MCP server not configured: its tools are unavailable", "server", s.Name, "err", s.Unusable)
		}
	}
	// Specialists that want a token (another clientagent: its `clientagent
	// token`) get it from CLIENTAGENT_AGENT_TOKENS.
	agentClient, err := agentauth.ClientFromEnv(ctx, os.Getenv)
	if err != nil {
		return err
	}
	// Files of specialists on other local origins (another clientagent's
	// download links): CLIENTAGENT_FILE_ORIGINS, comma-separated.
	var fileOrigins []string
	for _, o := range strings.Split(os.Getenv("CLIENTAGENT_FILE_ORIGINS"), ",") {
		if o = strings.TrimRight(strings.TrimSpace(o), "/"); o != "" {
			fileOrigins = append(fileOrigins, o)
		}
	}
	// File bounds: CLIENTAGENT_CONVERSATION_QUOTA, CLIENTAGENT_MAX_FILE_SIZE,
	// CLIENTAGENT_FILE_TIMEOUT, CLIENTAGENT_FILE_MIN_RATE, CLIENTAGENT_FILE_RATE_WINDOW.
	files, err := platform.FilesFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	if files.Quota <= 0 {
		files.Quota = -1 // none, which devstack.Config writes as a negative quota
	}
	store, err := storeConfig(os.Getenv)
	if err != nil {
		return err
	}
	// One processor while the steps run one at a time (pkg/procs).
	adapter := procs.FromEnv(os.Getenv)
	defer adapter.Close()
	st, err := start(ctx, devstack.Config{
		ValkeyServer:    store.server,
		PersistEmbedded: store.persist,
		GuardianName:    os.Getenv("CLIENTAGENT_GUARDIAN"),
		Files:           files,
		FileOrigins:     fileOrigins,
		AgentClient:     agentClient,
		MCP:             mcpServers,
		Tracing:         tracing,
		Guardian:        guard,
		ChunkDelay:      chunkDelay,
		MaxStreams:      maxStreams,
		Prices:          prices,
		Addr:            env("CLIENTAGENT_ADDR", "127.0.0.1:8080"),
		DataDir:         dataDir,
		ValkeyURL:       os.Getenv("VALKEY_URL"),
		LLM:             model,
		Agents:          agents.ParseAgentList(os.Getenv("CLIENTAGENT_AGENTS")),
		Limits:          limits,
		WorkflowsDir:    os.Getenv("CLIENTAGENT_WORKFLOWS_DIR"),
		Procs:           adapter,
		Logger:          logger,
	})
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, st.Banner(modelName))
	if fastAgents {
		fmt.Fprintln(stdout, "fast agents: the demo specialists answer at once with a tiny artifact (load runs).")
	}
	if store.note != "" {
		fmt.Fprintln(stdout, store.note)
	}
	if path := os.Getenv("CLIENTAGENT_LOG"); path != "" {
		fmt.Fprintf(stdout, "logs: %s\n", path)
	} else {
		fmt.Fprintln(stdout, "logs follow on stderr (CLIENTAGENT_LOG=FILE keeps them off the screen).")
	}
	<-ctx.Done()
	fmt.Fprintln(stdout, "\nshutting down…")
	return st.Close()
}

// mcpSecretsTimeout bounds reading the MCP servers' secret headers at
// start: without AWS credentials the SDK may first try the EC2 metadata
// service.
const mcpSecretsTimeout = 10 * time.Second

// devStore is the store `clientagent dev` chooses.
type devStore struct {
	server  string // a valkey-server binary to run
	persist bool   // keep the embedded store in a snapshot
	note    string // a line for the banner, or ""
}

// storeConfig reads CLIENTAGENT_STORE: auto (the default) runs a
// valkey-server or redis-server found on PATH, else the embedded store
// kept in a snapshot; server insists on a server; embedded is the
// embedded store with its snapshot; memory the embedded store in memory
// only. VALKEY_URL wins over all of them.
func storeConfig(getenv func(string) string) (devStore, error) {
	if getenv("VALKEY_URL") != "" {
		return devStore{}, nil
	}
	mode := getenv("CLIENTAGENT_STORE")
	switch mode {
	case "", "auto":
		if bin := localserver.Find(); bin != "" {
			return devStore{server: bin}, nil
		}
		return devStore{persist: true, note: "note: no valkey-server or redis-server on PATH: the embedded Valkey is used (install one for a faster store)."}, nil
	case "server":
		bin := localserver.Find()
		if bin == "" {
			return devStore{}, fmt.Errorf("CLIENTAGENT_STORE=server: none of %s is on PATH", strings.Join(localserver.Binaries, ", "))
		}
		return devStore{server: bin}, nil
	case "embedded":
		return devStore{persist: true}, nil
	case "memory":
		return devStore{}, nil
	}
	return devStore{}, fmt.Errorf("CLIENTAGENT_STORE=%q: want auto, server, embedded or memory", mode)
}

// benchCmd runs `clientagent bench`: turns through a running stack's API,
// one JSON line of figures on stdout (the peers' format, docs/benchmarks.md).
func benchCmd(dataDir string, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	url := fs.String("url", env("CLIENTAGENT_URL", "http://"+env("CLIENTAGENT_ADDR", "127.0.0.1:8080")), "the API's base URL")
	tok := fs.String("token", os.Getenv("CLIENTAGENT_TOKEN"), "a bearer token (default: minted for the user bench from the local stack's key)")
	turns := fs.Int("turns", 200, "timed turns")
	conc := fs.Int("c", 1, "turns at once (rounds of C, as the peers run them)")
	warmup := fs.Int("warmup", 5, "untimed turns first, one at a time")
	watch := fs.Bool("watch", true, "time each turn as the page sees it: its event stream opened before the POST, closed at turn.ended (false: poll the turn)")
	poll := fs.Duration("poll", 5*time.Millisecond, "with -watch=false, how often a running turn is read")
	after := fs.Int("after", 0, "then this many turns one at a time on the same stack (c=1 after the burst)")
	pids := fs.String("pid", "", "the stack's process ids, comma-separated (a Valkey server's too), for their memory and CPU time")
	text := fs.String("text", bench.DefaultText, "the user message of every turn")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the driver itself to this file")
	valkeyURL := fs.String("valkey", "", "the stack's Valkey (redis://… or unix://…), whose commands and script time per turn the report gives")
	if err := fs.Parse(args); err != nil {
		return err
	}
	stopProfile, err := profileCPU(*cpuprofile)
	if err != nil {
		return err
	}
	defer stopProfile()
	var pidList []int
	for p := range strings.SplitSeq(*pids, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		n, err := strconv.Atoi(p)
		if err != nil {
			return fmt.Errorf("-pid: %q is not a process id", p)
		}
		pidList = append(pidList, n)
	}
	if *tok == "" {
		t, err := mint(dataDir, "bench")
		if err != nil {
			return fmt.Errorf("no --token given and no local stack key: %w", err)
		}
		*tok = t
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := bench.Options{BaseURL: *url, Token: *tok, Turns: *turns, Concurrency: *conc, Warmup: *warmup, Watch: *watch, Poll: *poll, After: *after, PIDs: pidList, Text: *text}
	if *valkeyURL != "" {
		c, closeStore, err := valkey.Open(ctx, *valkeyURL)
		if err != nil {
			return fmt.Errorf("-valkey: %w", err)
		}
		defer closeStore()
		opts.StoreStats = func(ctx context.Context) (string, error) { return c.Info(ctx, "commandstats").Result() }
	}
	r, err := bench.Run(ctx, opts)
	if r != nil {
		if err := json.NewEncoder(stdout).Encode(r); err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}
	if r.Failed > 0 {
		return fmt.Errorf("%d of %d turns failed; the first: %s", r.Failed, r.Turns, r.FirstError)
	}
	return nil
}

// checkWorkflows loads the templates of fsys and compiles them against the
// skills of the agents at agentURLs, printing each workflow's inputs (its
// tool's parameters) or why it does not compile.
func checkWorkflows(ctx context.Context, fsys fs.FS, agentURLs []string, out io.Writer) error {
	wfs, err := catalog.LoadWorkflows(fsys, ".")
	if err != nil {
		return err
	}
	caps, err := agents.NewRegistry(agents.RegistryOptions{URLs: agentURLs, Logger: slog.New(slog.DiscardHandler)}).Capabilities(ctx)
	if err != nil {
		return fmt.Errorf("read the specialists' skills: %w", err)
	}
	if len(caps) == 0 {
		return fmt.Errorf("no skills at %s: is the local stack (make run) or CLIENTAGENT_AGENTS up?", strings.Join(agentURLs, ", "))
	}
	cat := catalog.New(caps, wfs)
	for _, w := range cat.Workflows() {
		fmt.Fprintf(out, "ok    %s (%s)\n", w.ID, catalog.WorkflowToolName(w.ID))
		for _, in := range w.Inputs {
			flags := ""
			if in.UserInput {
				flags += " [user input]"
			}
			if in.ArtifactRef {
				flags += " [artifact]"
			}
			fmt.Fprintf(out, "        %s: %s%s  %s\n", in.Path, in.Type, flags, in.Description)
		}
	}
	errs := cat.WorkflowErrors()
	for _, err := range errs {
		fmt.Fprintf(out, "error %v\n", err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d workflow templates do not compile", len(errs), len(wfs))
	}
	return nil
}

func mint(dataDir, user string) (string, error) {
	keyPath := filepath.Join(dataDir, "signing.key")
	if _, err := os.Stat(keyPath); err != nil {
		return "", fmt.Errorf("%s not found: start the local stack (make run) from this directory first", keyPath)
	}
	key, err := auth.LoadOrCreateKey(keyPath)
	if err != nil {
		return "", err
	}
	return (&auth.Local{Key: key}).Mint(user)
}

func token(dataDir, user string, stdout io.Writer) error {
	t, err := mint(dataDir, user)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, t)
	return nil
}

func env(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// smokeCmd checks a deployment end to end (pkg/smoke): -url and -token, or
// -env ENV reading the API URL from cdk.out/outputs-ENV.json (the token
// still comes from -token or CLIENTAGENT_TOKEN); without either, the
// local stack with a token minted from its key.
func smokeCmd(dataDir string, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("smoke", flag.ContinueOnError)
	url := fs.String("url", os.Getenv("CLIENTAGENT_URL"), "the API's base URL")
	tok := fs.String("token", os.Getenv("CLIENTAGENT_TOKEN"), "a bearer token")
	envName := fs.String("env", "", "read the API URL from cdk.out/outputs-ENV.json (make deploy writes it)")
	origin := fs.String("origin", "", "the web page's origin, for the CORS checks (e.g. https://chat.example.com)")
	timeout := fs.Duration("turn-timeout", 2*time.Minute, "how long one turn may take")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *envName != "" && *url == "" {
		b, err := os.ReadFile(filepath.Join("cdk.out", "outputs-"+*envName+".json"))
		if err != nil {
			return fmt.Errorf("smoke -env %s: %w (run make deploy ENV=%s first, or pass -url)", *envName, err, *envName)
		}
		var outputs map[string]map[string]string
		if err := json.Unmarshal(b, &outputs); err != nil {
			return fmt.Errorf("smoke -env %s: %w", *envName, err)
		}
		*url = outputs["clientagent-"+*envName]["ApiUrl"]
	}
	if *url == "" {
		*url = "http://" + env("CLIENTAGENT_ADDR", "127.0.0.1:8080")
	}
	if *tok == "" {
		t, err := mint(dataDir, "dev")
		if err != nil {
			return fmt.Errorf("no -token given and no local stack key: %w", err)
		}
		*tok = t
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stdout, "smoke check of %s\n", *url)
	_, err := smoke.Run(ctx, smoke.Config{URL: *url, Token: *tok, Origin: *origin, TurnTimeout: *timeout, Out: stdout})
	return err
}
