package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
	"github.com/google/go-cmp/cmp"
)

// The tests synthesize the stacks (no AWS account needed) and read the
// CloudFormation templates. Each configuration is synthesized once and
// shared: one synthesis costs seconds of node time. Most tests read both
// stacks as one template with the app stack's imports resolved to what the
// data stack exports (merged), so a reference reads the same whichever
// stack holds its target; the tests of the split read each stack alone.

const (
	testIssuer = "https://issuer.example.com/"
	testOrigin = "https://chat.example.com"
	aslPath    = "../statemachine/turn.asl.json"
	loopPath   = "../statemachine/loop.asl.json"
)

// testBinDir holds the dummy bootstraps; synthRoot holds every synthesis's
// cloud assembly. TestMain removes both.
var testBinDir, synthRoot string

func TestMain(m *testing.M) {
	if _, err := exec.LookPath("node"); err != nil {
		fmt.Fprintln(os.Stderr, "the infra tests need Node.js 20+ on PATH: jsii runs the CDK's JavaScript in node:", err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "clientagent-infra-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Dummy bootstraps, each with its own content so that a test can tell
	// which directory an asset came from.
	for _, name := range append(functionNames(), FnDemoAgents) {
		err := os.MkdirAll(filepath.Join(dir, name), 0o755)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name, "bootstrap"), []byte("#!/bin/sh\n# fake "+name+"\n"), 0o755)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	testBinDir = dir
	if synthRoot, err = os.MkdirTemp("", "clientagent-cdk-out-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	jsii.Close()
	os.RemoveAll(dir)
	os.RemoveAll(synthRoot)
	os.Exit(code)
}

// synthesized is one configuration's synthesized stacks.
type synthesized struct {
	props StackProps
	// tpl and json are both stacks' resources and outputs as one template,
	// every Fn::ImportValue of the app stack replaced by the value the data
	// stack exports under that name.
	tpl  assertions.Template
	json map[string]any
	// app and data are each stack's own template.
	app, data map[string]any
	// dataProtected is the data stack's termination protection.
	dataProtected bool
	assembly      string // cloud assembly directory (cdk.out)
	// warnings are both stacks' warning annotations (id: message).
	warnings []string
	// nagErrors are cdk-nag's AwsSolutions findings of error level that no
	// suppression covers (TestCDKNag).
	nagErrors []string
}

func baseProps() StackProps {
	return StackProps{
		EnvName:            "test",
		BinDir:             testBinDir,
		ASLFile:            aslPath,
		JWTIssuer:          testIssuer,
		JWTAudience:        []string{"clientagent-web", "clientagent-cli"},
		WebOrigins:         []string{testOrigin},
		DemoAgents:         true,
		ArtifactExpiryDays: 14,
	}
}

var configs = map[string]func() StackProps{
	// The default: Bedrock, demo specialists.
	"bedrock": baseProps,
	// An OpenAI-compatible model, no demo specialists, external agents.
	"openai": func() StackProps {
		p := baseProps()
		p.LLM = LLMOpenAI
		p.Model = "gpt-4o-mini"
		p.OpenAIBaseURL = "https://llm.example.com/v1"
		p.DemoAgents = false
		p.Agents = []string{"https://a.example.com/agents/x", "https://b.example.com"}
		p.WorkflowsDir = filepath.Join("..", "testdata", "workflows")
		p.ConversationQuota, p.MaxFileSize, p.FileTimeout, p.FileMinRate, p.FileRateWindow = "500MiB", "64MiB", "90s", "16KiB", "20s"
		return p
	},
}

// fromCDKJSON is the repository's cdk.json configuration of an environment,
// as `make synth ENV=env` reads it, with the test's inputs and extra context.
func fromCDKJSON(env string, extra map[string]any) func() StackProps {
	return func() StackProps {
		ctx, err := ReadCDKJSONContext(filepath.Join("..", "cdk.json"))
		if err != nil {
			panic(err)
		}
		ctx[CtxEnv], ctx[CtxBinDir], ctx[CtxASLFile] = env, testBinDir, aslPath
		if env != "dev" {
			// As every real staging or prod deployment must (Validate).
			ctx[CtxAlarmEmail] = "ops@example.com"
		}
		maps.Copy(ctx, extra)
		p, err := PropsFromContext(func(k string) any { return ctx[k] })
		if err != nil {
			panic(err)
		}
		return *p
	}
}

func init() {
	// Without jwtIssuer: the stack creates the Cognito user pool.
	configs["dev"] = fromCDKJSON("dev", nil)
	configs["prod"] = fromCDKJSON("prod", map[string]any{CtxAlarmEmail: "ops@example.com", CtxLLM: "openai"})
}

var (
	synthMu    sync.Mutex
	synthCache = map[string]*synthesized{}
)

// synth returns the shared synthesis of a configuration.
func synth(t *testing.T, config string) *synthesized {
	t.Helper()
	synthMu.Lock()
	defer synthMu.Unlock()
	if s, ok := synthCache[config]; ok {
		return s
	}
	props := configs[config]()
	outdir, err := os.MkdirTemp(synthRoot, config+"-")
	if err != nil {
		t.Fatal(err)
	}
	var s *synthesized
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("synth %s: %v", config, r)
			}
		}()
		var err error
		if s, err = synthesize(props, outdir); err != nil {
			t.Fatalf("synth %s: %v", config, err)
		}
	}()
	synthCache[config] = s
	return s
}

// synthesize defines a deployment of props in a new app writing to outdir
// and reads its templates. The caller holds synthMu.
func synthesize(props StackProps, outdir string) (*synthesized, error) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(outdir), Context: featureFlags()})
	p := props
	dep := NewDeployment(app, &p)
	// cdk-nag's AwsSolutions pack checks every resource at synthesis.
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Reports: jsii.Bool(false)}), nil)
	appTpl := *assertions.Template_FromStack(dep.App, nil).ToJSON()
	dataTpl := *assertions.Template_FromStack(dep.Data, nil).ToJSON()
	asm := app.Synth(nil)
	merged, err := mergeTemplates(dataTpl, appTpl)
	if err != nil {
		return nil, err
	}
	protected := dep.Data.TerminationProtection() != nil && *dep.Data.TerminationProtection()
	warnings, nagErrors, err := assemblyMessages(*asm.Directory())
	if err != nil {
		return nil, err
	}
	return &synthesized{
		props: props.withDefaults(), tpl: assertions.Template_FromJSON(&merged, nil), json: merged,
		app: appTpl, data: dataTpl, dataProtected: protected, assembly: *asm.Directory(), warnings: warnings, nagErrors: nagErrors,
	}, nil
}

// assemblyMessages reads the warnings of every stack in a cloud assembly
// and its errors of cdk-nag's AwsSolutions pack, from the stacks'
// <stack>.metadata.json (construct path → entries).
func assemblyMessages(dir string) (warnings, nagErrors []string, err error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.metadata.json"))
	if err != nil || len(files) == 0 {
		return nil, nil, fmt.Errorf("no stack metadata in %s (%v)", dir, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, err
		}
		var meta map[string][]struct {
			Type string `json:"type"`
			Data any    `json:"data"`
		}
		if err := json.Unmarshal(b, &meta); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f, err)
		}
		for path, entries := range meta {
			for _, e := range entries {
				msg := fmt.Sprint(e.Data)
				switch {
				case e.Type == "aws:cdk:warning":
					warnings = append(warnings, msg)
				case e.Type == "aws:cdk:error" && strings.HasPrefix(msg, "AwsSolutions-"):
					nagErrors = append(nagErrors, path+": "+msg)
				}
			}
		}
	}
	return warnings, nagErrors, nil
}

