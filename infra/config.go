package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
)

// Context keys the app reads (README.md lists them with their defaults).
// Every key but env and environments may also sit in an environment's block
// of the environments key (cdk.json); a top-level value (`-c key=value`)
// overrides the block.
const (
	CtxEnv                 = "env"
	CtxEnvironments        = "environments"
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
	CtxLogLevel            = "logLevel"
	CtxSystemLogLevel      = "systemLogLevel"
	CtxStateMachineLog     = "stateMachineLogLevel"
	CtxLogRetentionDays    = "logRetentionDays"
	CtxValkeyMaxStorageGB  = "valkeyMaxStorageGb"
	CtxValkeyMaxECPU       = "valkeyMaxEcpuPerSecond"
	CtxValkeySnapshotDays  = "valkeySnapshotRetentionDays"
	CtxValkeySnapshotTime  = "valkeySnapshotTime"
	CtxRetainData          = "retainData"
	CtxAlarmEmail          = "alarmEmail"
	CtxAlarmTopicArn       = "alarmTopicArn"
	CtxAccountConcurrency  = "lambdaAccountConcurrency"
	CtxWorkflowsDir        = "workflowsDir"
	CtxAPIThrottleRate     = "apiThrottleRateLimit"
	CtxAPIThrottleBurst    = "apiThrottleBurstLimit"
	CtxGuardrailID         = "guardrailId"
	CtxGuardrailVersion    = "guardrailVersion"
	CtxTracing             = "tracing"
	CtxBedrockRegions      = "bedrockRegions"
	CtxCognitoMFA          = "cognitoMfa"
	CtxConversationQuota   = "conversationQuota"
	CtxMaxFileSize         = "maxFileSize"
	CtxFileTimeout         = "fileTimeout"
	CtxFileMinRate         = "fileMinRate"
	CtxFileRateWindow      = "fileRateWindow"
	CtxCognitoThreat       = "cognitoThreatProtection"
)

