// Package evalcli is the `clientagent eval` command: it reads its flags,
// starts a local stack in process (or takes --url of a deployment), runs
// the scenarios with pkg/eval and prints the table and the JSON report.
// The harness's logic lives in pkg/eval; this package only wires it.
package evalcli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/clientagent/clientagent/pkg/agents"
	"github.com/clientagent/clientagent/pkg/devstack"
	"github.com/clientagent/clientagent/pkg/eval"
	"github.com/clientagent/clientagent/pkg/guardian/guardianconfig"
	"github.com/clientagent/clientagent/pkg/llm"
	"github.com/clientagent/clientagent/pkg/llm/llmconfig"
	"github.com/clientagent/clientagent/pkg/platform"
)

// Usage is the command's line in `clientagent`'s usage.
const Usage = `  clientagent eval [--model ID] [--url URL --token TOKEN] [--repeat N] [--min-pass 1.0]
                   [--json FILE] [--parallel N] FILE|DIR
                                       run scenario files (docs/evals.md) through the API of a local
                                       stack started in process (the configured model; --model sets
                                       CLIENTAGENT_MODEL) or of --url; a table of pass/fail with the
                                       reasons, LLM calls, tokens, cost and latency; exit status 1
                                       when the pass rate is below --min-pass
`

// ErrBelowMinPass is returned when the pass rate is below --min-pass.
var ErrBelowMinPass = errors.New("pass rate below --min-pass")

// Options are the command's inputs besides its flags.
type Options struct {
	Stdout, Stderr io.Writer
	// Getenv reads the environment (CLIENTAGENT_MODEL, CLIENTAGENT_LLM,
	// CLIENTAGENT_TOKEN, the limits, …).
	Getenv func(string) string
}

// Run runs `clientagent eval` with args (after "eval"). It returns
// ErrBelowMinPass (wrapped) when the runs pass too rarely, and other errors
// for bad flags, unreadable scenarios or a stack that does not start.
func Run(ctx context.Context, args []string, o Options) error {
	fs := flag.NewFlagSet("eval", flag.ContinueOnError)
	fs.SetOutput(o.Stderr)
	model := fs.String("model", "", "the model id (sets CLIENTAGENT_MODEL for the local stack)")
	url := fs.String("url", "", "the API of a running deployment (default: a local stack started in process)")
	tok := fs.String("token", "", "a bearer token for --url (default CLIENTAGENT_TOKEN)")
	repeat := fs.Int("repeat", 1, "runs of each scenario (pass rate and latency spread per scenario)")
	minPass := fs.Float64("min-pass", 1.0, "the least pass rate (0–1) that exits with status 0")
	jsonOut := fs.String("json", "", "write the JSON report to this file (- for stdout, after the table)")
	parallel := fs.Int("parallel", 1, "runs at once")
	turnTimeout := fs.Duration("turn-timeout", 2*time.Minute, "how long a turn may take when its scenario sets no timeout")
	keep := fs.Bool("keep", false, "keep the conversations of the runs (default: deleted once checked)")
	fs.Usage = func() { fmt.Fprint(o.Stderr, "usage:\n"+Usage) }
	paths, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(paths) != 1 {
		fs.Usage()
		return errors.New("eval: give one scenario file or folder")
	}
	if *repeat < 1 || *parallel < 1 {
		return errors.New("eval: --repeat and --parallel must be at least 1")
	}
	if *minPass < 0 || *minPass > 1 {
		return errors.New("eval: --min-pass is a rate between 0 and 1")
	}
	scenarios, err := eval.Load(paths[0])
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if *model != "" {
		getenv = override(getenv, "CLIENTAGENT_MODEL", *model)
	}

	client := &eval.Client{BaseURL: *url, Token: *tok}
	modelName := ""
	if *url == "" {
		st, name, dir, err := startLocal(ctx, getenv, o.Stderr)
		if err != nil {
			return fmt.Errorf("eval: start the local stack: %w", err)
		}
		defer os.RemoveAll(dir)
		defer st.Close()
		client.BaseURL, modelName = st.URL(), name
		if client.Token, err = st.Token("eval"); err != nil {
			return fmt.Errorf("eval: %w", err)
		}
	} else if client.Token == "" {
		client.Token = getenv("CLIENTAGENT_TOKEN")
		if client.Token == "" {
			return errors.New("eval: --url needs --token (or CLIENTAGENT_TOKEN)")
		}
	}

	if err := client.Ping(ctx); err != nil {
		return fmt.Errorf("eval: the API at %s: %w", client.BaseURL, err)
	}
	fmt.Fprintf(o.Stdout, "eval: %d scenarios × %d against %s\n\n", len(scenarios), *repeat, orDefault(modelName, client.BaseURL))
	r := &eval.Runner{Client: client, TurnTimeout: *turnTimeout, KeepConversations: *keep}
	results := r.RunAll(ctx, scenarios, *repeat, *parallel)
	rep := eval.Summarize(scenarios, results, *minPass)
	rep.Model = modelName
	if *url != "" {
		rep.URL = *url
	}
	if err := rep.WriteTable(o.Stdout); err != nil {
		return err
	}
	if *jsonOut != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		b = append(b, '\n')
		if *jsonOut == "-" {
			_, err = o.Stdout.Write(b)
		} else {
			err = os.WriteFile(*jsonOut, b, 0o644)
		}
		if err != nil {
			return fmt.Errorf("eval: write the JSON report: %w", err)
		}
	}
	if !rep.OK {
		return fmt.Errorf("eval: %d of %d runs passed (%.1f%%, min %.1f%%): %w", rep.Passed, rep.Runs, 100*rep.PassRate, 100*rep.MinPass, ErrBelowMinPass)
	}
	return nil
}