// featureFlags are the CDK feature flags of the repository's cdk.json, so
// that the tests synthesize what `make synth` and the CDK CLI do.
func featureFlags() *map[string]any {
	ctx, err := ReadCDKJSONContext(filepath.Join("..", "cdk.json"))
	if err != nil {
		panic(err)
	}
	flags := map[string]any{}
	for k, v := range ctx {
		if strings.HasPrefix(k, "@") {
			flags[k] = v
		}
	}
	return &flags
}

// mergeTemplates returns the resources and outputs of both templates as
// one, with each Fn::ImportValue in app replaced by the value that data
// exports under its name. A logical id in both, or an import that data does
// not export, is an error.
func mergeTemplates(data, app map[string]any) (map[string]any, error) {
	exports := map[string]any{}
	outputs := map[string]any{}
	for name, o := range asMap(data["Outputs"]) {
		om := asMap(o)
		if e, ok := asMap(om["Export"])["Name"].(string); ok {
			exports[e] = om["Value"]
		}
		outputs[name] = o
	}
	var missing []string
	var resolve func(v any) any
	resolve = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			if name, ok := x["Fn::ImportValue"].(string); ok && len(x) == 1 {
				if val, ok := exports[name]; ok {
					return val
				}
				missing = append(missing, name)
			}
			// A weak reference (the default of cdk.json's feature flags):
			// the data stack's output, read at deploy time.
			if ref, ok := x["Fn::GetStackOutput"].(map[string]any); ok && len(x) == 1 {
				name, _ := ref["OutputName"].(string)
				if o, ok := asMap(data["Outputs"])[name]; ok {
					return asMap(o)["Value"]
				}
				missing = append(missing, name)
			}
			out := make(map[string]any, len(x))
			for k, e := range x {
				out[k] = resolve(e)
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = resolve(e)
			}
			return out
		}
		return v
	}
	resources := maps.Clone(asMap(data["Resources"]))
	for id, r := range asMap(app["Resources"]) {
		if _, ok := resources[id]; ok {
			return nil, fmt.Errorf("logical id %s in both stacks", id)
		}
		resources[id] = resolve(r)
	}
	for name, o := range asMap(app["Outputs"]) {
		if _, ok := outputs[name]; ok {
			return nil, fmt.Errorf("output %s in both stacks", name)
		}
		outputs[name] = resolve(o)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("the app stack imports %v, which the data stack does not export", missing)
	}
	return map[string]any{"Resources": resources, "Outputs": outputs}, nil
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// assertTemplate runs an assertions.Template check, which panics on failure.
func assertTemplate(t *testing.T, what string, check func()) {
	t.Helper()
	// jsii-runtime-go's channel to node is not safe for concurrent calls.
	synthMu.Lock()
	defer synthMu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	check()
}

// resources returns the logical ids and properties of every resource of a type.
func (s *synthesized) resources(typ string) map[string]map[string]any {
	out := map[string]map[string]any{}
	for id, r := range s.json["Resources"].(map[string]any) {
		rm := r.(map[string]any)
		if rm["Type"] == typ {
			props, _ := rm["Properties"].(map[string]any)
			out[id] = props
		}
	}
	return out
}

// one returns the single resource of a type.
func (s *synthesized) one(t *testing.T, typ string) (string, map[string]any) {
	t.Helper()
	rs := s.resources(typ)
	if len(rs) != 1 {
		t.Fatalf("%d resources of type %s, want 1", len(rs), typ)
	}
	for id, p := range rs {
		return id, p
	}
	return "", nil
}

// turnMachine returns the turn's STANDARD state machine, loopMachine its
// EXPRESS loop: the stack's two state machines.
func (s *synthesized) turnMachine(t *testing.T) (string, map[string]any) {
	t.Helper()
	return s.machineOfType(t, "STANDARD")
}

func (s *synthesized) loopMachine(t *testing.T) (string, map[string]any) {
	t.Helper()
	return s.machineOfType(t, "EXPRESS")
}

func (s *synthesized) machineOfType(t *testing.T, typ string) (string, map[string]any) {
	t.Helper()
	rs := s.resources("AWS::StepFunctions::StateMachine")
	if len(rs) != 2 {
		t.Fatalf("%d state machines, want 2 (the turn and its loop)", len(rs))
	}
	for id, p := range rs {
		if p["StateMachineType"] == typ {
			return id, p
		}
	}
	t.Fatalf("no %s state machine", typ)
	return "", nil
}

// named returns the single resource of a type whose logical id starts with prefix.
func (s *synthesized) named(t *testing.T, typ, prefix string) (string, map[string]any) {
	t.Helper()
	var id string
	var props map[string]any
	for rid, p := range s.resources(typ) {
		if strings.HasPrefix(rid, prefix) {
			if id != "" {
				t.Fatalf("two %s resources named %s*", typ, prefix)
			}
			id, props = rid, p
		}
	}
	if id == "" {
		t.Fatalf("no %s resource named %s*", typ, prefix)
	}
	return id, props
}

// function returns the logical id and properties of a function by name.
func (s *synthesized) function(t *testing.T, name string) (string, map[string]any) {
	t.Helper()
	want := "clientagent-" + s.props.EnvName + "-" + name
	for id, p := range s.resources("AWS::Lambda::Function") {
		if p["FunctionName"] == want {
			return id, p
		}
	}
	t.Fatalf("no function named %s", want)
	return "", nil
}

func envOf(fn map[string]any) map[string]any {
	env, _ := fn["Environment"].(map[string]any)
	vars, _ := env["Variables"].(map[string]any)
	return vars
}

// roleStatements returns every policy statement attached to the role that a
// resource's property (Role or RoleArn) names.
func (s *synthesized) roleStatements(t *testing.T, props map[string]any, roleProp string) []map[string]any {
	t.Helper()
	roleID := getAttTarget(props[roleProp])
	if roleID == "" {
		t.Fatalf("%s = %v: want an Fn::GetAtt of a role", roleProp, props[roleProp])
	}
	var out []map[string]any
	for _, p := range s.resources("AWS::IAM::Policy") {
		attached := false
		for _, r := range p["Roles"].([]any) {
			if ref, ok := r.(map[string]any); ok && ref["Ref"] == roleID {
				attached = true
			}
		}
		if !attached {
			continue
		}
		doc := p["PolicyDocument"].(map[string]any)
		for _, st := range doc["Statement"].([]any) {
			out = append(out, st.(map[string]any))
		}
	}
	return out
}

func getAttTarget(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	ga, ok := m["Fn::GetAtt"].([]any)
	if !ok || len(ga) == 0 {
		return ""
	}
	id, _ := ga[0].(string)
	return id
}

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

