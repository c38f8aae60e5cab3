package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The configuration: StackProps.Validate, context (cdk.json and -c), outdir.
// These tests synthesize nothing.

func TestValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		edit    func(*StackProps)
		wantErr string
	}{
		{"valid", func(*StackProps) {}, ""},
		{"bad env name", func(p *StackProps) { p.EnvName = "Prod_1" }, "env"},
		{"no issuer: Cognito", func(p *StackProps) { p.JWTIssuer, p.JWTAudience = "", nil }, ""},
		{"audience without issuer", func(p *StackProps) { p.JWTIssuer = "" }, "jwtAudience without jwtIssuer"},
		{"http issuer", func(p *StackProps) { p.JWTIssuer = "http://issuer" }, "https://"},
		{"issuer without audience", func(p *StackProps) { p.JWTAudience = nil }, "jwtAudience is required"},
		{"no origins outside dev: CLI only", func(p *StackProps) { p.WebOrigins = nil }, ""},
		{"dev defaults origins", func(p *StackProps) { p.WebOrigins = nil; p.EnvName = "dev" }, ""},
		{"unknown llm", func(p *StackProps) { p.LLM = "gpt" }, "llm"},
		{"missing bootstrap", func(p *StackProps) { p.BinDir = t.TempDir() }, "make build"},
		{"missing asl", func(p *StackProps) { p.ASLFile = "nope.json" }, "state machine definition"},
		{"too many NAT gateways", func(p *StackProps) { p.NATGateways = 9 }, "natGateways"},
		{"log level", func(p *StackProps) { p.LogLevel = "verbose" }, "logLevel"},
		{"log level any case", func(p *StackProps) { p.LogLevel = "debug" }, ""},
		{"system log level", func(p *StackProps) { p.SystemLogLevel = "ERROR" }, "systemLogLevel"},
		{"state machine log level", func(p *StackProps) { p.StateMachineLogLevel = "DEBUG" }, "stateMachineLogLevel"},
		{"retention not a CloudWatch value", func(p *StackProps) { p.LogRetentionDays = 10 }, "logRetentionDays"},
		{"valkey storage", func(p *StackProps) { p.ValkeyMaxStorageGB = 6000 }, "valkeyMaxStorageGb"},
		{"valkey ECPU below the minimum", func(p *StackProps) { p.ValkeyMaxECPUPerSecond = 500 }, "valkeyMaxEcpuPerSecond"},
		{"snapshot retention", func(p *StackProps) { p.ValkeySnapshotRetentionDays = 36 }, "valkeySnapshotRetentionDays"},
		{"snapshot time", func(p *StackProps) { p.ValkeySnapshotRetentionDays, p.ValkeySnapshotTime = 1, "25:00" }, "valkeySnapshotTime"},
		{"alarm email", func(p *StackProps) { p.AlarmEmail = "ops" }, "alarmEmail"},
		{"alarm topic not an ARN", func(p *StackProps) { p.AlarmTopicArn = "ops-alarms" }, "alarmTopicArn"},
		{"alarm email and topic", func(p *StackProps) {
			p.AlarmEmail, p.AlarmTopicArn = "ops@example.com", "arn:aws:sns:eu-west-1:123456789012:ops"
		}, "set one"},
		{"prod without an alarm destination", func(p *StackProps) { p.EnvName = "prod" }, "alarms would reach nobody"},
		{"staging without an alarm destination", func(p *StackProps) { p.EnvName = "staging" }, "alarms would reach nobody"},
		{"retained data without an alarm destination", func(p *StackProps) { p.RetainData = true }, "alarms would reach nobody"},
		{"prod with an alarm email", func(p *StackProps) { p.EnvName, p.AlarmEmail = "prod", "ops@example.com" }, ""},
		{"prod with an alarm topic", func(p *StackProps) { p.EnvName, p.AlarmTopicArn = "prod", "arn:aws:sns:eu-west-1:123456789012:ops" }, ""},
		{"bedrock model as an ARN", func(p *StackProps) {
			p.Model = "arn:aws:bedrock:us-east-1::foundation-model/amazon.nova-pro-v1:0"
		}, "not an ARN"},
		{"bedrock inference profile", func(p *StackProps) { p.Model, p.ModelSmall = "eu.amazon.nova-pro-v1:0", "amazon.nova-lite-v1:0" }, ""},
		{"bedrock regions", func(p *StackProps) { p.BedrockRegions = []string{"eu-west-1", "Europe"} }, "bedrockRegions"},
		{"await beyond the execution's timeout", func(p *StackProps) { p.AwaitTimeout = "200h" }, "awaitTimeout"},
		{"await within it", func(p *StackProps) { p.AwaitTimeout = "48h" }, ""},
		{"conversation quota", func(p *StackProps) { p.ConversationQuota = "lots" }, "conversationQuota"},
		{"file size", func(p *StackProps) { p.MaxFileSize = "1TB" }, "maxFileSize"},
		{"file timeout", func(p *StackProps) { p.FileTimeout = "2" }, "fileTimeout"},
		{"file bounds", func(p *StackProps) {
			p.ConversationQuota, p.MaxFileSize, p.FileMinRate, p.FileTimeout, p.FileRateWindow = "0", "512MiB", "8KiB", "2m", "10s"
		}, ""},
		{"cognito MFA", func(p *StackProps) { p.CognitoMFA = "sms" }, "cognitoMfa"},
		{"cognito threat protection", func(p *StackProps) { p.CognitoThreatProtection = "on" }, "cognitoThreatProtection"},
		{"account concurrency", func(p *StackProps) { p.LambdaAccountConcurrency = 5 }, "lambdaAccountConcurrency"},
		{"API rate above the account's", func(p *StackProps) { p.APIThrottleRateLimit = 20000 }, "apiThrottleRateLimit"},
		{"API burst above the account's", func(p *StackProps) { p.APIThrottleBurstLimit = 6000 }, "apiThrottleBurstLimit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := baseProps()
			tt.edit(&p)
			err := p.Validate()
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Validate() = %v, want an error mentioning %q", err, tt.wantErr)
			}
		})
	}
}

