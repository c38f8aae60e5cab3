// Command clientagent is the local stack and command-line client:
//
//	clientagent dev                 run everything on one machine (make run)
//	clientagent token --user NAME   print a token for NAME (last line of stdout)
//	clientagent chat                chat with a local or deployed API in the terminal
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/clientagent/clientagent/pkg/agents"
	"github.com/clientagent/clientagent/pkg/auth"
	"github.com/clientagent/clientagent/pkg/catalog"
	"github.com/clientagent/clientagent/pkg/chatcli"
	"github.com/clientagent/clientagent/pkg/demoagents"
	"github.com/clientagent/clientagent/pkg/devstack"
	"github.com/clientagent/clientagent/pkg/llm/llmconfig"
	"github.com/clientagent/clientagent/pkg/platform"
)

const usage = `usage:
  clientagent dev                      run the local stack (API, web page, engine, Valkey, demo agents)
  clientagent token --user NAME        print a token for another user of the local stack
  clientagent chat [--url URL] [--token TOKEN] [--out DIR]
                                       chat in the terminal (default: the local stack)
  clientagent workflows check DIR      compile the workflow templates in DIR against the
                                       specialists' skills (CLIENTAGENT_AGENTS, default the
                                       local stack's demo agents) and show their inputs
`

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
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
		return dev(dataDir, stdout)
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
				return fmt.Errorf("no --token given and no local stack key: %w", err)
			}
			*tok = t
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return chatcli.Run(ctx, chatcli.Options{BaseURL: *url, Token: *tok, In: stdin, Out: stdout, OutDir: *out, Conversation: *conv})
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

func dev(dataDir string, stdout io.Writer) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	model, modelName, err := llmconfig.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	limits, err := platform.LimitsFromEnv(os.Getenv)
	if err != nil {
		return err
	}
	st, err := devstack.Start(ctx, devstack.Config{
		Addr:         env("CLIENTAGENT_ADDR", "127.0.0.1:8080"),
		DataDir:      dataDir,
		ValkeyURL:    os.Getenv("VALKEY_URL"),
		LLM:          model,
		Agents:       agents.ParseAgentList(os.Getenv("CLIENTAGENT_AGENTS")),
		Limits:       limits,
		WorkflowsDir: os.Getenv("CLIENTAGENT_WORKFLOWS_DIR"),
		Logger:       slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, st.Banner(modelName))
	if os.Getenv("VALKEY_URL") == "" {
		fmt.Fprintln(stdout, "note: the embedded Valkey keeps conversations in memory only; set VALKEY_URL to keep them across restarts.")
	}
	<-ctx.Done()
	fmt.Fprintln(stdout, "\nshutting down…")
	return st.Close()
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