func actionsOf(st map[string]any) []string {
	var out []string
	for _, a := range asList(st["Action"]) {
		out = append(out, a.(string))
	}
	return out
}

// allowed returns the resources (as JSON) of the Allow statements that
// grant an action.
func allowed(stmts []map[string]any, action string) []string {
	var out []string
	for _, st := range stmts {
		if st["Effect"] != "Allow" || !slices.Contains(actionsOf(st), action) {
			continue
		}
		for _, r := range asList(st["Resource"]) {
			b, _ := json.Marshal(r)
			out = append(out, string(b))
		}
	}
	return out
}

// refsIn returns the logical ids that a value references (Ref, Fn::GetAtt).
func refsIn(v any) []string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				switch k {
				case "Ref":
					if s, ok := e.(string); ok {
						out = append(out, s)
					}
				case "Fn::GetAtt":
					if l, ok := e.([]any); ok && len(l) > 0 {
						if s, ok := l[0].(string); ok {
							out = append(out, s)
						}
					}
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// docs/design.md §7: arm64 provided.al2023 Lambdas with handler bootstrap, JSON logs.
func TestLambdaFunctions(t *testing.T) {
	t.Parallel()
	s := synth(t, "bedrock")
	assertTemplate(t, "function count", func() {
		s.tpl.ResourcePropertiesCountIs(jsii.String("AWS::Lambda::Function"),
			map[string]any{"Runtime": "provided.al2023"}, jsii.Number(7)) // the platform's six and the demo specialists
	})
	tests := []struct {
		name    string
		memory  float64
		timeout float64
		inVPC   bool
	}{
		{FnAPI, 512, 29, true},
		{FnLLMStep, 512, 120, true},
		{FnValidate, 256, 60, true},
		{FnInvoke, 1024, 360, true},
		{FnAppend, 256, 60, true},
		{FnAwait, 256, 30, true},
		{FnDemoAgents, 512, 120, true},
	}
	var maxTimeout float64
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, fn := s.function(t, tt.name)
			got := map[string]any{
				"Runtime":       fn["Runtime"],
				"Architectures": fn["Architectures"],
				"Handler":       fn["Handler"],
				"LogFormat":     fn["LoggingConfig"].(map[string]any)["LogFormat"],
				"MemorySize":    fn["MemorySize"],
				"Timeout":       fn["Timeout"],
				"InVPC":         fn["VpcConfig"] != nil,
			}
			want := map[string]any{
				"Runtime":       "provided.al2023",
				"Architectures": []any{"arm64"},
				"Handler":       "bootstrap",
				"LogFormat":     "JSON",
				"MemorySize":    tt.memory,
				"Timeout":       tt.timeout,
				"InVPC":         tt.inVPC,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("function %s (-want +got):\n%s", tt.name, diff)
			}
		})
		maxTimeout = max(maxTimeout, tt.timeout)
	}
	_, invoke := s.function(t, FnInvoke)
	if invoke["Timeout"] != maxTimeout || maxTimeout < 300 {
		t.Errorf("invoke Timeout = %v, want the longest (%v) and at least 5 minutes", invoke["Timeout"], maxTimeout)
	}
}

// Each function's code is the asset of BinDir/<name>, i.e. `make build`'s bootstrap.
func TestLambdaCodeFromBinDir(t *testing.T) {
	t.Parallel()
	s := synth(t, "bedrock")
	for _, name := range append(functionNames(), FnDemoAgents) {
		_, fn := s.function(t, name)
		key, _ := fn["Code"].(map[string]any)["S3Key"].(string)
		hash, ok := strings.CutSuffix(key, ".zip")
		if !ok {
			t.Errorf("%s Code.S3Key = %q, want <asset hash>.zip", name, key)
			continue
		}
		got, err := os.ReadFile(filepath.Join(s.assembly, "asset."+hash, "bootstrap"))
		if err != nil {
			t.Errorf("%s: asset bootstrap: %v", name, err)
			continue
		}
		if want := "#!/bin/sh\n# fake " + name + "\n"; string(got) != want {
			t.Errorf("%s asset bootstrap = %q, want %q (from %s/%s)", name, got, want, testBinDir, name)
		}
	}
}

// docs/design.md §11/§6, issue 30: the turn is a STANDARD state machine and
// its loop an EXPRESS one, each running the repository's ASL file as it is,
// with the step functions' ARNs (and, for the turn, the loop's) substituted;
// both traced, the loop logging every state (its history is in its logs
// only).
func TestStateMachineDefinition(t *testing.T) {
	t.Parallel()
	s := synth(t, "bedrock")
	loopID, loop := s.loopMachine(t)
	_, turn := s.turnMachine(t)
	for _, m := range []struct {
		name, file, typ string
		sm              map[string]any
		level           string
		extra           map[string]any // substitutions that are not functions
	}{
		{"loop", loopPath, "EXPRESS", loop, "ALL", nil},
		{"turn", aslPath, "STANDARD", turn, "ALL", map[string]any{"LoopStateMachine": map[string]any{"Ref": loopID}}},
	} {
		sm := m.sm
		if got := sm["StateMachineType"]; got != m.typ {
			t.Errorf("%s: StateMachineType = %v, want %s", m.name, got, m.typ)
		}
		if diff := cmp.Diff(map[string]any{"Enabled": true}, sm["TracingConfiguration"]); diff != "" {
			t.Errorf("%s: TracingConfiguration (-want +got):\n%s", m.name, diff)
		}
		logCfg, _ := sm["LoggingConfiguration"].(map[string]any)
		if logCfg["Level"] != m.level || len(asList(logCfg["Destinations"])) != 1 || logCfg["IncludeExecutionData"] != false {
			t.Errorf("%s: LoggingConfiguration = %v, want level %s with one log group, no payloads", m.name, mustJSON(logCfg), m.level)
		}
		// The role may write what logging and tracing need.
		stmts := s.roleStatements(t, sm, "RoleArn")
		for _, action := range []string{"logs:CreateLogDelivery", "xray:PutTraceSegments"} {
			if len(allowed(stmts, action)) == 0 {
				t.Errorf("%s: state machine role may not %s", m.name, action)
			}
		}
		asl, err := os.ReadFile(m.file)
		if err != nil {
			t.Fatal(err)
		}
		def, ok := sm["DefinitionString"].(string)
		if !ok {
			t.Fatalf("%s: DefinitionString = %s, want the file's text", m.name, mustJSON(sm["DefinitionString"]))
		}
		if def != string(asl) {
			t.Errorf("%s: DefinitionString differs from %s", m.name, m.file)
		}
		subs, _ := sm["DefinitionSubstitutions"].(map[string]any)
		// Every key the ASL uses is provided, and nothing else.
		if diff := cmp.Diff(ASLPlaceholders(string(asl)), slices.Sorted(maps.Keys(subs))); diff != "" {
			t.Errorf("%s: DefinitionSubstitutions keys (-used in ASL +provided):\n%s", m.name, diff)
		}
		resolved := def
		for k := range subs {
			resolved = strings.ReplaceAll(resolved, "${"+k+"}", "arn:aws:lambda:eu-west-1:123456789012:function:x")
		}
		if left := regexp.MustCompile(`\$\{[A-Za-z0-9_]*\}`).FindAllString(resolved, -1); len(left) > 0 {
			t.Errorf("%s: after substitution the definition still holds %v", m.name, left)
		}
		if !json.Valid([]byte(resolved)) {
			t.Errorf("%s: the substituted definition is not JSON", m.name)
		}
		for key, v := range subs {
			want := m.extra[key]
			if want == nil {
				name, ok := StepFunctionKeys[key]
				if !ok {
					t.Errorf("%s: DefinitionSubstitutions[%s] is neither a step function nor the loop", m.name, key)
					continue
				}
				id, _ := s.function(t, name)
				want = map[string]any{"Fn::GetAtt": []any{id, "Arn"}}
			}
			if diff := cmp.Diff(want, v); diff != "" {
				t.Errorf("%s: DefinitionSubstitutions[%s] (-want +got):\n%s", m.name, key, diff)
			}
		}
	}
}

