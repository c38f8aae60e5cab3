package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// main synthesizes the stack clientagent-<env> into cdk.out. Context comes
// from the CDK CLI (`cdk deploy -c env=prod --app "go run ."`) or, without
// the CLI, from `go run . -c env=prod -c jwtIssuer=…` arguments.
func main() {
	defer jsii.Close()
	args, err := ContextFromArgs(os.Args[1:])
	if err != nil {
		fail(err)
	}
	appProps := &awscdk.AppProps{Context: &args}
	if os.Getenv("CDK_OUTDIR") == "" {
		// Without the CLI, write where the CLI would (cdk deploy --app cdk.out).
		appProps.Outdir = jsii.String("cdk.out")
	}
	app := awscdk.NewApp(appProps)
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
	NewClientAgentStack(app, "clientagent-"+props.EnvName, props)
	app.Synth(nil)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "clientagent infra:", err)
	jsii.Close()
	os.Exit(2)
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

// Context keys the app reads (README.md lists them with their defaults).
const (
	CtxEnv                 = "env"
	CtxBinDir              = "binDir"
	CtxASLFile             = "aslFile"
	CtxJWTIssuer           = "jwtIssuer"
	CtxJWTAudience         = "jwtAudience"
	CtxWebOrigins          = "webOrigins"
	CtxLLM                 = "llm"
	CtxModel               = "model"
	CtxModelSmall          = "modelSmall"
	CtxModelLarge          = "modelLarge"
	CtxOpenAIBaseURL       = "openaiBaseUrl"
	CtxOpenAIKeySecretName = "openaiKeySecretName"
	CtxAgents              = "agents"
	CtxDemoAgents          = "demoAgents"
	CtxArtifactExpiryDays  = "artifactExpiryDays"
	CtxNATGateways         = "natGateways"
	CtxAwaitTimeout        = "awaitTimeout"
)

// PropsFromContext builds the stack's props from CDK context values (strings
// from the command line; cdk.json may also hold booleans, numbers, lists).
func PropsFromContext(get func(key string) any) (*StackProps, error) {
	str := func(k string) string {
		switch v := get(k).(type) {
		case nil:
			return ""
		case string:
			return strings.TrimSpace(v)
		default:
			return strings.TrimSpace(fmt.Sprint(v))
		}
	}
	list := func(k string) []string {
		var out []string
		if vs, ok := get(k).([]any); ok {
			for _, v := range vs {
				out = append(out, strings.TrimSpace(fmt.Sprint(v)))
			}
			return out
		}
		for _, f := range strings.Split(str(k), ",") {
			if f = strings.TrimSpace(f); f != "" {
				out = append(out, f)
			}
		}
		return out
	}
	num := func(k string) (int, error) {
		s := str(k)
		if s == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("context %s=%q: want a positive integer", k, s)
		}
		return n, nil
	}
	p := &StackProps{
		EnvName:             str(CtxEnv),
		BinDir:              str(CtxBinDir),
		ASLFile:             str(CtxASLFile),
		JWTIssuer:           str(CtxJWTIssuer),
		JWTAudience:         list(CtxJWTAudience),
		WebOrigins:          list(CtxWebOrigins),
		LLM:                 strings.ToLower(str(CtxLLM)),
		Model:               str(CtxModel),
		ModelSmall:          str(CtxModelSmall),
		ModelLarge:          str(CtxModelLarge),
		OpenAIBaseURL:       str(CtxOpenAIBaseURL),
		OpenAIKeySecretName: str(CtxOpenAIKeySecretName),
		Agents:              list(CtxAgents),
		DemoAgents:          true,
		AwaitTimeout:        str(CtxAwaitTimeout),
	}
	if s := str(CtxDemoAgents); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("context %s=%q: want true or false", CtxDemoAgents, s)
		}
		p.DemoAgents = b
	}
	var err error
	if p.ArtifactExpiryDays, err = num(CtxArtifactExpiryDays); err != nil {
		return nil, err
	}
	if p.NATGateways, err = num(CtxNATGateways); err != nil {
		return nil, err
	}
	d := p.withDefaults()
	return &d, nil
}
