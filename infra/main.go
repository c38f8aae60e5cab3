package main

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// main synthesizes the stacks clientagent-<env>-data and clientagent-<env>
// (NewDeployment). It runs in infra/, started
// by the CDK CLI from the repository root (cdk.json: "cd infra && go run .")
// or by `make synth` (`go run . -c env=prod …`, no CLI).
//
// Both read the same settings: the context of the root cdk.json, then
// `-c key=value` arguments (the CLI passes its own context, cdk.json's
// included, which wins over both). Both write the cloud assembly to the same
// place: CDK_OUTDIR when set, else cdk.out, a relative path being relative to
// the repository root, where the CLI looks for it.
func main() {
	defer jsii.Close()
	root, err := repoRoot()
	if err != nil {
		fail(err)
	}
	ctx := map[string]any{}
	if root != "" {
		if ctx, err = ReadCDKJSONContext(filepath.Join(root, "cdk.json")); err != nil {
			fail(err)
		}
	} else {
		root = "."
	}
	args, err := ContextFromArgs(os.Args[1:])
	if err != nil {
		fail(err)
	}
	maps.Copy(ctx, args)
	app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(OutDir(root, os.Getenv("CDK_OUTDIR")))})
	props, err := PropsFromContext(func(key string) any { return app.Node().TryGetContext(jsii.String(key)) })
	if err != nil {
		fail(err)
	}
	if err := props.Validate(); err != nil {
		fail(err)
	}
	// The CLI sets these from the profile; without them the stack is
	// environment-agnostic (fine for synth, and for deploy to the CLI's default).
	if account, region := os.Getenv("CDK_DEFAULT_ACCOUNT"), os.Getenv("CDK_DEFAULT_REGION"); account != "" && region != "" {
		props.Env = &awscdk.Environment{Account: jsii.String(account), Region: jsii.String(region)}
	}
	NewDeployment(app, props)
	app.Synth(nil)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "clientagent infra:", err)
	jsii.Close()
	os.Exit(2)
}

// repoRoot returns the directory of the repository's cdk.json relative to
// the working directory (infra/ or the root), or "" when there is none.
func repoRoot() (string, error) {
	for _, dir := range []string{"..", "."} {
		_, err := os.Stat(filepath.Join(dir, "cdk.json"))
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("look for cdk.json: %w", err)
		}
	}
	return "", nil
}

// OutDir is where the cloud assembly goes: outdirEnv (CDK_OUTDIR) or
// "cdk.out", relative paths taken from root. The CLI passes CDK_OUTDIR as it
// was configured (relative to where it runs: the root), while this program
// runs in infra/.
func OutDir(root, outdirEnv string) string {
	out := strings.TrimSpace(outdirEnv)
	if out == "" {
		out = "cdk.out"
	}
	if !filepath.IsAbs(out) {
		out = filepath.Join(root, out)
	}
	return out
}

// ContextFromArgs reads `-c key=value` (or `--context key=value`) pairs.
func ContextFromArgs(args []string) (map[string]any, error) {
	ctx := map[string]any{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a != "-c" && a != "--context" {
			return nil, fmt.Errorf("argument %q: want -c key=value", a)
		}
		if i+1 == len(args) {
			return nil, fmt.Errorf("%s needs key=value", a)
		}
		i++
		k, v, ok := strings.Cut(args[i], "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("context %q: want key=value", args[i])
		}
		ctx[k] = v
	}
	return ctx, nil
}