// Issue 30: the turn runs its loop with startExecution.sync:2, which needs
// exactly this of the turn's role: StartExecution on the loop, Describe-
// and StopExecution on the loop's executions, and the managed EventBridge
// rule through which Step Functions learns that the child ended. The loop
// starts nothing.
func TestLoopSyncIAM(t *testing.T) {
	t.Parallel()
	s := synth(t, "bedrock")
	loopID, loop := s.loopMachine(t)
	_, turn := s.turnMachine(t)
	stmts := s.roleStatements(t, turn, "RoleArn")
	if got, want := allowed(stmts, "states:StartExecution"), []string{mustJSON(map[string]any{"Ref": loopID})}; !slices.Equal(got, want) {
		t.Errorf("the turn may states:StartExecution on %v, want the loop %v", got, want)
	}
	loopName := mustJSON(loop["StateMachineName"])
	for _, action := range []string{"states:DescribeExecution", "states:StopExecution"} {
		got := allowed(stmts, action)
		if len(got) != 2 {
			t.Errorf("the turn may %s on %v, want the loop's executions (execution:…:* and express:…:*)", action, got)
			continue
		}
		for _, r := range got {
			if !strings.Contains(r, "-loop:*") || !(strings.Contains(r, ":execution:") || strings.Contains(r, ":express:")) {
				t.Errorf("the turn may %s on %s, want only the loop's executions (%s)", action, r, loopName)
			}
		}
	}
	for _, action := range []string{"events:PutTargets", "events:PutRule", "events:DescribeRule"} {
		got := allowed(stmts, action)
		if len(got) != 1 || !strings.Contains(got[0], ":events:") || !strings.Contains(got[0], ":rule/"+SyncRuleName) {
			t.Errorf("the turn may %s on %v, want arn:aws:events:<region>:<account>:rule/%s", action, got, SyncRuleName)
		}
	}
	for _, st := range s.roleStatements(t, loop, "RoleArn") {
		for _, a := range actionsOf(st) {
			if strings.HasPrefix(a, "states:") || strings.HasPrefix(a, "events:") {
				t.Errorf("the loop's role may %s, want none: it starts no execution", a)
			}
		}
	}
}

// The state machines' roles may invoke exactly the functions their files
// name: the loop its four steps, the turn llmstep (FailTurn) and await;
// api is not among them (docs/design.md §7: the function answering task
// tokens is not the one the state machine invokes for the pause).
func TestStateMachineInvokesExactlyStepFunctions(t *testing.T) {
	t.Parallel()
	s := synth(t, "bedrock")
	apiID, _ := s.function(t, FnAPI)
	loopID, loop := s.loopMachine(t)
	turnID, turn := s.turnMachine(t)
	for _, m := range []struct {
		id  string
		sm  map[string]any
		fns []string
	}{
		{loopID, loop, []string{FnLLMStep, FnValidate, FnInvoke, FnAppend}},
		{turnID, turn, []string{FnLLMStep, FnAwait}},
	} {
		stmts := s.roleStatements(t, m.sm, "RoleArn")
		var got []string
		for _, st := range stmts {
			if slices.Contains(actionsOf(st), "lambda:InvokeFunction") {
				got = append(got, refsIn(st["Resource"])...)
			}
		}
		slices.Sort(got)
		got = slices.Compact(got)
		var want []string
		for _, name := range m.fns {
			id, _ := s.function(t, name)
			want = append(want, id)
		}
		slices.Sort(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("functions %s may invoke (-want +got):\n%s", m.id, diff)
		}
		if slices.Contains(refsIn(m.sm), apiID) || slices.Contains(refsIn(stmts), apiID) {
			t.Errorf("state machine %s references the api function %s: the template would be cyclic", m.id, apiID)
		}
	}
}

// The api function starts, inspects and stops turns and answers task tokens.
func TestAPIFunctionDrivesExecutions(t *testing.T) {
	t.Parallel()
	s := synth(t, "bedrock")
	smID, _ := s.turnMachine(t)
	_, api := s.function(t, FnAPI)
	if diff := cmp.Diff(map[string]any{"Ref": smID}, envOf(api)["STATE_MACHINE_ARN"]); diff != "" {
		t.Errorf("api STATE_MACHINE_ARN (-want +got):\n%s", diff)
	}
	stmts := s.roleStatements(t, api, "Role")
	onMachine := mustJSON(map[string]any{"Ref": smID})
	if got := allowed(stmts, "states:StartExecution"); !slices.Equal(got, []string{onMachine}) {
		t.Errorf("api may states:StartExecution on %v, want %s", got, onMachine)
	}
	// Issue 14: the task-token actions have no resource type (the service
	// authorization reference), so on the state machine's ARN they match
	// nothing and every answer of a pause would be denied.
	for _, action := range TaskTokenActions {
		if got := allowed(stmts, action); !slices.Equal(got, []string{`"*"`}) {
			t.Errorf("api may %s on %v, want \"*\" (the action has no resource type)", action, got)
		}
	}
	for _, action := range []string{"states:DescribeExecution", "states:StopExecution"} {
		got := allowed(stmts, action)
		if len(got) != 1 || !strings.Contains(got[0], ":execution:") || !strings.Contains(got[0], smID) {
			t.Errorf("api may %s on %v, want the executions of %s", action, got, smID)
		}
	}
	// The step functions need none of it.
	for _, name := range []string{FnLLMStep, FnValidate, FnInvoke, FnAppend, FnAwait} {
		_, fn := s.function(t, name)
		for _, st := range s.roleStatements(t, fn, "Role") {
			for _, a := range actionsOf(st) {
				if strings.HasPrefix(a, "states:") {
					t.Errorf("%s may %s, want no Step Functions permission", name, a)
				}
			}
		}
	}
}