// startLocal starts a local stack on a free port with a fresh data folder
// and the model the environment configures, as `clientagent dev` does but
// without streaming delays. The caller closes the stack and removes dir.
func startLocal(ctx context.Context, getenv func(string) string, stderr io.Writer) (st *devstack.Stack, modelName, dir string, err error) {
	model, modelName, err := llmconfig.FromEnv(getenv)
	if err != nil {
		return nil, "", "", err
	}
	limits, err := platform.LimitsFromEnv(getenv)
	if err != nil {
		return nil, "", "", err
	}
	prices, err := llm.LoadPrices(getenv("CLIENTAGENT_PRICES"))
	if err != nil {
		return nil, "", "", fmt.Errorf("CLIENTAGENT_PRICES: %w", err)
	}
	// The guardian the environment chooses (CLIENTAGENT_GUARDIAN), as in
	// `clientagent dev`: scenarios may expect a turn to be blocked.
	guard, err := guardianconfig.FromEnv(ctx, getenv, guardianconfig.Options{})
	if err != nil {
		return nil, "", "", err
	}
	dir, err = os.MkdirTemp("", "clientagent-eval-")
	if err != nil {
		return nil, "", "", err
	}
	st, err = devstack.Start(ctx, devstack.Config{
		Addr:         "127.0.0.1:0",
		DataDir:      dir,
		LLM:          model,
		LLMName:      modelName,
		Agents:       agents.ParseAgentList(getenv("CLIENTAGENT_AGENTS")),
		Limits:       limits,
		Prices:       prices,
		Guardian:     guard,
		WorkflowsDir: getenv("CLIENTAGENT_WORKFLOWS_DIR"),
		Logger:       slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, "", "", err
	}
	return st, modelName, dir, nil
}

// parseInterspersed parses flags before and after the positional
// arguments (`eval testdata/evals --repeat 3` works too).
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func override(getenv func(string) string, key, value string) func(string) string {
	return func(k string) string {
		if k == key {
			return value
		}
		return getenv(k)
	}
}

func orDefault(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return s
}