// ignoreCDKProps leaves the embedded awscdk.StackProps out of comparisons.
var ignoreCDKProps = cmp.FilterPath(func(p cmp.Path) bool { return p.String() == "StackProps" }, cmp.Ignore())

func TestPropsFromContext(t *testing.T) {
	t.Parallel()
	ctx := map[string]any{
		CtxEnv: "prod", CtxJWTIssuer: testIssuer, CtxJWTAudience: "web, cli",
		CtxWebOrigins: []any{"https://a.example", "https://b.example"}, CtxLLM: "OpenAI",
		CtxDemoAgents: "false", CtxArtifactExpiryDays: "7", CtxNATGateways: float64(2),
		CtxAgents: "https://x.example/a,https://y.example", CtxLogLevel: "warn",
		CtxValkeySnapshotDays: "0", CtxRetainData: true, CtxAlarmEmail: "ops@example.com",
		CtxAPIThrottleRate: float64(20), CtxTracing: false, CtxAccountConcurrency: "3000",
	}
	got, err := PropsFromContext(func(k string) any { return ctx[k] })
	if err != nil {
		t.Fatalf("PropsFromContext() error = %v", err)
	}
	want := &StackProps{
		EnvName: "prod", BinDir: filepath.Join("..", "bin"), ASLFile: filepath.Join("..", "statemachine", "turn.asl.json"),
		JWTIssuer: testIssuer, JWTAudience: []string{"web", "cli"},
		WebOrigins: []string{"https://a.example", "https://b.example"}, LLM: LLMOpenAI,
		Agents:     []string{"https://x.example/a", "https://y.example"},
		DemoAgents: false, ArtifactExpiryDays: 7, NATGateways: 2,
		LogLevel: "WARN", SystemLogLevel: "INFO", StateMachineLogLevel: "ALL", LogRetentionDays: 30,
		ValkeyMaxStorageGB: 1, ValkeyMaxECPUPerSecond: 5000, RetainData: true, AlarmEmail: "ops@example.com",
		APIThrottleRateLimit: 20, APIThrottleBurstLimit: 100, Tracing: new(bool), LambdaAccountConcurrency: 3000,
		CognitoMFA: "optional", CognitoThreatProtection: "off",
	}
	if diff := cmp.Diff(want, got, ignoreCDKProps); diff != "" {
		t.Errorf("PropsFromContext() (-want +got):\n%s", diff)
	}

	dflt, err := PropsFromContext(func(string) any { return nil })
	if err != nil {
		t.Fatalf("PropsFromContext(empty) error = %v", err)
	}
	if !dflt.TracingOn() {
		t.Errorf("PropsFromContext(empty).TracingOn() = false, want tracing on by default")
	}
	if dflt.EnvName != "dev" || dflt.LLM != LLMBedrock || dflt.Model != DefaultBedrockModel || !dflt.DemoAgents || dflt.ArtifactExpiryDays != 30 || dflt.RetainData {
		t.Errorf("PropsFromContext(empty) = %+v, want dev, bedrock %s, demo agents, 30 days, no retention", dflt, DefaultBedrockModel)
	}
	for _, bad := range []map[string]any{
		{CtxDemoAgents: "maybe"}, {CtxArtifactExpiryDays: "-1"}, {CtxNATGateways: "x"}, {CtxRetainData: "sometimes"},
		{CtxLogRetentionDays: "0"}, {CtxAPIThrottleBurst: "-5"}, {CtxEnvironments: "dev"}, {CtxEnvironments: map[string]any{"dev": "verbose"}},
	} {
		if _, err := PropsFromContext(func(k string) any { return bad[k] }); err == nil {
			t.Errorf("PropsFromContext(%v) error = nil, want one", bad)
		}
	}
}