// docs/design.md §7: HTTP API with a JWT authorizer on every route to the api function.
func TestHTTPAPIJWTOnEveryRoute(t *testing.T) {
	t.Parallel()
	s := synth(t, "bedrock")
	_, httpAPI := s.one(t, "AWS::ApiGatewayV2::Api")
	if httpAPI["ProtocolType"] != "HTTP" {
		t.Errorf("ProtocolType = %v, want HTTP", httpAPI["ProtocolType"])
	}
	cors, _ := httpAPI["CorsConfiguration"].(map[string]any)
	if diff := cmp.Diff([]any{testOrigin}, cors["AllowOrigins"]); diff != "" {
		t.Errorf("CORS AllowOrigins (-want +got):\n%s", diff)
	}
	if !slices.Contains(asList(cors["AllowHeaders"]), any("authorization")) {
		t.Errorf("CORS AllowHeaders = %v, want authorization", cors["AllowHeaders"])
	}
	// A 503's Retry-After must reach the page, which backs off by it.
	if !slices.Contains(asList(cors["ExposeHeaders"]), any("retry-after")) {
		t.Errorf("CORS ExposeHeaders = %v, want retry-after", cors["ExposeHeaders"])
	}
	authID, auth := s.one(t, "AWS::ApiGatewayV2::Authorizer")
	wantAuth := map[string]any{
		"AuthorizerType":   "JWT",
		"IdentitySource":   []any{"$request.header.Authorization"},
		"JwtConfiguration": map[string]any{"Issuer": testIssuer, "Audience": []any{"clientagent-web", "clientagent-cli"}},
	}
	gotAuth := map[string]any{"AuthorizerType": auth["AuthorizerType"], "IdentitySource": auth["IdentitySource"], "JwtConfiguration": auth["JwtConfiguration"]}
	if diff := cmp.Diff(wantAuth, gotAuth); diff != "" {
		t.Errorf("authorizer (-want +got):\n%s", diff)
	}
	integID, integ := s.one(t, "AWS::ApiGatewayV2::Integration")
	apiFnID, _ := s.function(t, FnAPI)
	if diff := cmp.Diff(map[string]any{"Fn::GetAtt": []any{apiFnID, "Arn"}}, integ["IntegrationUri"]); diff != "" {
		t.Errorf("integration target (-want +got):\n%s", diff)
	}
	routes := s.resources("AWS::ApiGatewayV2::Route")
	var methods []string
	for id, r := range routes {
		method, path, _ := strings.Cut(r["RouteKey"].(string), " ")
		methods = append(methods, method)
		if path != "/v1/{proxy+}" {
			t.Errorf("route %s path = %q, want /v1/{proxy+}", id, path)
		}
		if r["AuthorizationType"] != "JWT" || mustJSON(r["AuthorizerId"]) != mustJSON(map[string]any{"Ref": authID}) {
			t.Errorf("route %s authorization = %v %v, want JWT by %s", id, r["AuthorizationType"], r["AuthorizerId"], authID)
		}
		if !slices.Contains(refsIn(r["Target"]), integID) {
			t.Errorf("route %s target = %v, want integration %s", id, mustJSON(r["Target"]), integID)
		}
	}
	slices.Sort(methods)
	// No OPTIONS (or ANY) route: API Gateway answers CORS preflights itself,
	// so they never meet the authorizer.
	if diff := cmp.Diff([]string{"DELETE", "GET", "PATCH", "POST", "PUT"}, methods); diff != "" {
		t.Errorf("route methods (-want +got):\n%s", diff)
	}
}

// docs/design.md §4/§6: ElastiCache Serverless Valkey reachable only from the Lambdas.
func TestValkey(t *testing.T) {
	t.Parallel()
	s := synth(t, "bedrock")
	cacheID, cache := s.one(t, "AWS::ElastiCache::ServerlessCache")
	if cache["Engine"] != "valkey" {
		t.Errorf("Engine = %v, want valkey", cache["Engine"])
	}
	subnets := s.resources("AWS::EC2::Subnet")
	cacheSubnets := refsIn(cache["SubnetIds"])
	if len(cacheSubnets) < 2 {
		t.Errorf("cache subnets = %v, want at least two", cacheSubnets)
	}
	for _, id := range cacheSubnets {
		if sub, ok := subnets[id]; !ok || sub["MapPublicIpOnLaunch"] != false {
			t.Errorf("cache subnet %s: want a private subnet, got %s", id, mustJSON(sub))
		}
	}
	cacheSG := refsIn(cache["SecurityGroupIds"])
	if len(cacheSG) != 1 {
		t.Fatalf("cache security groups = %v, want one", cacheSG)
	}
	// A security group per function, each admitted to the cache alone.
	fnSGs := map[string]string{}
	for _, name := range append(functionNames(), FnDemoAgents) {
		_, fn := s.function(t, name)
		sgs := refsIn(fn["VpcConfig"].(map[string]any)["SecurityGroupIds"])
		if len(sgs) != 1 {
			t.Fatalf("%s security groups = %v, want one", name, sgs)
		}
		for other, sg := range fnSGs {
			if sg == sgs[0] {
				t.Errorf("%s and %s share the security group %s, want one each", name, other, sg)
			}
		}
		fnSGs[name] = sgs[0]
	}
	ingress := s.resources("AWS::EC2::SecurityGroupIngress")
	var rules, want []string
	for _, r := range ingress {
		if slices.Contains(refsIn(r["GroupId"]), cacheSG[0]) {
			rules = append(rules, fmt.Sprintf("%v %v-%v from %v", r["IpProtocol"], r["FromPort"], r["ToPort"], refsIn(r["SourceSecurityGroupId"])))
		}
	}
	for _, sg := range fnSGs {
		want = append(want, fmt.Sprintf("tcp 6379-6380 from [%s]", sg))
	}
	slices.Sort(rules)
	slices.Sort(want)
	if diff := cmp.Diff(want, rules); diff != "" {
		t.Errorf("ingress to the cache (-want +got):\n%s", diff)
	}
	wantURL := map[string]any{"Fn::Join": []any{"", []any{"rediss://", map[string]any{"Fn::GetAtt": []any{cacheID, "Endpoint.Address"}}, ":6379?cluster=true"}}}
	for _, name := range functionNames() {
		_, fn := s.function(t, name)
		if diff := cmp.Diff(wantURL, envOf(fn)["VALKEY_URL"]); diff != "" {
			t.Errorf("%s VALKEY_URL (-want +got):\n%s", name, diff)
		}
		vpc, _ := fn["VpcConfig"].(map[string]any)
		for _, id := range refsIn(vpc["SubnetIds"]) {
			if subnets[id]["MapPublicIpOnLaunch"] != false {
				t.Errorf("%s subnet %s is public, want private", name, id)
			}
		}
	}
	_, demo := s.function(t, FnDemoAgents)
	if _, ok := envOf(demo)["VALKEY_URL"]; !ok {
		t.Errorf("demoagents has no VALKEY_URL, want its tasks and ledger shared across instances")
	}
	// The private subnets reach the LLM and the specialists through NAT.
	if n := len(s.resources("AWS::EC2::NatGateway")); n != 1 {
		t.Errorf("%d NAT gateways, want 1", n)
	}
}