// StackProps configures one environment's stack. The zero value of an
// optional field means its documented default (withDefaults).
type StackProps struct {
	awscdk.StackProps

	// EnvName names the environment (dev, staging, prod); it prefixes
	// resource names: lowercase letters, digits and '-', at most 20.
	EnvName string
	// BinDir holds `make build`'s output: BinDir/<function>/bootstrap.
	BinDir string
	// ASLFile is statemachine/turn.asl.json, read at synth time; the
	// turn's EXPRESS loop is loop.asl.json beside it (LoopASLFile).
	ASLFile string

	// JWTIssuer and JWTAudience configure the HTTP API's JWT authorizer.
	// Without an issuer the stack creates a Cognito user pool and an app
	// client, and uses their issuer and client id.
	JWTIssuer   string
	JWTAudience []string
	// WebOrigins are the origins allowed by CORS (the web page). Empty: "*"
	// in the dev environment; elsewhere no browser origin (CLI only) and a
	// synth warning.
	WebOrigins []string

	// LLM is bedrock (default), openai or scripted.
	LLM string
	// Model is CLIENTAGENT_MODEL (bedrock default DefaultBedrockModel);
	// ModelSmall and ModelLarge the optional other flavours.
	Model, ModelSmall, ModelLarge string
	// ConversationQuota, MaxFileSize, FileTimeout, FileMinRate and
	// FileRateWindow are the platform's file bounds
	// (CLIENTAGENT_CONVERSATION_QUOTA, CLIENTAGENT_MAX_FILE_SIZE,
	// CLIENTAGENT_FILE_TIMEOUT, CLIENTAGENT_FILE_MIN_RATE,
	// CLIENTAGENT_FILE_RATE_WINDOW; pkg/platform FilesFromEnv): sizes such as
	// 1GiB or 512MiB, durations such as 2m. Empty: the platform's default.
	ConversationQuota, MaxFileSize, FileTimeout, FileMinRate, FileRateWindow string
	// CognitoMFA is the created user pool's MFA: off, optional (default)
	// or required; a second factor is a TOTP app (no SMS).
	CognitoMFA string
	// CognitoThreatProtection is the created user pool's threat protection
	// (compromised credentials, risky sign-ins): off (default), audit or
	// enforced. Anything but off puts the pool on the Plus feature plan,
	// billed per monthly active user.
	CognitoThreatProtection string
	// BedrockRegions are the regions llmstep may call the Bedrock models
	// in (bedrock.go): empty, a model id in the stack's region, and an
	// inference profile's model wherever the profile routes it.
	BedrockRegions []string
	// OpenAIBaseURL is OPENAI_BASE_URL (empty: api.openai.com).
	OpenAIBaseURL string
	// OpenAIKeySecretName names an existing Secrets Manager secret holding the
	// API key; empty: the data stack creates one whose value you set after
	// deploy.
	OpenAIKeySecretName string

	// Agents are specialist base URLs (CLIENTAGENT_AGENTS) besides the demo ones.
	Agents []string
	// DemoAgents deploys the demo specialists behind a Function URL and
	// lists them in CLIENTAGENT_AGENTS.
	DemoAgents bool

	// ArtifactExpiryDays expires artifacts in S3 after this many days (default 30).
	ArtifactExpiryDays int
	// NATGateways is the VPC's NAT gateway count (default 1; the Lambdas
	// need egress to the LLM and the specialists, docs/deploy.md).
	NATGateways int
	// AwaitTimeout is CLIENTAGENT_AWAIT_TIMEOUT (a Go duration); empty: the
	// platform's default.
	AwaitTimeout string
	// WorkflowsDir is a folder of workflow templates (*.json,
	// docs/workflows.md), deployed as a Lambda layer and read from /opt by
	// every platform function (CLIENTAGENT_WORKFLOWS_DIR); empty: the
	// examples built into the binaries.
	WorkflowsDir string

	// LogLevel is the Lambdas' application log level (TRACE … FATAL,
	// default INFO): Lambda drops JSON records below it by their "level".
	LogLevel string
	// SystemLogLevel is the Lambda platform's own log level (DEBUG, INFO,
	// WARN; default INFO).
	SystemLogLevel string
	// StateMachineLogLevel is the state machine's log level (ALL, ERROR,
	// FATAL, OFF; default ALL).
	StateMachineLogLevel string
	// LogRetentionDays keeps every log group this many days (one of
	// CloudWatch's values: 1, 3, 5, 7, 14, 30, 60, 90, … 3653; default 30).
	LogRetentionDays int

	// ValkeyMaxStorageGB and ValkeyMaxECPUPerSecond cap the serverless
	// cache's usage, so a runaway client meets a limit, not a bill
	// (defaults 1 GB and 5000 ECPU/s).
	ValkeyMaxStorageGB     int
	ValkeyMaxECPUPerSecond int
	// ValkeySnapshotRetentionDays keeps daily snapshots this many days
	// (0: none), taken at ValkeySnapshotTime (UTC HH:MM, default 03:00).
	ValkeySnapshotRetentionDays int
	ValkeySnapshotTime          string

	// RetainData protects the data stack from deletion (termination
	// protection) and keeps its buckets, log groups, cache, user pool and
	// created secret even if that stack is deleted (prod). Without it they
	// are deleted with the data stack (a bucket only once it is empty).
	RetainData bool
	// AlarmEmail, when set, subscribes this address to the alarm topic.
	AlarmEmail string
	// AlarmTopicArn, when set, is an existing SNS topic the alarms go to
	// instead of one the stack creates (a pager's, a chat integration's).
	// An environment that needs an alarm destination (NeedsAlarmDestination)
	// must set it or AlarmEmail.
	AlarmTopicArn string
	// LambdaAccountConcurrency is the account's Lambda concurrency quota
	// in the region (default 1000, Lambda's default): the account
	// concurrency alarm fires at 80% of it.
	LambdaAccountConcurrency int

	// APIThrottleRateLimit and APIThrottleBurstLimit are the HTTP API
	// stage's default route throttling: steady requests per second and the
	// burst above it (defaults 50 and 100), so one client polling too fast
	// meets 429s long before the account's limit, which every API shares.
	APIThrottleRateLimit  int
	APIThrottleBurstLimit int

	// GuardrailID and GuardrailVersion name an Amazon Bedrock guardrail
	// (created outside this app) that checks every request, tool call and
	// tool result (pkg/guardian/bedrock): the functions that check
	// (GuardianFunctions) get CLIENTAGENT_GUARDIAN=bedrock:<id>:<version>
	// and bedrock:ApplyGuardrail on that guardrail alone. Empty: no
	// guardian. Version is a number or DRAFT.
	GuardrailID      string
	GuardrailVersion string

	// MCPServers are MCP servers whose tools are skills (issue 17): the
	// functions that build the tool catalogue or call tools (MCPFunctions)
	// get them as CLIENTAGENT_MCP, and secretsmanager:GetSecretValue on
	// exactly the secrets their headers name ("secret:<arn-or-name>"), read
	// at cold start. Streamable HTTP only: a stdio server is refused.
	// Empty: none.
	MCPServers []MCPServer

	// Tracing turns on X-Ray tracing (issue 16, docs/deploy.md): Lambda
	// active tracing, Step Functions tracing, and each function's OTel spans
	// sent to X-Ray's OTLP endpoint (SigV4, xray:PutTraceSegments). Nil:
	// on. Off: no tracing, no exporter, no X-Ray permission.
	Tracing *bool
}