// An environment's block of "environments" fills what the top level does
// not set; a top-level value (`-c key=value`) wins.
func TestPropsFromContextEnvironments(t *testing.T) {
	t.Parallel()
	envs := map[string]any{
		"dev":  map[string]any{CtxLogLevel: "DEBUG", CtxLogRetentionDays: float64(7), CtxRetainData: false},
		"prod": map[string]any{CtxLogLevel: "INFO", CtxLogRetentionDays: float64(365), CtxRetainData: true, CtxNATGateways: float64(2)},
	}
	tests := []struct {
		name string
		ctx  map[string]any
		want [4]any // LogLevel, LogRetentionDays, RetainData, NATGateways
	}{
		{"dev block", map[string]any{CtxEnv: "dev"}, [4]any{"DEBUG", 7, false, 1}},
		{"prod block", map[string]any{CtxEnv: "prod"}, [4]any{"INFO", 365, true, 2}},
		{"no env: dev", map[string]any{}, [4]any{"DEBUG", 7, false, 1}},
		{"-c overrides the block", map[string]any{CtxEnv: "prod", CtxLogRetentionDays: "14", CtxRetainData: "false"}, [4]any{"INFO", 14, false, 2}},
		{"unknown env: built-in defaults", map[string]any{CtxEnv: "alice"}, [4]any{"INFO", 30, false, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.ctx[CtxEnvironments] = envs
			p, err := PropsFromContext(func(k string) any { return tt.ctx[k] })
			if err != nil {
				t.Fatalf("PropsFromContext() error = %v", err)
			}
			got := [4]any{p.LogLevel, p.LogRetentionDays, p.RetainData, p.NATGateways}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PropsFromContext() (-want +got):\n%s", diff)
			}
		})
	}
}