// The artifact bucket: private, encrypted, TLS only, expiring; api and invoke
// read and write it, the other steps do not touch it.
func TestArtifactBucket(t *testing.T) {
	t.Parallel()
	s := synth(t, "bedrock")
	bucketID, bucket := s.named(t, "AWS::S3::Bucket", "Artifacts")
	wantBlock := map[string]any{"BlockPublicAcls": true, "BlockPublicPolicy": true, "IgnorePublicAcls": true, "RestrictPublicBuckets": true}
	if diff := cmp.Diff(wantBlock, bucket["PublicAccessBlockConfiguration"]); diff != "" {
		t.Errorf("PublicAccessBlockConfiguration (-want +got):\n%s", diff)
	}
	if !strings.Contains(mustJSON(bucket["BucketEncryption"]), `"SSEAlgorithm":"AES256"`) {
		t.Errorf("BucketEncryption = %s, want SSE-S3", mustJSON(bucket["BucketEncryption"]))
	}
	var expiry []any
	for _, r := range bucket["LifecycleConfiguration"].(map[string]any)["Rules"].([]any) {
		rule := r.(map[string]any)
		if rule["Status"] == "Enabled" && rule["ExpirationInDays"] != nil {
			expiry = append(expiry, rule["ExpirationInDays"])
		}
	}
	if diff := cmp.Diff([]any{float64(14)}, expiry); diff != "" {
		t.Errorf("expiry days (-want +got):\n%s", diff)
	}
	_, policy := s.named(t, "AWS::S3::BucketPolicy", "ArtifactsPolicy")
	if doc := mustJSON(policy["PolicyDocument"]); !strings.Contains(doc, `"Effect":"Deny"`) || !strings.Contains(doc, `"aws:SecureTransport":"false"`) {
		t.Errorf("bucket policy = %s, want a Deny without TLS", doc)
	}

	for _, name := range functionNames() {
		_, fn := s.function(t, name)
		if diff := cmp.Diff(map[string]any{"Ref": bucketID}, envOf(fn)["ARTIFACT_BUCKET"]); diff != "" {
			t.Errorf("%s ARTIFACT_BUCKET (-want +got):\n%s", name, diff)
		}
		got := actionsOn(s.roleStatements(t, fn, "Role"), bucketID)
		var want []string
		switch name {
		case FnAPI: // deleting a conversation deletes its artifacts
			want = []string{"s3:DeleteObject", "s3:GetObject", "s3:ListBucket", "s3:PutObject"}
		case FnInvoke:
			want = []string{"s3:GetObject", "s3:ListBucket", "s3:PutObject"}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s artifact permissions (-want +got):\n%s", name, diff)
		}
	}
}