// NeedsAlarmDestination reports whether the environment may not deploy
// without someone to tell: staging, prod, and any environment that retains
// its data.
func (p StackProps) NeedsAlarmDestination() bool {
	return p.EnvName == "staging" || p.EnvName == "prod" || p.RetainData
}

// TracingOn reports whether the environment traces (Tracing, default on).
func (p StackProps) TracingOn() bool { return p.Tracing == nil || *p.Tracing }

// Allowed values of the enumerated settings.
var (
	lambdaLogLevels       = []string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"}
	lambdaSystemLogLevels = []string{"DEBUG", "INFO", "WARN"}
	stateMachineLogLevels = []string{"ALL", "ERROR", "FATAL", "OFF"}
)

var (
	envNameRE      = regexp.MustCompile(`^[a-z][a-z0-9-]{0,19}$`)
	snapshotTimeRE = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]$`)
	// A size as pkg/platform's ParseBytes reads it.
	byteSizeRE    = regexp.MustCompile(`^[0-9]+ *([KMGkmg](i?[Bb])?)?$`)
	regionRE      = regexp.MustCompile(`^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-[0-9]$`)
	snsTopicArnRE = regexp.MustCompile(`^arn:aws[a-z-]*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}(\.fifo)?$`)
	// A guardrail's id (not its ARN: the stack builds the ARN it grants on).
	guardrailIDRE      = regexp.MustCompile(`^[a-z0-9]{1,64}$`)
	guardrailVersionRE = regexp.MustCompile(`^([1-9][0-9]{0,7}|DRAFT)$`)
)

// ExecutionTimeout is the turn state machine's TimeoutSeconds: a backstop
// for an execution nothing ends, beyond any turn's waits for the user.
const ExecutionTimeout = 7 * 24 * time.Hour

// awaitFits reports whether one wait for the user fits in an execution.
func awaitFits(s string) bool {
	d, err := time.ParseDuration(s)
	return err == nil && d > 0 && d < ExecutionTimeout
}

// withDefaults returns a copy of p with the documented defaults filled in.
func (p StackProps) withDefaults() StackProps {
	p.EnvName = cmp.Or(p.EnvName, "dev")
	p.BinDir = cmp.Or(p.BinDir, filepath.Join("..", "bin"))
	p.ASLFile = cmp.Or(p.ASLFile, filepath.Join("..", "statemachine", "turn.asl.json"))
	p.LLM = cmp.Or(p.LLM, LLMBedrock)
	if p.LLM == LLMBedrock && p.Model == "" {
		p.Model = DefaultBedrockModel
	}
	if len(p.WebOrigins) == 0 && p.EnvName == "dev" {
		p.WebOrigins = []string{"*"}
	}
	p.ArtifactExpiryDays = cmp.Or(p.ArtifactExpiryDays, 30)
	p.NATGateways = cmp.Or(p.NATGateways, 1)
	p.LogLevel = cmp.Or(strings.ToUpper(p.LogLevel), "INFO")
	p.SystemLogLevel = cmp.Or(strings.ToUpper(p.SystemLogLevel), "INFO")
	p.StateMachineLogLevel = cmp.Or(strings.ToUpper(p.StateMachineLogLevel), "ALL")
	p.LogRetentionDays = cmp.Or(p.LogRetentionDays, 30)
	p.ValkeyMaxStorageGB = cmp.Or(p.ValkeyMaxStorageGB, 1)
	p.ValkeyMaxECPUPerSecond = cmp.Or(p.ValkeyMaxECPUPerSecond, 5000)
	if p.ValkeySnapshotRetentionDays > 0 && p.ValkeySnapshotTime == "" {
		p.ValkeySnapshotTime = "03:00"
	}
	p.CognitoMFA = cmp.Or(strings.ToLower(p.CognitoMFA), "optional")
	p.CognitoThreatProtection = cmp.Or(strings.ToLower(p.CognitoThreatProtection), "off")
	p.LambdaAccountConcurrency = cmp.Or(p.LambdaAccountConcurrency, 1000)
	p.APIThrottleRateLimit = cmp.Or(p.APIThrottleRateLimit, 50)
	p.APIThrottleBurstLimit = cmp.Or(p.APIThrottleBurstLimit, 100)
	return p
}

// Validate reports the first configuration error of p (after defaults).
func (p StackProps) Validate() error {
	p = p.withDefaults()
	switch {
	case !envNameRE.MatchString(p.EnvName):
		return fmt.Errorf("env %q: want lowercase letters, digits and '-', starting with a letter, at most 20", p.EnvName)
	case p.JWTIssuer != "" && !strings.HasPrefix(p.JWTIssuer, "https://"):
		return fmt.Errorf("jwtIssuer %q: API Gateway needs an https:// issuer", p.JWTIssuer)
	case p.JWTIssuer != "" && len(p.JWTAudience) == 0:
		return fmt.Errorf("jwtAudience is required with jwtIssuer (comma-separated audiences)")
	case p.JWTIssuer == "" && len(p.JWTAudience) > 0:
		return fmt.Errorf("jwtAudience without jwtIssuer: the created Cognito user pool's client id is the audience")
	case !slices.Contains([]string{LLMBedrock, LLMOpenAI, LLMScripted}, p.LLM):
		return fmt.Errorf("llm %q: want bedrock, openai or scripted", p.LLM)
	case p.ArtifactExpiryDays < 0:
		return fmt.Errorf("artifactExpiryDays %d: want a positive number of days", p.ArtifactExpiryDays)
	case p.NATGateways < 0 || p.NATGateways > 3:
		return fmt.Errorf("natGateways %d: want 1 to 3", p.NATGateways)
	case !slices.Contains(lambdaLogLevels, p.LogLevel):
		return fmt.Errorf("logLevel %q: want one of %v", p.LogLevel, lambdaLogLevels)
	case !slices.Contains(lambdaSystemLogLevels, p.SystemLogLevel):
		return fmt.Errorf("systemLogLevel %q: want one of %v", p.SystemLogLevel, lambdaSystemLogLevels)
	case !slices.Contains(stateMachineLogLevels, p.StateMachineLogLevel):
		return fmt.Errorf("stateMachineLogLevel %q: want one of %v", p.StateMachineLogLevel, stateMachineLogLevels)
	case retentionDays[p.LogRetentionDays] == "":
		return fmt.Errorf("logRetentionDays %d: want one of CloudWatch's values %v", p.LogRetentionDays, slices.Sorted(maps.Keys(retentionDays)))
	case p.ValkeyMaxStorageGB < 1 || p.ValkeyMaxStorageGB > 5000:
		return fmt.Errorf("valkeyMaxStorageGb %d: want 1 to 5000", p.ValkeyMaxStorageGB)
	case p.ValkeyMaxECPUPerSecond < 1000 || p.ValkeyMaxECPUPerSecond > 15_000_000:
		return fmt.Errorf("valkeyMaxEcpuPerSecond %d: want 1000 to 15000000", p.ValkeyMaxECPUPerSecond)
	case p.ValkeySnapshotRetentionDays < 0 || p.ValkeySnapshotRetentionDays > 35:
		return fmt.Errorf("valkeySnapshotRetentionDays %d: want 0 (none) to 35", p.ValkeySnapshotRetentionDays)
	case p.ValkeySnapshotTime != "" && !snapshotTimeRE.MatchString(p.ValkeySnapshotTime):
		return fmt.Errorf("valkeySnapshotTime %q: want HH:MM (UTC)", p.ValkeySnapshotTime)
	case p.AlarmEmail != "" && !strings.Contains(p.AlarmEmail, "@"):
		return fmt.Errorf("alarmEmail %q: want an email address", p.AlarmEmail)
	case p.AlarmTopicArn != "" && !snsTopicArnRE.MatchString(p.AlarmTopicArn):
		return fmt.Errorf("alarmTopicArn %q: want an SNS topic ARN (arn:aws:sns:<region>:<account>:<name>)", p.AlarmTopicArn)
	case p.AlarmEmail != "" && p.AlarmTopicArn != "":
		return fmt.Errorf("alarmEmail and alarmTopicArn: set one (subscribe the address to your topic yourself)")
	case p.NeedsAlarmDestination() && p.AlarmEmail == "" && p.AlarmTopicArn == "":
		return fmt.Errorf("env %s: alarms would reach nobody: set alarmEmail (-c alarmEmail=ops@example.com) or alarmTopicArn (an existing SNS topic)", p.EnvName)
	case !slices.Contains([]string{"off", "optional", "required"}, p.CognitoMFA):
		return fmt.Errorf("cognitoMfa %q: want off, optional or required", p.CognitoMFA)
	case !slices.Contains([]string{"off", "audit", "enforced"}, p.CognitoThreatProtection):
		return fmt.Errorf("cognitoThreatProtection %q: want off, audit or enforced", p.CognitoThreatProtection)
	case p.AwaitTimeout != "" && !awaitFits(p.AwaitTimeout):
		return fmt.Errorf("awaitTimeout %q: want a Go duration below the execution's timeout (%v, statemachine/turn.asl.json TimeoutSeconds)", p.AwaitTimeout, ExecutionTimeout)
	case p.LambdaAccountConcurrency < 10:
		return fmt.Errorf("lambdaAccountConcurrency %d: want the account's Lambda concurrency quota (1000 by default)", p.LambdaAccountConcurrency)
	case p.APIThrottleRateLimit < 1 || p.APIThrottleRateLimit > 10000:
		return fmt.Errorf("apiThrottleRateLimit %d: want 1 to 10000 requests per second (the account's limit)", p.APIThrottleRateLimit)
	case p.APIThrottleBurstLimit < 1 || p.APIThrottleBurstLimit > 5000:
		return fmt.Errorf("apiThrottleBurstLimit %d: want 1 to 5000 requests (the account's burst)", p.APIThrottleBurstLimit)
	case (p.GuardrailID == "") != (p.GuardrailVersion == ""):
		return fmt.Errorf("guardrailId %q and guardrailVersion %q: set both (a Bedrock guardrail) or neither (no guardian)", p.GuardrailID, p.GuardrailVersion)
	case p.GuardrailID != "" && !guardrailIDRE.MatchString(p.GuardrailID):
		return fmt.Errorf("guardrailId %q: want the guardrail's id (lowercase letters and digits), not its ARN", p.GuardrailID)
	case p.GuardrailVersion != "" && !guardrailVersionRE.MatchString(p.GuardrailVersion):
		return fmt.Errorf("guardrailVersion %q: want a version number or DRAFT", p.GuardrailVersion)
	}
	for _, b := range []struct{ key, v string }{{CtxConversationQuota, p.ConversationQuota}, {CtxMaxFileSize, p.MaxFileSize}, {CtxFileMinRate, p.FileMinRate}} {
		if b.v != "" && !byteSizeRE.MatchString(b.v) {
			return fmt.Errorf("%s %q: want a size in bytes, e.g. 1048576, 512KiB, 100MiB or 1GiB", b.key, b.v)
		}
	}
	for _, b := range []struct{ key, v string }{{CtxFileTimeout, p.FileTimeout}, {CtxFileRateWindow, p.FileRateWindow}} {
		if d, err := time.ParseDuration(b.v); b.v != "" && (err != nil || d <= 0) {
			return fmt.Errorf("%s %q: want a positive Go duration, e.g. 30s or 2m", b.key, b.v)
		}
	}
	if p.LLM == LLMBedrock {
		for _, m := range bedrockModels(p) {
			if !bedrockModelRE.MatchString(m) {
				return fmt.Errorf("model %q: want a Bedrock model id (amazon.nova-pro-v1:0) or an inference profile id (us.amazon.nova-pro-v1:0), not an ARN", m)
			}
		}
		for _, r := range p.BedrockRegions {
			if !regionRE.MatchString(r) {
				return fmt.Errorf("bedrockRegions %q: want region names such as us-east-1", r)
			}
		}
	}
	if err := checkMCPServers(p.MCPServers); err != nil {
		return err
	}
	for _, name := range append(functionNames(), FnDemoAgents) {
		if name == FnDemoAgents && !p.DemoAgents {
			continue
		}
		bootstrap := filepath.Join(p.BinDir, name, "bootstrap")
		if _, err := os.Stat(bootstrap); err != nil {
			return fmt.Errorf("lambda code %s: %w (run `make build` first)", bootstrap, err)
		}
	}
	if _, err := os.Stat(p.ASLFile); err != nil {
		return fmt.Errorf("state machine definition: %w", err)
	}
	if _, err := os.Stat(p.LoopASLFile()); err != nil {
		return fmt.Errorf("loop state machine definition: %w", err)
	}
	if p.WorkflowsDir != "" {
		if err := checkWorkflowsDir(p.WorkflowsDir); err != nil {
			return err
		}
	}
	return nil
}

// checkWorkflowsDir refuses a workflows folder that would stop every
// function at cold start: no templates, or a file that is not a JSON
// template. The templates are compiled against the skills only where the
// skills are: run `clientagent workflows check DIR` before deploying.
func checkWorkflowsDir(dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("workflowsDir %s: no *.json workflow templates (%v)", dir, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("workflowsDir: %w", err)
		}
		var tpl struct {
			ID    string            `json:"id"`
			Steps []json.RawMessage `json:"steps"`
		}
		if err := json.Unmarshal(b, &tpl); err != nil || tpl.ID == "" || len(tpl.Steps) == 0 {
			return fmt.Errorf("workflowsDir: %s is not a workflow template (want a JSON object with an id and steps; %v)", f, err)
		}
	}
	return nil
}

// retentionDays maps CloudWatch's retention periods to the CDK's names.
var retentionDays = map[int]awslogs.RetentionDays{
	1: awslogs.RetentionDays_ONE_DAY, 3: awslogs.RetentionDays_THREE_DAYS, 5: awslogs.RetentionDays_FIVE_DAYS,
	7: awslogs.RetentionDays_ONE_WEEK, 14: awslogs.RetentionDays_TWO_WEEKS, 30: awslogs.RetentionDays_ONE_MONTH,
	60: awslogs.RetentionDays_TWO_MONTHS, 90: awslogs.RetentionDays_THREE_MONTHS, 120: awslogs.RetentionDays_FOUR_MONTHS,
	150: awslogs.RetentionDays_FIVE_MONTHS, 180: awslogs.RetentionDays_SIX_MONTHS, 365: awslogs.RetentionDays_ONE_YEAR,
	400: awslogs.RetentionDays_THIRTEEN_MONTHS, 545: awslogs.RetentionDays_EIGHTEEN_MONTHS, 731: awslogs.RetentionDays_TWO_YEARS,
	1096: awslogs.RetentionDays_THREE_YEARS, 1827: awslogs.RetentionDays_FIVE_YEARS, 2192: awslogs.RetentionDays_SIX_YEARS,
	2557: awslogs.RetentionDays_SEVEN_YEARS, 2922: awslogs.RetentionDays_EIGHT_YEARS, 3288: awslogs.RetentionDays_NINE_YEARS,
	3653: awslogs.RetentionDays_TEN_YEARS,
}

// PropsFromContext builds the stack's props from CDK context values (strings
// from the command line; cdk.json may also hold booleans, numbers, lists).
// The environment's block of the environments key supplies the values that
// the top level does not set.
func PropsFromContext(get func(key string) any) (*StackProps, error) {
	envName := ""
	if v, ok := get(CtxEnv).(string); ok {
		envName = strings.TrimSpace(v)
	}
	if envName == "" {
		envName = "dev"
	}
	var block map[string]any
	switch envs := get(CtxEnvironments).(type) {
	case nil:
	case map[string]any:
		if b, ok := envs[envName]; ok {
			if block, ok = b.(map[string]any); !ok {
				return nil, fmt.Errorf("context %s.%s: want an object of settings", CtxEnvironments, envName)
			}
		}
	default:
		return nil, fmt.Errorf("context %s: want an object keyed by environment name", CtxEnvironments)
	}
	lookup := func(k string) any {
		if v := get(k); v != nil {
			return v
		}
		return block[k]
	}
	str := func(k string) string {
		switch v := lookup(k).(type) {
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
		if vs, ok := lookup(k).([]any); ok {
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
	// num reads a whole number; zero means the default unless zeroOK.
	num := func(k string, zeroOK bool) (int, error) {
		s := str(k)
		if s == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || (n == 0 && !zeroOK) {
			return 0, fmt.Errorf("context %s=%q: want a positive integer", k, s)
		}
		return n, nil
	}
	boolean := func(k string, dflt bool) (bool, error) {
		s := str(k)
		if s == "" {
			return dflt, nil
		}
		b, err := strconv.ParseBool(s)
		if err != nil {
			return false, fmt.Errorf("context %s=%q: want true or false", k, s)
		}
		return b, nil
	}
	p := &StackProps{
		EnvName:                 envName,
		BinDir:                  str(CtxBinDir),
		ASLFile:                 str(CtxASLFile),
		JWTIssuer:               str(CtxJWTIssuer),
		JWTAudience:             list(CtxJWTAudience),
		WebOrigins:              list(CtxWebOrigins),
		LLM:                     strings.ToLower(str(CtxLLM)),
		Model:                   str(CtxModel),
		ModelSmall:              str(CtxModelSmall),
		ModelLarge:              str(CtxModelLarge),
		OpenAIBaseURL:           str(CtxOpenAIBaseURL),
		OpenAIKeySecretName:     str(CtxOpenAIKeySecretName),
		Agents:                  list(CtxAgents),
		BedrockRegions:          list(CtxBedrockRegions),
		AwaitTimeout:            str(CtxAwaitTimeout),
		WorkflowsDir:            str(CtxWorkflowsDir),
		LogLevel:                str(CtxLogLevel),
		SystemLogLevel:          str(CtxSystemLogLevel),
		StateMachineLogLevel:    str(CtxStateMachineLog),
		ValkeySnapshotTime:      str(CtxValkeySnapshotTime),
		AlarmEmail:              str(CtxAlarmEmail),
		AlarmTopicArn:           str(CtxAlarmTopicArn),
		CognitoMFA:              str(CtxCognitoMFA),
		CognitoThreatProtection: str(CtxCognitoThreat),
		GuardrailID:             str(CtxGuardrailID),
		GuardrailVersion:        str(CtxGuardrailVersion),
	}
	var err error
	if p.MCPServers, err = parseMCPServers(lookup(CtxMCPServers)); err != nil {
		return nil, err
	}
	if p.DemoAgents, err = boolean(CtxDemoAgents, true); err != nil {
		return nil, err
	}
	if p.RetainData, err = boolean(CtxRetainData, false); err != nil {
		return nil, err
	}
	tracing, err := boolean(CtxTracing, true)
	if err != nil {
		return nil, err
	}
	p.Tracing = &tracing
	for _, n := range []struct {
		key    string
		dst    *int
		zeroOK bool
	}{
		{CtxArtifactExpiryDays, &p.ArtifactExpiryDays, false},
		{CtxNATGateways, &p.NATGateways, false},
		{CtxLogRetentionDays, &p.LogRetentionDays, false},
		{CtxValkeyMaxStorageGB, &p.ValkeyMaxStorageGB, false},
		{CtxValkeyMaxECPU, &p.ValkeyMaxECPUPerSecond, false},
		{CtxValkeySnapshotDays, &p.ValkeySnapshotRetentionDays, true},
		{CtxAPIThrottleRate, &p.APIThrottleRateLimit, false},
		{CtxAPIThrottleBurst, &p.APIThrottleBurstLimit, false},
		{CtxAccountConcurrency, &p.LambdaAccountConcurrency, false},
	} {
		if *n.dst, err = num(n.key, n.zeroOK); err != nil {
			return nil, err
		}
	}
	d := p.withDefaults()
	return &d, nil
}

// ReadCDKJSONContext returns the "context" object of a cdk.json file, so
// that `go run .` without the CDK CLI sees the same settings as `cdk deploy`.
func ReadCDKJSONContext(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	var f struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	if f.Context == nil {
		f.Context = map[string]any{}
	}
	return f.Context, nil
}

// LoopASLFile is the turn's EXPRESS loop, loop.asl.json beside ASLFile.
func (p StackProps) LoopASLFile() string {
	return filepath.Join(filepath.Dir(p.ASLFile), "loop.asl.json")
}