// The repository's cdk.json configures dev, staging and prod; each is valid
// without jwtIssuer (Cognito) and webOrigins, i.e. on a fresh clone, given
// an alarm destination where one is required (staging and prod).
func TestCDKJSONEnvironments(t *testing.T) {
	t.Parallel()
	ctx, err := ReadCDKJSONContext(filepath.Join("..", "cdk.json"))
	if err != nil {
		t.Fatalf("ReadCDKJSONContext() error = %v", err)
	}
	type settings struct {
		LogLevel, StateMachineLogLevel string
		LogRetentionDays               int
		RetainData                     bool
		SnapshotDays                   int
		APIRate, APIBurst              int
	}
	want := map[string]settings{
		"dev":     {"DEBUG", "ALL", 7, false, 0, 25, 50},
		"staging": {"INFO", "ERROR", 30, false, 1, 50, 100},
		"prod":    {"INFO", "ERROR", 365, true, 7, 500, 1000},
	}
	for env, w := range want {
		c := map[string]any{CtxEnv: env, CtxBinDir: testBinDir, CtxASLFile: aslPath}
		get := func(k string) any {
			if v, ok := c[k]; ok {
				return v
			}
			return ctx[k]
		}
		p, err := PropsFromContext(get)
		if err != nil {
			t.Fatalf("%s: PropsFromContext() error = %v", env, err)
		}
		err = p.Validate()
		if env == "dev" && err != nil {
			t.Errorf("%s: Validate() = %v, want nil", env, err)
		}
		if env != "dev" {
			if err == nil || !strings.Contains(err.Error(), "alarms would reach nobody") {
				t.Errorf("%s without an alarm destination: Validate() = %v, want alarms would reach nobody", env, err)
			}
			p.AlarmEmail = "ops@example.com"
			if err := p.Validate(); err != nil {
				t.Errorf("%s with alarmEmail: Validate() = %v, want nil", env, err)
			}
		}
		got := settings{p.LogLevel, p.StateMachineLogLevel, p.LogRetentionDays, p.RetainData, p.ValkeySnapshotRetentionDays,
			p.APIThrottleRateLimit, p.APIThrottleBurstLimit}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("%s settings (-want +got):\n%s", env, diff)
		}
		if p.JWTIssuer != "" {
			t.Errorf("%s: jwtIssuer = %q, want none in cdk.json (the stack creates a user pool)", env, p.JWTIssuer)
		}
	}
	b, _ := os.ReadFile(filepath.Join("..", "cdk.json"))
	if !strings.Contains(string(b), `"app": "cd infra && go run ."`) {
		t.Errorf("cdk.json app is not `cd infra && go run .`, which main.go's paths assume")
	}
}

func TestReadCDKJSONContext(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	got, err := ReadCDKJSONContext(write("a.json", `{"app":"x","context":{"env":"prod","environments":{"prod":{"natGateways":2}}}}`))
	if err != nil {
		t.Fatalf("ReadCDKJSONContext() error = %v", err)
	}
	want := map[string]any{"env": "prod", "environments": map[string]any{"prod": map[string]any{"natGateways": float64(2)}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadCDKJSONContext() (-want +got):\n%s", diff)
	}
	if got, err := ReadCDKJSONContext(write("b.json", `{"app":"x"}`)); err != nil || len(got) != 0 {
		t.Errorf("ReadCDKJSONContext(no context) = %v, %v, want empty", got, err)
	}
	if _, err := ReadCDKJSONContext(write("c.json", `{`)); err == nil || !strings.Contains(err.Error(), "c.json") {
		t.Errorf("ReadCDKJSONContext(bad JSON) error = %v, want one naming the file", err)
	}
	if _, err := ReadCDKJSONContext(filepath.Join(dir, "none.json")); err == nil {
		t.Errorf("ReadCDKJSONContext(missing) error = nil, want one")
	}
}

// CDK_OUTDIR, else cdk.out; relative to the repository root, where the CLI
// (which passes its --output as it was given) looks for the assembly.
func TestOutDir(t *testing.T) {
	t.Parallel()
	tests := []struct{ root, env, want string }{
		{"..", "", filepath.Join("..", "cdk.out")},
		{"..", "  ", filepath.Join("..", "cdk.out")},
		{"..", "cdk.out", filepath.Join("..", "cdk.out")},
		{"..", "out/x", filepath.Join("..", "out", "x")},
		{"..", "/tmp/x", "/tmp/x"},
		{".", "", "cdk.out"},
	}
	for _, tt := range tests {
		if got := OutDir(tt.root, tt.env); got != tt.want {
			t.Errorf("OutDir(%q, %q) = %q, want %q", tt.root, tt.env, got, tt.want)
		}
	}
}

func TestContextFromArgs(t *testing.T) {
	t.Parallel()
	got, err := ContextFromArgs([]string{"-c", "env=prod", "--context", "jwtIssuer=https://i.example/?a=b"})
	if err != nil {
		t.Fatalf("ContextFromArgs() error = %v", err)
	}
	if diff := cmp.Diff(map[string]any{"env": "prod", "jwtIssuer": "https://i.example/?a=b"}, got); diff != "" {
		t.Errorf("ContextFromArgs() (-want +got):\n%s", diff)
	}
	for _, bad := range [][]string{{"env=prod"}, {"-c"}, {"-c", "noequals"}} {
		if _, err := ContextFromArgs(bad); err == nil {
			t.Errorf("ContextFromArgs(%q) error = nil, want one", bad)
		}
	}
}