// actionsOn returns the sorted actions of the Allow statements whose
// resources reference a logical id.
func actionsOn(stmts []map[string]any, id string) []string {
	var out []string
	for _, st := range stmts {
		if st["Effect"] == "Allow" && slices.Contains(refsIn(st["Resource"]), id) {
			out = append(out, actionsOf(st)...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// The default model: Bedrock Converse through the llmstep role, no keys.
func TestLLMBedrock(t *testing.T) {
	t.Parallel()
	s := synth(t, "bedrock")
	if n := len(s.resources("AWS::SecretsManager::Secret")); n != 0 {
		t.Errorf("%d secrets, want none with bedrock", n)
	}
	for _, name := range append(functionNames(), FnDemoAgents) {
		_, fn := s.function(t, name)
		grants := allowed(s.roleStatements(t, fn, "Role"), "bedrock:InvokeModel")
		if want := name == FnLLMStep; (len(grants) > 0) != want {
			t.Errorf("%s may bedrock:InvokeModel on %v, want %v", name, grants, want)
		}
		if name == FnDemoAgents {
			continue
		}
		env := envOf(fn)
		got := map[string]any{"CLIENTAGENT_LLM": env["CLIENTAGENT_LLM"], "CLIENTAGENT_MODEL": env["CLIENTAGENT_MODEL"]}
		want := map[string]any{"CLIENTAGENT_LLM": "bedrock", "CLIENTAGENT_MODEL": DefaultBedrockModel}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s model env (-want +got):\n%s", name, diff)
		}
	}
	_, llm := s.function(t, FnLLMStep)
	// With demo specialists on, every platform function lists them.
	agents := mustJSON(envOf(llm)["CLIENTAGENT_AGENTS"])
	for _, path := range []string{"agents/svg", "agents/png", "agents/flange", "agents/publish"} {
		if !strings.Contains(agents, path) || !strings.Contains(agents, "FunctionUrl") {
			t.Errorf("CLIENTAGENT_AGENTS = %s, want the demo URL's %s", agents, path)
		}
	}
}

// An OpenAI-compatible model: its key in Secrets Manager, read by llmstep only.
func TestLLMOpenAI(t *testing.T) {
	t.Parallel()
	s := synth(t, "openai")
	secretID, _ := s.one(t, "AWS::SecretsManager::Secret")
	llmID, llm := s.function(t, FnLLMStep)
	env := envOf(llm)
	if diff := cmp.Diff(map[string]any{"Ref": secretID}, env["OPENAI_API_KEY_SECRET_ARN"]); diff != "" {
		t.Errorf("OPENAI_API_KEY_SECRET_ARN (-want +got):\n%s", diff)
	}
	// The key is read at cold start (pkg/llm/llmconfig): neither the template
	// nor any function's configuration holds it or a reference resolving to it.
	if tpl := mustJSON(s.json); strings.Contains(tpl, "{{resolve:") {
		t.Errorf("the template holds a dynamic reference, want the secret read at cold start")
	}
	got := map[string]any{"CLIENTAGENT_LLM": env["CLIENTAGENT_LLM"], "CLIENTAGENT_MODEL": env["CLIENTAGENT_MODEL"], "OPENAI_BASE_URL": env["OPENAI_BASE_URL"], "CLIENTAGENT_AGENTS": env["CLIENTAGENT_AGENTS"]}
	want := map[string]any{"CLIENTAGENT_LLM": "openai", "CLIENTAGENT_MODEL": "gpt-4o-mini", "OPENAI_BASE_URL": "https://llm.example.com/v1", "CLIENTAGENT_AGENTS": "https://a.example.com/agents/x,https://b.example.com"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("llmstep env (-want +got):\n%s", diff)
	}
	for _, name := range functionNames() {
		id, fn := s.function(t, name)
		stmts := s.roleStatements(t, fn, "Role")
		reads := allowed(stmts, "secretsmanager:GetSecretValue")
		if wantRead := id == llmID; (len(reads) > 0) != wantRead {
			t.Errorf("%s may read secrets %v, want %v", name, reads, wantRead)
		}
		if g := allowed(stmts, "bedrock:InvokeModel"); len(g) > 0 {
			t.Errorf("%s may bedrock:InvokeModel with llm=openai", name)
		}
		if _, ok := envOf(fn)["OPENAI_API_KEY"]; ok {
			t.Errorf("%s has OPENAI_API_KEY in its configuration, want only the secret's ARN on llmstep", name)
		}
		if _, ok := envOf(fn)["OPENAI_API_KEY_SECRET_ARN"]; ok != (id == llmID) {
			t.Errorf("%s has OPENAI_API_KEY_SECRET_ARN: %v, want it on llmstep only", name, ok)
		}
		if got, want := actionsOn(stmts, secretID), []string(nil); id == llmID {
			want = []string{"secretsmanager:DescribeSecret", "secretsmanager:GetSecretValue"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("llmstep's actions on the secret (-want +got):\n%s", diff)
			}
		} else if len(got) > 0 {
			t.Errorf("%s may %v on the secret, want nothing", name, got)
		}
	}
	// Without demo specialists: six functions, and no Function URL.
	assertTemplate(t, "no demo", func() {
		s.tpl.ResourceCountIs(jsii.String("AWS::Lambda::Function"), jsii.Number(6))
		s.tpl.ResourceCountIs(jsii.String("AWS::Lambda::Url"), jsii.Number(0))
	})
}

// Issue 14: the demo specialists answer on a Function URL with IAM auth,
// from the VPC (their A2A tasks and ledger are in Valkey). The functions
// that read agent cards or call skills may call it and sign their requests
// (CLIENTAGENT_AGENT_AUTH=sigv4); nothing else may, and without the demo
// specialists no function signs anything.
func TestDemoAgentsFunctionURL(t *testing.T) {
	t.Parallel()
	s := synth(t, "bedrock")
	demoID, demo := s.function(t, FnDemoAgents)
	_, url := s.named(t, "AWS::Lambda::Url", "FnDemoagents")
	got := map[string]any{"AuthType": url["AuthType"], "Target": url["TargetFunctionArn"]}
	want := map[string]any{"AuthType": "AWS_IAM", "Target": map[string]any{"Fn::GetAtt": []any{demoID, "Arn"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Function URL (-want +got):\n%s", diff)
	}
	if demo["VpcConfig"] == nil {
		t.Errorf("demoagents has no VpcConfig, want it in the VPC to reach Valkey")
	}
	// No resource policy opens it to anyone (AuthType NONE needs one).
	for id, perm := range s.resources("AWS::Lambda::Permission") {
		if mustJSON(perm["FunctionName"]) == mustJSON(map[string]any{"Fn::GetAtt": []any{demoID, "Arn"}}) {
			t.Errorf("Lambda permission %s on demoagents: %s, want none", id, mustJSON(perm))
		}
	}
	onDemo := mustJSON(map[string]any{"Fn::GetAtt": []any{demoID, "Arn"}})
	for _, name := range append(functionNames(), FnDemoAgents) {
		_, fn := s.function(t, name)
		caller := slices.Contains(AgentCallers, name)
		var grants []string
		for _, st := range s.roleStatements(t, fn, "Role") {
			for _, a := range actionsOf(st) {
				if strings.HasPrefix(a, "lambda:Invoke") {
					grants = append(grants, fmt.Sprintf("%s on %s if %s", a, mustJSON(st["Resource"]), mustJSON(st["Condition"])))
				}
			}
		}
		slices.Sort(grants)
		var wantGrants []string
		if caller {
			// Lambda requires both of URLs created since October 2025.
			wantGrants = []string{
				"lambda:InvokeFunction on " + onDemo + ` if {"Bool":{"lambda:InvokedViaFunctionUrl":true}}`,
				"lambda:InvokeFunctionUrl on " + onDemo + ` if {"StringEquals":{"lambda:FunctionUrlAuthType":"AWS_IAM"}}`,
			}
		}
		if diff := cmp.Diff(wantGrants, grants); diff != "" {
			t.Errorf("%s may invoke (-want +got):\n%s", name, diff)
		}
		wantAuth := map[bool]any{true: "sigv4", false: nil}[caller]
		if got := envOf(fn)["CLIENTAGENT_AGENT_AUTH"]; got != wantAuth {
			t.Errorf("%s CLIENTAGENT_AGENT_AUTH = %v, want %v", name, got, wantAuth)
		}
	}
	plain := synth(t, "openai")
	for _, name := range functionNames() {
		_, fn := plain.function(t, name)
		if got, ok := envOf(fn)["CLIENTAGENT_AGENT_AUTH"]; ok {
			t.Errorf("without demo specialists: %s CLIENTAGENT_AGENT_AUTH = %v, want unset", name, got)
		}
		if got := allowed(plain.roleStatements(t, fn, "Role"), "lambda:InvokeFunctionUrl"); len(got) > 0 {
			t.Errorf("without demo specialists: %s may lambda:InvokeFunctionUrl on %v", name, got)
		}
	}
}

func TestOutputs(t *testing.T) {
	t.Parallel()
	s := synth(t, "bedrock")
	smID, _ := s.turnMachine(t)
	bucketID, _ := s.named(t, "AWS::S3::Bucket", "Artifacts")
	auditID, _ := s.named(t, "AWS::S3::Bucket", "Audit")
	apiID, _ := s.one(t, "AWS::ApiGatewayV2::Api")
	topicID, _ := s.one(t, "AWS::SNS::Topic")
	outputs := s.json["Outputs"].(map[string]any)
	want := map[string]string{
		"ApiUrl":             apiID,
		"StateMachineArn":    smID,
		"ArtifactBucketName": bucketID,
		"AuditBucketName":    auditID,
		"AlarmTopicArn":      topicID,
	}
	for name, ref := range want {
		out, ok := outputs[name].(map[string]any)
		if !ok {
			t.Errorf("output %s missing", name)
			continue
		}
		if !slices.Contains(refsIn(out["Value"]), ref) {
			t.Errorf("output %s = %s, want a reference to %s", name, mustJSON(out["Value"]), ref)
		}
	}
}

// CloudFormation rejects a template whose resources depend on each other in
// a circle (docs/design.md §7); synthesis alone does not catch it, so walk the graph.
func TestTemplateHasNoCycle(t *testing.T) {
	t.Parallel()
	for config := range configs {
		s := synth(t, config)
		if cycle := findCycle(s.json); cycle != nil {
			t.Errorf("%s: dependency cycle %v", config, cycle)
		}
	}
}

func TestFindCycleDetectsCycles(t *testing.T) {
	t.Parallel()
	parse := func(s string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	tests := []struct {
		name  string
		tpl   string
		cycle bool
	}{
		{"chain", `{"Resources":{"A":{"Properties":{"X":{"Ref":"B"}}},"B":{"Properties":{"Y":{"Fn::GetAtt":["C","Arn"]}}},"C":{}}}`, false},
		{"getatt cycle", `{"Resources":{"A":{"Properties":{"X":{"Fn::GetAtt":["B","Arn"]}}},"B":{"Properties":{"Y":{"Fn::Join":["",[{"Ref":"A"}]]}}}}}`, true},
		{"dependson cycle", `{"Resources":{"A":{"DependsOn":["B"]},"B":{"Properties":{"Y":{"Fn::Sub":"x${A.Arn}"}}}}}`, true},
		{"parameter refs", `{"Parameters":{"P":{}},"Resources":{"A":{"Properties":{"X":{"Ref":"P"}}}}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := findCycle(parse(tt.tpl)); (got != nil) != tt.cycle {
				t.Errorf("findCycle() = %v, want a cycle: %v", got, tt.cycle)
			}
		})
	}
}

var subRefRE = regexp.MustCompile(`\$\{([A-Za-z0-9]+)(\.[A-Za-z0-9.]+)?\}`)

// findCycle returns a dependency cycle among a template's resources (Ref,
// Fn::GetAtt, Fn::Sub and DependsOn), or nil.
func findCycle(tpl map[string]any) []string {
	resources, _ := tpl["Resources"].(map[string]any)
	edges := map[string][]string{}
	for id, r := range resources {
		rm, _ := r.(map[string]any)
		deps := refsIn(rm["Properties"])
		for _, d := range asList(rm["DependsOn"]) {
			if s, ok := d.(string); ok {
				deps = append(deps, s)
			}
		}
		var walk func(any)
		walk = func(v any) {
			switch x := v.(type) {
			case map[string]any:
				for k, e := range x {
					if k == "Fn::Sub" {
						s, _ := e.(string)
						if l, ok := e.([]any); ok && len(l) > 0 {
							s, _ = l[0].(string)
						}
						for _, m := range subRefRE.FindAllStringSubmatch(s, -1) {
							deps = append(deps, m[1])
						}
					}
					walk(e)
				}
			case []any:
				for _, e := range x {
					walk(e)
				}
			}
		}
		walk(rm["Properties"])
		for _, d := range deps {
			if _, ok := resources[d]; ok {
				edges[id] = append(edges[id], d)
			}
		}
	}
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(string) []string
	visit = func(n string) []string {
		state[n] = onPath
		path = append(path, n)
		for _, m := range edges[n] {
			switch state[m] {
			case onPath:
				i := slices.Index(path, m)
				return append(slices.Clone(path[i:]), m)
			case unseen:
				if c := visit(m); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[n] = done
		return nil
	}
	ids := make([]string, 0, len(resources))
	for id := range resources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if state[id] == unseen {
			if c := visit(id); c != nil {
				return c
			}
		}
	}
	return nil
}

// An ASL key the stack does not provide stops the synthesis.
func TestUnknownASLKeyPanics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	asl := filepath.Join(dir, "turn.asl.json")
	if err := os.WriteFile(asl, []byte(`{"StartAt":"X","States":{"X":{"Type":"Task","Resource":"${OtherFunction}","End":true}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// The loop beside it (LoopASLFile) is the repository's.
	loop, err := os.ReadFile(loopPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "loop.asl.json"), loop, 0o644); err != nil {
		t.Fatal(err)
	}
	p := baseProps()
	p.ASLFile = asl
	p.DemoAgents = false
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), "${OtherFunction}") {
			t.Errorf("NewDeployment() panic = %v, want one naming ${OtherFunction}", r)
		}
	}()
	synthMu.Lock() // jsii calls must not overlap
	defer synthMu.Unlock()
	NewDeployment(awscdk.NewApp(nil), &p)
}

func TestASLPlaceholders(t *testing.T) {
	t.Parallel()
	got := ASLPlaceholders(`{"a":"${LLMStepFunction}","b":"${LLMStepFunction}","c":"${AwaitFunction}","d":"{% $x %}"}`)
	if diff := cmp.Diff([]string{"AwaitFunction", "LLMStepFunction"}, got); diff != "" {
		t.Errorf("ASLPlaceholders() (-want +got):\n%s", diff)
	}
}

// The same configuration synthesizes the same template, so that `cdk diff`
// shows only real changes (Go's map order must not leak into it).
func TestTemplateIsStable(t *testing.T) {
	t.Parallel()
	first := synth(t, "bedrock")
	synthMu.Lock()
	defer synthMu.Unlock()
	again, err := synthesize(baseProps(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if mustJSON(first.app) != mustJSON(again.app) || mustJSON(first.data) != mustJSON(again.data) {
		t.Errorf("a second synthesis differs from the first")
	}
}

// docs/design.md §8: the audit log outlives the operational record: versioned,
// never expiring, TLS only (retained in prod: TestEnvironmentDifferences);
// the handlers that write audit events (validate, invoke for executed
// calls, llmstep's FailTurn and api's RecordFailure, which close a batch)
// may only put, and append, which writes none, may not.
func TestAuditBucket(t *testing.T) {
	t.Parallel()
	s := synth(t, "bedrock")
	auditID, bucket := s.named(t, "AWS::S3::Bucket", "Audit")
	if v := mustJSON(bucket["VersioningConfiguration"]); v != `{"Status":"Enabled"}` {
		t.Errorf("VersioningConfiguration = %s, want enabled", v)
	}
	if bucket["LifecycleConfiguration"] != nil {
		t.Errorf("LifecycleConfiguration = %s, want none (the audit never expires)", mustJSON(bucket["LifecycleConfiguration"]))
	}
	_, policy := s.named(t, "AWS::S3::BucketPolicy", "AuditPolicy")
	if doc := mustJSON(policy["PolicyDocument"]); !strings.Contains(doc, `"aws:SecureTransport":"false"`) {
		t.Errorf("audit bucket policy = %s, want a Deny without TLS", doc)
	}
	for _, name := range functionNames() {
		_, fn := s.function(t, name)
		if diff := cmp.Diff(map[string]any{"Ref": auditID}, envOf(fn)["AUDIT_BUCKET"]); diff != "" {
			t.Errorf("%s AUDIT_BUCKET (-want +got):\n%s", name, diff)
		}
		got := actionsOn(s.roleStatements(t, fn, "Role"), auditID)
		var want []string
		if name == FnValidate || name == FnInvoke || name == FnLLMStep || name == FnAPI {
			want = []string{"s3:PutObject"}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s audit permissions (-want +got):\n%s", name, diff)
		}
	}
}

// Issue 8 on AWS: a deployment's own workflow templates (workflowsDir) are
// a layer that every platform function mounts, read from /opt; without
// them the functions use the templates built into the binaries.
func TestWorkflowsLayer(t *testing.T) {
	t.Parallel()
	s := synth(t, "openai")
	id, layer := s.one(t, "AWS::Lambda::LayerVersion")
	if rt, _ := layer["CompatibleRuntimes"].([]any); len(rt) != 1 || rt[0] != "provided.al2023" {
		t.Errorf("layer runtimes = %v, want provided.al2023", layer["CompatibleRuntimes"])
	}
	for _, name := range functionNames() {
		_, fn := s.function(t, name)
		if got := envOf(fn)["CLIENTAGENT_WORKFLOWS_DIR"]; got != "/opt" {
			t.Errorf("%s CLIENTAGENT_WORKFLOWS_DIR = %v, want /opt", name, got)
		}
		if got := mustJSON(fn["Layers"]); got != mustJSON([]any{map[string]any{"Ref": id}}) {
			t.Errorf("%s layers = %s, want the workflows layer %s", name, got, id)
		}
	}
	plain := synth(t, "bedrock")
	if n := len(plain.resources("AWS::Lambda::LayerVersion")); n != 0 {
		t.Errorf("without workflowsDir: %d layers, want 0", n)
	}
	if _, fn := plain.function(t, FnLLMStep); envOf(fn)["CLIENTAGENT_WORKFLOWS_DIR"] != nil {
		t.Errorf("without workflowsDir: CLIENTAGENT_WORKFLOWS_DIR = %v, want unset", envOf(fn)["CLIENTAGENT_WORKFLOWS_DIR"])
	}

	// A folder that would stop every function at cold start is refused at synth.
	bad := t.TempDir()
	p := baseProps()
	p.WorkflowsDir = bad
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "no *.json workflow templates") {
		t.Errorf("Validate(empty workflowsDir) = %v, want no templates", err)
	}
	if err := os.WriteFile(filepath.Join(bad, "x.json"), []byte(`{"name": "no id"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "x.json is not a workflow template") {
		t.Errorf("Validate(template without id) = %v, want it named", err)
	}
}
