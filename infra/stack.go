// Package main is the CDK app that deploys clientagent to AWS (docs/design.md §7),
// two stacks per environment. The data stack (data.go) holds what holds
// state: the VPC and ElastiCache Serverless Valkey in it, the artifact and
// audit buckets, the Cognito user pool, a created key secret and the log
// groups. The app stack holds the rest and retains nothing: the HTTP API
// with a JWT authorizer, the arm64 provided.al2023 Lambdas built by `make
// build`, the STANDARD state machine from statemachine/turn.asl.json, the
// turn-ended rule, alarms and dashboard. It only describes resources; it
// must not call AWS itself (synthesis works offline).
package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdadestinations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// LLM providers the stack can wire (pkg/llm/llmconfig's CLIENTAGENT_LLM).
const (
	LLMBedrock  = "bedrock"
	LLMOpenAI   = "openai"
	LLMScripted = "scripted"
)

// DefaultBedrockModel is the Converse model id used when the context sets none;
// it supports tool use. Override with `-c model=…` (an inference profile id
// such as us.amazon.nova-pro-v1:0 where on-demand use needs one).
const DefaultBedrockModel = "amazon.nova-pro-v1:0"

// valkeyPorts: ElastiCache Serverless serves the primary endpoint on 6379 and
// the read-replica endpoint on 6380; clients in the Lambdas' security group may
// reach both.
const (
	valkeyPort       = 6379
	valkeyReaderPort = 6380
)

// Function names of the platform (the directories of functions/ and bin/).
const (
	FnAPI        = "api"
	FnLLMStep    = "llmstep"
	FnValidate   = "validate"
	FnInvoke     = "invoke"
	FnAppend     = "append"
	FnAwait      = "await"
	FnDemoAgents = "demoagents"
)

// StepFunctionKeys maps each DefinitionSubstitutions key of
// statemachine/turn.asl.json to the function that the state runs. The api
// function is deliberately absent: it answers task tokens, so the state
// machine must not depend on it (docs/design.md §7, no template cycle).
var StepFunctionKeys = map[string]string{
	"LLMStepFunction":  FnLLMStep,
	"ValidateFunction": FnValidate,
	"AwaitFunction":    FnAwait,
	"InvokeFunction":   FnInvoke,
	"AppendFunction":   FnAppend,
}

// functionSpec is the sizing of one Lambda.
type functionSpec struct {
	name    string
	memory  float64
	timeout float64 // seconds; plain numbers so that package init makes no jsii call
	desc    string
}

// platformFunctions are the Lambdas that build pkg/platform from their
// environment (VALKEY_URL, ARTIFACT_BUCKET, the model) and run in the VPC.
// invoke is the longest step: one specialist call may take 5 minutes
// (platform.InvokeTimeout) plus the artifact transfers around it. Live
// events need no function: AppSync Events holds the connections (events.go).
var platformFunctions = []functionSpec{
	{FnAPI, 512, 29, "HTTP API (docs/api/openapi.yaml); answers task tokens"},
	{FnLLMStep, 512, 120, "turn step: one LLM call with every tool"},
	{FnValidate, 256, 60, "turn step: batch validation"},
	{FnInvoke, 1024, 360, "turn step: one specialist (A2A) call"},
	{FnAppend, 256, 60, "turn step: results into the transcript"},
	{FnAwait, 256, 30, "turn step: stores the task token of a pause"},
}

// AgentCallers are the functions that talk to specialists: api, llmstep,
// validate and append build the tool catalogue from the agent cards, and
// invoke calls the skills. await does neither.
var AgentCallers = []string{FnAPI, FnLLMStep, FnValidate, FnInvoke, FnAppend}

// GuardianFunctions are the functions that run the guardian's checks
// (pkg/guardian): llmstep the user's message, validate each tool call's
// arguments, append each tool result.
var GuardianFunctions = []string{FnLLMStep, FnValidate, FnAppend}

// TurnStatuses are the statuses a turn ends with (record.Status.Final): the
// Status dimension of the TurnEnded metric on the dashboard.
var TurnStatuses = []string{"succeeded", "failed", "blocked", "cancelled", "expired", "superseded"}

// TaskTokenActions answer a paused execution's task token (api only):
// what pkg/api calls, nothing more (TestTaskTokenActionsAreWhatAPICalls).
// A pause never fails through its token or beats: a rejected or expired
// question is an answer too.
var TaskTokenActions = []string{"states:SendTaskSuccess"}

// AccessLogFormat is the HTTP API's access log line: JSON, one object per
// request, with the caller's subject but no header or body.
const AccessLogFormat = `{"requestId":"$context.requestId","ip":"$context.identity.sourceIp","requestTime":"$context.requestTime",` +
	`"method":"$context.httpMethod","routeKey":"$context.routeKey","path":"$context.path","status":"$context.status",` +
	`"protocol":"$context.protocol","responseLength":"$context.responseLength","responseLatency":"$context.responseLatency",` +
	`"integrationLatency":"$context.integrationLatency","integrationError":"$context.integrationErrorMessage",` +
	`"authorizerError":"$context.authorizer.error","user":"$context.authorizer.claims.sub"}`

func functionNames() []string {
	out := make([]string, 0, len(platformFunctions))
	for _, f := range platformFunctions {
		out = append(out, f.name)
	}
	return out
}

// ASLPlaceholders returns the ${Key} substitution keys used in an ASL
// document, sorted and without duplicates.
func ASLPlaceholders(asl string) []string {
	var keys []string
	for _, m := range placeholderRE.FindAllStringSubmatch(asl, -1) {
		if !slices.Contains(keys, m[1]) {
			keys = append(keys, m[1])
		}
	}
	slices.Sort(keys)
	return keys
}

var placeholderRE = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)\}`)

// AppStackName names an environment's app stack: what may be deleted and
// created again at will (`make destroy` deletes it alone).
func AppStackName(env string) string { return "clientagent-" + env }

// DataStackName names an environment's data stack: what holds state (data.go).
func DataStackName(env string) string { return "clientagent-" + env + "-data" }

// Deployment is one environment's two stacks. App uses Data through
// cross-stack references (CloudFormation exports), so Data is deployed first
// and App deleted first; `make destroy` deletes App alone (docs/deploy.md).
type Deployment struct {
	Data awscdk.Stack
	App  awscdk.Stack
}

// NewDeployment defines the stacks of one environment. It panics on an
// invalid configuration, as CDK constructs do; call props.Validate first
// for an error instead.
func NewDeployment(scope constructs.Construct, props *StackProps) Deployment {
	if props == nil {
		props = &StackProps{}
	}
	if err := props.Validate(); err != nil {
		panic(fmt.Sprintf("clientagent %s: %v", props.withDefaults().EnvName, err))
	}
	p := props.withDefaults()
	data := newDataStack(scope, p)
	return Deployment{Data: data.stack, App: newAppStack(scope, p, data)}
}

// newAppStack defines the app stack: the functions, the state machine,
// the HTTP API, the rules, alarms and dashboard. It retains nothing, and
// what it names is deleted with it, so it can be deleted and deployed again
// at any time; the data it uses lives in the data stack d.
//
// Each step below adds one part and records on the appStack what later
// steps use. The order is the template's: CloudFormation output follows the
// order in which constructs are added, so a reordering changes the template.
func newAppStack(scope constructs.Construct, p StackProps, d *dataStack) awscdk.Stack {
	a := &appStack{p: p, d: d, prefix: "clientagent-" + p.EnvName, fns: map[string]awslambda.Function{}}
	a.newStack(scope)
	a.addDemoAgents()
	a.addFunctions()
	a.allowAgentCalls()
	a.allowBuckets()
	a.addGuardian()
	addMCPServers(a.stack, p, a.fns)
	a.addModel()
	a.addStateMachine()
	a.addTurnEndedRule()
	a.allowTurnControl()
	a.addAuth()
	a.addHTTPAPI()
	a.addLiveEvents()
	a.addAlarms()
	newDashboard(a.stack, a.prefix, a.namespace(), a.sm, a.fns, a.alarmed, a.continuations, d.cache.Ref())
	a.addOutputs()
	return a.stack
}

// appStack is the app stack while it is being defined: its settings, the
// data stack it uses, and what each step adds for the later ones.
type appStack struct {
	p      StackProps
	d      *dataStack
	stack  awscdk.Stack
	prefix string // clientagent-<env>: the start of every name

	// fns are the functions by name (FnAPI …), the demo specialists'
	// (FnDemoAgents) from addAlarms on.
	fns map[string]awslambda.Function
	// demo and demoURL exist only with DemoAgents.
	demo    awslambda.Function
	demoURL awslambda.FunctionUrl
	// agentURLs are the specialists' A2A URLs (CLIENTAGENT_AGENTS).
	agentURLs []string

	// sm is the turn's STANDARD state machine; loop the EXPRESS one its
	// executions start for the loop.
	sm           awsstepfunctions.StateMachine
	loop         awsstepfunctions.StateMachine
	turnEndedDLQ awssqs.Queue
	// issuer and audience are what the JWT authorizer and the events
	// function accept.
	issuer   *string
	audience *[]*string
	httpAPI  awsapigatewayv2.HttpApi

	topic         awssns.ITopic
	continuations awslogs.MetricFilter
	// alarmed are the functions with errors and throttles alarms (and
	// dashboard graphs): the platform's and the demo specialists'.
	alarmed []functionSpec
}

// namespace is the CloudWatch namespace of the functions' own metrics
// (pkg/metrics, CLIENTAGENT_METRICS_NAMESPACE).
func (a *appStack) namespace() string { return "clientagent/" + a.p.EnvName }

// newStack creates the stack itself, tagged, and warns of a deployment no
// browser may use or that has no specialists.
func (a *appStack) newStack(scope constructs.Construct) {
	sprops := a.p.StackProps
	if sprops.Description == nil {
		sprops.Description = jsii.String("clientagent (" + a.p.EnvName + "): LLM tool-calling orchestrator")
	}
	a.stack = awscdk.NewStack(scope, jsii.String(AppStackName(a.p.EnvName)), &sprops)
	tag(a.stack, a.p)
	if len(a.p.WebOrigins) == 0 {
		awscdk.Annotations_Of(a.stack).AddWarningV2(jsii.String("clientagent:noWebOrigins"),
			jsii.String("webOrigins is empty: no browser origin may call the API (CLI only); set -c webOrigins=https://… for the web page"), nil)
	}
	if !a.p.DemoAgents && len(a.p.Agents) == 0 && len(a.p.MCPServers) == 0 {
		awscdk.Annotations_Of(a.stack).AddWarningV2(jsii.String("clientagent:noSpecialists"),
			jsii.String("no specialists: demoAgents is off and neither agents nor mcpServers is set, so the model has no tools and no workflow template can run; set -c agents=https://… (A2A) or mcpServers"), nil)
	}
}

// placement puts a function in the VPC's private subnets, in its own
// security group.
func (a *appStack) placement(fn string) *vpcPlacement {
	return &vpcPlacement{vpc: a.d.vpc, sg: a.d.fnSGs[fn]}
}

// allowValkey makes fn sign in to the cache as its own user with IAM
// (pkg/record/valkey/valkeyiam): elasticache:Connect on the cache and that
// user alone.
func (a *appStack) allowValkey(fn awslambda.Function, name string) {
	fn.AddEnvironment(jsii.String("VALKEY_AUTH"), jsii.String("iam"), nil)
	fn.AddEnvironment(jsii.String("VALKEY_USER"), a.d.valkeyUsers[name], nil)
	fn.AddEnvironment(jsii.String("VALKEY_CACHE_NAME"), a.d.cache.Ref(), nil)
	allow(fn, "ValkeyConnect", []string{"elasticache:Connect"}, a.d.valkeyConnectARNs(name)...)
}

// addDemoAgents adds the demo specialists (DemoAgents): A2A endpoints on a
// Function URL with IAM auth (only the functions granted in
// allowAgentCalls may call it, each request signed with SigV4), in the
// VPC, so their tasks and publication ledger live in Valkey: an
// input-required answer may reach another instance than the question, and
// a retried publish must not publish twice. They fetch inputs by presigned
// URL.
func (a *appStack) addDemoAgents() {
	a.agentURLs = slices.Clone(a.p.Agents)
	if !a.p.DemoAgents {
		return
	}
	// Their logs are not data the deployment keeps: they go with the app.
	demoLogs := awslogs.NewLogGroup(a.stack, jsii.String("FnDemoagentsLogs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("/aws/lambda/" + a.prefix + "-" + FnDemoAgents),
		Retention:     retentionDays[a.p.LogRetentionDays],
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	a.demo = newFunction(a.stack, a.p, functionSpec{FnDemoAgents, 512, 120, "demo A2A specialists"}, a.placement(FnDemoAgents), demoLogs)
	// PUBLIC_URL stays empty: the function takes its base URL from each
	// request's Host, since its own URL in its environment would be a cycle.
	a.demo.AddEnvironment(jsii.String("VALKEY_URL"), a.d.valkeyURL, nil)
	a.allowValkey(a.demo, FnDemoAgents)
	if a.p.TracingOn() {
		// The agents join a turn's trace through the A2A request's traceparent.
		a.demo.AddEnvironment(jsii.String("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), xrayOTLPEndpoint(), nil)
		allowXRayOTLP(a.demo)
	}
	a.demoURL = a.demo.AddFunctionUrl(&awslambda.FunctionUrlOptions{AuthType: awslambda.FunctionUrlAuthType_AWS_IAM})
	for _, path := range []string{"agents/svg", "agents/png", "agents/flange", "agents/publish"} {
		// The URL attribute ends with "/".
		a.agentURLs = append(a.agentURLs, *a.demoURL.Url()+path)
	}
}

// functionEnv is the environment every platform function gets: the
// store, the buckets, the model and the specialists.
func (a *appStack) functionEnv() map[string]*string {
	p := a.p
	env := map[string]*string{
		"CLIENTAGENT_ENV": jsii.String(p.EnvName),
		"VALKEY_URL":      a.d.valkeyURL,
		"ARTIFACT_BUCKET": a.d.artifacts.BucketName(),
		"AUDIT_BUCKET":    a.d.audit.BucketName(),
		"CLIENTAGENT_LLM": jsii.String(p.LLM),
		// pkg/metrics writes its Embedded Metric Format lines to this namespace.
		"CLIENTAGENT_METRICS_NAMESPACE": jsii.String(a.namespace()),
	}
	if p.TracingOn() {
		// One trace per turn (pkg/telemetry): each function exports its
		// spans straight to X-Ray's OTLP endpoint, SigV4-signed
		// (pkg/platform/lambdatrace), at the end of each invocation.
		env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = xrayOTLPEndpoint()
	}
	if len(a.agentURLs) > 0 {
		// Tokens inside a Go string (the demo URL) resolve to an Fn::Join.
		env["CLIENTAGENT_AGENTS"] = jsii.String(strings.Join(a.agentURLs, ","))
	}
	for k, v := range map[string]string{
		"CLIENTAGENT_MODEL":         p.Model,
		"CLIENTAGENT_MODEL_SMALL":   p.ModelSmall,
		"CLIENTAGENT_MODEL_LARGE":   p.ModelLarge,
		"OPENAI_BASE_URL":           p.OpenAIBaseURL,
		"CLIENTAGENT_AWAIT_TIMEOUT": p.AwaitTimeout,
		// The file bounds (pkg/platform FilesFromEnv).
		"CLIENTAGENT_CONVERSATION_QUOTA": p.ConversationQuota,
		"CLIENTAGENT_MAX_FILE_SIZE":      p.MaxFileSize,
		"CLIENTAGENT_FILE_TIMEOUT":       p.FileTimeout,
		"CLIENTAGENT_FILE_MIN_RATE":      p.FileMinRate,
		"CLIENTAGENT_FILE_RATE_WINDOW":   p.FileRateWindow,
	} {
		if v != "" {
			env[k] = jsii.String(v)
		}
	}
	return env
}

// addFunctions adds the platform functions (platformFunctions), each with
// the common environment, and the deployment's workflow templates as a
// layer under /opt: code, not data, so it goes with the app stack.
func (a *appStack) addFunctions() {
	env := a.functionEnv()
	var layers []awslambda.ILayerVersion
	if a.p.WorkflowsDir != "" {
		layers = append(layers, awslambda.NewLayerVersion(a.stack, jsii.String("Workflows"), &awslambda.LayerVersionProps{
			Code:                    awslambda.Code_FromAsset(jsii.String(a.p.WorkflowsDir), nil),
			CompatibleArchitectures: &[]awslambda.Architecture{awslambda.Architecture_ARM_64()},
			CompatibleRuntimes:      &[]awslambda.Runtime{awslambda.Runtime_PROVIDED_AL2023()},
			Description:             jsii.String(a.prefix + " workflow templates (docs/workflows.md)"),
			RemovalPolicy:           awscdk.RemovalPolicy_DESTROY,
		}))
		env["CLIENTAGENT_WORKFLOWS_DIR"] = jsii.String("/opt")
	}
	for _, spec := range platformFunctions {
		fn := newFunction(a.stack, a.p, spec, a.placement(spec.name), a.d.fnLogs[spec.name])
		for _, k := range slices.Sorted(maps.Keys(env)) {
			fn.AddEnvironment(jsii.String(k), env[k], nil)
		}
		a.allowValkey(fn, spec.name)
		if a.p.TracingOn() {
			allowXRayOTLP(fn)
		}
		if len(layers) > 0 {
			fn.AddLayers(layers...)
		}
		a.fns[spec.name] = fn
	}
}

// allowAgentCalls lets the functions that build the tool catalogue fetch
// the agent cards, and invoke call the skills: with the demo specialists
// behind IAM auth they sign their requests (pkg/agents,
// CLIENTAGENT_AGENT_AUTH) and may call that URL. await never reads the
// catalogue.
func (a *appStack) allowAgentCalls() {
	if a.demoURL == nil {
		return
	}
	for _, name := range AgentCallers {
		a.fns[name].AddEnvironment(jsii.String("CLIENTAGENT_AGENT_AUTH"), jsii.String("sigv4"), nil)
		// lambda:InvokeFunctionUrl for an AWS_IAM URL, and, as Lambda
		// requires of URLs created since October 2025, lambda:InvokeFunction
		// when invoked through a URL (lambda:InvokedViaFunctionUrl).
		a.demoURL.GrantInvokeUrl(a.fns[name])
	}
}

// allowBuckets grants the buckets' actions, explicitly rather than by the
// CDK's grants, whose action lists hold wildcards (s3:GetObject*, s3:List*,
// s3:Abort*).
func (a *appStack) allowBuckets() {
	bucket, auditBucket := a.d.artifacts, a.d.audit
	// Only these two touch artifact bytes: api (uploads, presigned
	// downloads, deleting a conversation's artifacts) and invoke
	// (specialists' inputs and outputs). ListBucket makes a missing key a
	// 404 rather than a 403.
	objects := func(b awss3.Bucket) *string { return b.ArnForObjects(jsii.String("*")) }
	allow(a.fns[FnAPI], "ArtifactObjects", []string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}, objects(bucket))
	allow(a.fns[FnAPI], "ArtifactList", []string{"s3:ListBucket"}, bucket.BucketArn())
	allow(a.fns[FnInvoke], "ArtifactObjects", []string{"s3:GetObject", "s3:PutObject"}, objects(bucket))
	allow(a.fns[FnInvoke], "ArtifactList", []string{"s3:ListBucket"}, bucket.BucketArn())
	// Only the handlers that record decisions and calls write the audit
	// log, and none may read or delete it: validate (approvals, edits,
	// rejections, superseded and expired batches), invoke (executed calls:
	// only it knows a specialist ran), llmstep (FailTurn closes a batch's
	// unrun calls) and api (it records the failure of a dead execution the
	// same way, turn.RecordFailure).
	for _, name := range []string{FnValidate, FnInvoke, FnLLMStep, FnAPI} {
		allow(a.fns[name], "AuditPut", []string{"s3:PutObject"}, objects(auditBucket))
	}
}

// addGuardian wires the guardian: a Bedrock guardrail of the
// environment's (cdk.json guardrailId, guardrailVersion), applied by the
// functions that check, each allowed to apply that guardrail and no other.
func (a *appStack) addGuardian() {
	if a.p.GuardrailID == "" {
		return
	}
	guardrail := jsii.String("arn:" + *awscdk.Aws_PARTITION() + ":bedrock:" + *awscdk.Aws_REGION() + ":" + *awscdk.Aws_ACCOUNT_ID() + ":guardrail/" + a.p.GuardrailID)
	for _, name := range GuardianFunctions {
		a.fns[name].AddEnvironment(jsii.String("CLIENTAGENT_GUARDIAN"), jsii.String("bedrock:"+a.p.GuardrailID+":"+a.p.GuardrailVersion), nil)
		allow(a.fns[name], "BedrockApplyGuardrail", []string{"bedrock:ApplyGuardrail"}, guardrail)
	}
}

// addModel lets the one function that calls the model, llmstep (pkg/turn's
// LLMStep), reach it: Bedrock's Converse, or the OpenAI-compatible key.
func (a *appStack) addModel() {
	llmFn := a.fns[FnLLMStep]
	switch a.p.LLM {
	case LLMBedrock:
		allowBedrockModels(llmFn, a.p) // bedrock.go
	case LLMOpenAI:
		// The key stays in Secrets Manager: llmstep gets the secret's id and
		// reads the value at cold start (pkg/llm/llmconfig), so neither the
		// template nor the function's configuration ever holds it.
		var secret awssecretsmanager.ISecret
		secretID := jsii.String(a.p.OpenAIKeySecretName)
		if a.d.openAIKey != nil {
			secret, secretID = a.d.openAIKey, a.d.openAIKey.SecretArn()
			awscdk.NewCfnOutput(a.stack, jsii.String("OpenAIKeySecretArn"), &awscdk.CfnOutputProps{
				Value: secretID, Description: jsii.String("the created secret of the OpenAI-compatible key: put the real key in it"),
			})
		} else {
			secret = awssecretsmanager.Secret_FromSecretNameV2(a.stack, jsii.String("OpenAIKey"), secretID)
		}
		// GrantRead gives exactly GetSecretValue and DescribeSecret, on the
		// secret's ARN (with the random suffix matched for a secret by name).
		secret.GrantRead(llmFn, nil)
		llmFn.AddEnvironment(jsii.String("OPENAI_API_KEY_SECRET_ARN"), secretID, nil)
	}
}

// addStateMachine adds the turn's two state machines from the repository's
// ASL files as they are: the EXPRESS loop (loop.asl.json: the LLM steps,
// validation, the calls and the appends) and the STANDARD turn
// (turn.asl.json: it runs the loop with startExecution.sync:2 and keeps the
// waits for the user). CloudFormation substitutes the step functions' ARNs
// and the loop's; each machine may invoke exactly the functions its file
// names.
func (a *appStack) addStateMachine() {
	p := a.p
	read := func(file string) string {
		b, err := os.ReadFile(file)
		if err != nil {
			panic(fmt.Sprintf("read state machine definition: %v", err))
		}
		return string(b)
	}
	loopASL, turnASL := read(p.LoopASLFile()), read(p.ASLFile)
	subsFor := func(file, asl string, extra map[string]*string) (map[string]*string, []string) {
		subs := map[string]*string{}
		var fns []string
		for _, key := range ASLPlaceholders(asl) {
			if v, ok := extra[key]; ok {
				subs[key] = v
				continue
			}
			name, ok := StepFunctionKeys[key]
			if !ok {
				panic(fmt.Sprintf("%s uses ${%s}, which the stack does not provide", file, key))
			}
			subs[key] = a.fns[name].FunctionArn()
			fns = append(fns, name)
		}
		return subs, fns
	}
	logs := func(dest awslogs.ILogGroup, level string) *awsstepfunctions.LogOptions {
		return &awsstepfunctions.LogOptions{
			Destination: dest,
			Level:       awsstepfunctions.LogLevel(level),
			// Payloads carry ids, but a form's answers pass through too.
			IncludeExecutionData: jsii.Bool(false),
		}
	}
	loopSubs, loopFns := subsFor(p.LoopASLFile(), loopASL, nil)
	// An EXPRESS execution's history exists only in its logs: ALL keeps
	// every state's entry and exit (names, errors, no payloads), so a
	// turn's loop stays debuggable in every environment.
	a.loop = awsstepfunctions.NewStateMachine(a.stack, jsii.String("LoopStateMachine"), &awsstepfunctions.StateMachineProps{
		StateMachineName:        jsii.String(a.prefix + "-loop"),
		StateMachineType:        awsstepfunctions.StateMachineType_EXPRESS,
		DefinitionBody:          awsstepfunctions.DefinitionBody_FromString(jsii.String(loopASL)),
		DefinitionSubstitutions: &loopSubs,
		TracingEnabled:          jsii.Bool(p.TracingOn()),
		Logs:                    logs(a.d.loopLogs, "ALL"),
	})
	turnSubs, turnFns := subsFor(p.ASLFile, turnASL, map[string]*string{"LoopStateMachine": a.loop.StateMachineArn()})
	a.sm = awsstepfunctions.NewStateMachine(a.stack, jsii.String("TurnStateMachine"), &awsstepfunctions.StateMachineProps{
		StateMachineName:        jsii.String(a.prefix + "-turn"),
		StateMachineType:        awsstepfunctions.StateMachineType_STANDARD,
		DefinitionBody:          awsstepfunctions.DefinitionBody_FromString(jsii.String(turnASL)),
		DefinitionSubstitutions: &turnSubs,
		TracingEnabled:          jsii.Bool(p.TracingOn()),
		Logs:                    logs(a.d.turnLogs, p.StateMachineLogLevel),
	})
	// Sorted, like every map iteration here, so that the template is stable.
	for _, m := range []struct {
		sm  awsstepfunctions.StateMachine
		fns []string
	}{{a.loop, loopFns}, {a.sm, turnFns}} {
		slices.Sort(m.fns)
		for _, name := range slices.Compact(m.fns) {
			a.fns[name].GrantInvoke(m.sm.Role())
		}
		suppress(m.sm.Role(), "AwsSolutions-IAM5", "GrantInvoke names each step function's ARN and its versions (<arn>:*); "+
			"Resource * is Step Functions' own log delivery and X-Ray, whose actions take no resource; "+
			"the loop's executions are execution:<loop>:* and express:<loop>:* (a .sync task describes and stops the child it started)",
			`/^Resource::<Fn[A-Za-z]+[0-9A-F]{8}\.Arn>:\*$/`, `/^Resource::\*$/`,
			`/^Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:(execution|express):.*-loop:\*$/`)
		if !p.TracingOn() {
			suppress(m.sm, "AwsSolutions-SF2", "tracing is the environment's setting (tracing: on in dev, staging and prod); off here on purpose")
		}
	}
	a.allowLoopSync()
	if p.StateMachineLogLevel != "ALL" {
		suppress(a.sm, "AwsSolutions-SF1", "the log level is the environment's stateMachineLogLevel: ALL in dev, ERROR elsewhere "+
			"(every execution's full history stays in Step Functions for 90 days; a turn's own record is in Valkey)")
	}
}

// SyncRuleName is the EventBridge rule Step Functions manages for the
// .sync integrations: the parent's role must create and read it.
const SyncRuleName = "StepFunctionsGetEventsForStepFunctionsExecutionRule"

// allowLoopSync lets the turn's role run the loop with
// startExecution.sync:2: start it, describe and stop its executions, and
// keep the managed rule through which Step Functions learns that a child
// ended.
func (a *appStack) allowLoopSync() {
	role := a.sm.Role()
	partition, region, account := *awscdk.Aws_PARTITION(), *awscdk.Aws_REGION(), *awscdk.Aws_ACCOUNT_ID()
	name := a.prefix + "-loop"
	statement := func(sid string, actions []string, resources ...string) {
		role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String(sid), Actions: jsii.Strings(actions...), Resources: jsii.Strings(resources...),
		}))
	}
	statement("StartLoop", []string{"states:StartExecution"}, *a.loop.StateMachineArn())
	statement("DescribeAndStopLoop", []string{"states:DescribeExecution", "states:StopExecution"},
		"arn:"+partition+":states:"+region+":"+account+":execution:"+name+":*",
		"arn:"+partition+":states:"+region+":"+account+":express:"+name+":*")
	statement("SyncRule", []string{"events:PutTargets", "events:PutRule", "events:DescribeRule"},
		"arn:"+partition+":events:"+region+":"+account+":rule/"+SyncRuleName)
}

// addTurnEndedRule ends, in its record, a turn whose execution failed,
// timed out or was stopped without a step recording it (FailTurn could not
// reach Valkey, an operator stopped it): llmstep does it
// (turn.ExecutionEnded), which EventBridge invokes asynchronously; a turn
// already ended is left as it is. (A turn a limit ended is not among them:
// its execution succeeds, the turn reading failed with its message.)
func (a *appStack) addTurnEndedRule() {
	llmFn := a.fns[FnLLMStep]
	turnEnded := awsevents.NewRule(a.stack, jsii.String("TurnEnded"), &awsevents.RuleProps{
		RuleName:    jsii.String(a.prefix + "-turn-ended"),
		Description: jsii.String("a turn's execution ended abnormally: llmstep records it on the turn"),
		EventPattern: &awsevents.EventPattern{
			Source:     jsii.Strings("aws.states"),
			DetailType: jsii.Strings("Step Functions Execution Status Change"),
			Detail: &map[string]interface{}{
				"stateMachineArn": []interface{}{a.sm.StateMachineArn()},
				"status":          []interface{}{"FAILED", "TIMED_OUT", "ABORTED"},
			},
		},
	})
	// An event that cannot be delivered (EventBridge gave up) or whose
	// handling failed (Lambda's asynchronous retries spent) lands in one
	// queue, which an alarm watches, instead of vanishing: the turn it
	// names may still read as running, and the message says which.
	a.turnEndedDLQ = awssqs.NewQueue(a.stack, jsii.String("TurnEndedDLQ"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
	})
	suppress(a.turnEndedDLQ, "AwsSolutions-SQS3", "it is the dead-letter queue: of the turn-ended rule's target and of llmstep's asynchronous invocations (an alarm watches it)")
	turnEnded.AddTarget(awseventstargets.NewLambdaFunction(llmFn, &awseventstargets.LambdaFunctionProps{
		RetryAttempts:   jsii.Number(8),
		MaxEventAge:     awscdk.Duration_Hours(jsii.Number(6)),
		DeadLetterQueue: a.turnEndedDLQ,
	}))
	// Only EventBridge invokes llmstep asynchronously (the state machine
	// waits for it), so this applies to the turn-ended events alone.
	llmFn.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
		RetryAttempts: jsii.Number(2),
		MaxEventAge:   awscdk.Duration_Hours(jsii.Number(6)),
		OnFailure:     awslambdadestinations.NewSqsDestination(a.turnEndedDLQ),
	})
}

// allowTurnControl lets api start and inspect turns and answer their task
// tokens; the state machine never references api, so the template has no
// cycle. await, which the pause invokes, stores the token and cannot answer
// it (docs/design.md §7).
func (a *appStack) allowTurnControl() {
	api := a.fns[FnAPI]
	api.AddEnvironment(jsii.String("STATE_MACHINE_ARN"), a.sm.StateMachineArn(), nil)
	a.sm.GrantStartExecution(api)
	a.sm.GrantExecution(api, jsii.String("states:DescribeExecution"), jsii.String("states:StopExecution"))
	// A task token names its execution, not a resource IAM could match: the
	// service authorization reference lists no resource type for
	// SendTaskSuccess, so a statement naming the state machine matches no
	// request. Its resource is "*", for this action alone
	// (TestWildcardResourcesOnlyWhereRequired).
	allow(api, "AnswerTaskTokens", TaskTokenActions, jsii.String("*"))
	suppress(api.Role(), "AwsSolutions-IAM5", "DescribeExecution and StopExecution on the executions of the turn state machine alone (execution:<machine>:*)",
		`/^Resource::arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:.*:\*$/`)
}

// addAuth sets who may call: the given issuer, or the data stack's
// Cognito user pool.
func (a *appStack) addAuth() {
	a.issuer, a.audience = jsii.String(a.p.JWTIssuer), jsii.Strings(a.p.JWTAudience...)
	if a.d.pool == nil {
		return
	}
	// API Gateway checks a Cognito access token's client_id (it has no
	// aud) and an ID token's aud against the audience: both work.
	// The issuer as Cognito writes it into tokens (ProviderURL lacks https://).
	a.issuer = awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("https://cognito-idp."), awscdk.Aws_REGION(), jsii.String("."), awscdk.Aws_URL_SUFFIX(), jsii.String("/"), a.d.pool.UserPoolId(),
	})
	a.audience = &[]*string{a.d.client.UserPoolClientId()}
	awscdk.NewCfnOutput(a.stack, jsii.String("UserPoolId"), &awscdk.CfnOutputProps{
		Value: a.d.pool.UserPoolId(), Description: jsii.String("the Cognito user pool (create users here)"),
	})
	awscdk.NewCfnOutput(a.stack, jsii.String("UserPoolClientId"), &awscdk.CfnOutputProps{
		Value: a.d.client.UserPoolClientId(), Description: jsii.String("the app client of the web page and the CLI (the JWT audience)"),
	})
}

// addHTTPAPI adds the HTTP API: every /v1 route through the JWT authorizer
// to api.
func (a *appStack) addHTTPAPI() {
	p := a.p
	var cors *awsapigatewayv2.CorsPreflightOptions
	if len(p.WebOrigins) > 0 {
		cors = &awsapigatewayv2.CorsPreflightOptions{
			AllowOrigins: jsii.Strings(p.WebOrigins...),
			AllowMethods: &[]awsapigatewayv2.CorsHttpMethod{
				awsapigatewayv2.CorsHttpMethod_GET, awsapigatewayv2.CorsHttpMethod_POST,
				awsapigatewayv2.CorsHttpMethod_PUT, awsapigatewayv2.CorsHttpMethod_PATCH,
				awsapigatewayv2.CorsHttpMethod_DELETE, awsapigatewayv2.CorsHttpMethod_OPTIONS,
			},
			AllowHeaders:  jsii.Strings("authorization", "content-type"),
			ExposeHeaders: jsii.Strings("location", "www-authenticate", "retry-after"),
			MaxAge:        awscdk.Duration_Hours(jsii.Number(1)),
		}
	}
	a.httpAPI = awsapigatewayv2.NewHttpApi(a.stack, jsii.String("HttpApi"), &awsapigatewayv2.HttpApiProps{
		ApiName:       jsii.String(a.prefix),
		Description:   jsii.String("clientagent HTTP API (docs/api/openapi.yaml)"),
		CorsPreflight: cors,
	})
	// The $default stage: the environment's default throttling for every
	// route, and a JSON access log line per request in the data stack's log
	// group (API Gateway delivers it through its service-linked role).
	stage := a.httpAPI.DefaultStage().Node().DefaultChild().(awsapigatewayv2.CfnStage)
	stage.SetDefaultRouteSettings(&awsapigatewayv2.CfnStage_RouteSettingsProperty{
		ThrottlingRateLimit:  jsii.Number(float64(p.APIThrottleRateLimit)),
		ThrottlingBurstLimit: jsii.Number(float64(p.APIThrottleBurstLimit)),
	})
	stage.SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
		DestinationArn: a.d.accessLogs.LogGroupArn(),
		Format:         jsii.String(AccessLogFormat),
	})
	authorizer := awsapigatewayv2authorizers.NewHttpJwtAuthorizer(jsii.String("Jwt"), a.issuer,
		&awsapigatewayv2authorizers.HttpJwtAuthorizerProps{
			AuthorizerName: jsii.String(a.prefix + "-jwt"),
			JwtAudience:    a.audience,
		})
	// Named methods rather than ANY, so that CORS preflights (OPTIONS) are
	// answered by API Gateway and never meet the authorizer.
	a.httpAPI.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
		Path: jsii.String("/v1/{proxy+}"),
		Methods: &[]awsapigatewayv2.HttpMethod{
			awsapigatewayv2.HttpMethod_GET, awsapigatewayv2.HttpMethod_POST, awsapigatewayv2.HttpMethod_PUT,
			awsapigatewayv2.HttpMethod_PATCH, awsapigatewayv2.HttpMethod_DELETE,
		},
		Integration: awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String("Api"), a.fns[FnAPI], nil),
		Authorizer:  authorizer,
	})
}

// addLiveEvents adds the delivery of a conversation's live events, which
// the HTTP API cannot stream: an AppSync Events API whose channels the page
// and the CLI subscribe to with the same JWT, and the steps publish to
// (events.go).
func (a *appStack) addLiveEvents() {
	addLiveEvents(a.stack, a.p, a.d, a.fns, a.issuer)
}

// addOutputs adds the stack's outputs: what an operator, the web page and
// the CLI need to reach the deployment.
func (a *appStack) addOutputs() {
	output := func(id string, value *string, desc string) {
		awscdk.NewCfnOutput(a.stack, jsii.String(id), &awscdk.CfnOutputProps{Value: value, Description: jsii.String(desc)})
	}
	output("ApiUrl", a.httpAPI.ApiEndpoint(), "base URL of the HTTP API (append /v1/…)")
	output("JwtIssuer", a.issuer, "the issuer the JWT authorizer accepts")
	output("StateMachineArn", a.sm.StateMachineArn(), "the turn state machine")
	output("ArtifactBucketName", a.d.artifacts.BucketName(), "the artifact bucket")
	output("AuditBucketName", a.d.audit.BucketName(), "the audit log of approvals and executed calls")
	output("ValkeyEndpoint", a.d.cache.AttrEndpointAddress(), "ElastiCache Serverless Valkey (TLS, port 6379)")
	output("AlarmTopicArn", a.topic.TopicArn(), "SNS topic of the alarms (subscribe to be told)")
	if a.demoURL != nil {
		output("DemoAgentsUrl", a.demoURL.Url(), "the demo A2A specialists (agents/svg, agents/png, …; IAM auth, SigV4-signed requests only)")
	}
}

// xrayOTLPEndpoint is X-Ray's OTLP traces endpoint in the stack's region
// and partition (amazonaws.com.cn in China: AWS::URLSuffix).
func xrayOTLPEndpoint() *string {
	return jsii.String("https://xray." + *awscdk.Aws_REGION() + "." + *awscdk.Aws_URL_SUFFIX() + "/v1/traces")
}

// allowXRayOTLP lets fn send spans to X-Ray's OTLP endpoint, which
// authorizes a request as xray:PutTraceSegments; X-Ray has no resource
// types, hence "*".
func allowXRayOTLP(fn awslambda.Function) {
	allow(fn, "XRayOTLPSpans", []string{"xray:PutTraceSegments"}, jsii.String("*"))
}

// allow adds one explicit statement to a function's role.
func allow(fn awslambda.Function, sid string, actions []string, resources ...*string) {
	fn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String(sid),
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
	}))
}

// vpcPlacement puts a function in the VPC's private subnets.
type vpcPlacement struct {
	vpc awsec2.IVpc
	sg  awsec2.ISecurityGroup
}

// functionID is a function's construct id stem: api → Api.
func functionID(name string) string {
	return strings.ToUpper(name[:1]) + name[1:]
}

// newFunction defines one Lambda from BinDir/<name>/bootstrap, logging to
// logs, with a role of its own that holds only explicit statements: no AWS
// managed policies (AWSLambdaBasicExecutionRole would let it write to any
// log group).
func newFunction(stack awscdk.Stack, p StackProps, spec functionSpec, place *vpcPlacement, logs awslogs.ILogGroup) awslambda.Function {
	id := "Fn" + functionID(spec.name)
	name := "clientagent-" + p.EnvName + "-" + spec.name
	role := awsiam.NewRole(stack, jsii.String(id+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String(name + " (least privilege: every statement is in the template)"),
	})
	// The log group exists (above), so no logs:CreateLogGroup.
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("OwnLogs"),
		Actions:   jsii.Strings("logs:CreateLogStream", "logs:PutLogEvents"),
		Resources: jsii.Strings(*logs.LogGroupArn()),
	}))
	props := &awslambda.FunctionProps{
		FunctionName:          jsii.String(name),
		Description:           jsii.String(spec.desc),
		Runtime:               awslambda.Runtime_PROVIDED_AL2023(),
		Architecture:          awslambda.Architecture_ARM_64(),
		Handler:               jsii.String("bootstrap"),
		Code:                  awslambda.Code_FromAsset(jsii.String(filepath.Join(p.BinDir, spec.name)), nil),
		MemorySize:            jsii.Number(spec.memory),
		Timeout:               awscdk.Duration_Seconds(jsii.Number(spec.timeout)),
		Role:                  role,
		LoggingFormat:         awslambda.LoggingFormat_JSON,
		ApplicationLogLevelV2: awslambda.ApplicationLogLevel(p.LogLevel),
		SystemLogLevelV2:      awslambda.SystemLogLevel(p.SystemLogLevel),
		LogGroup:              logs,
		Tracing:               awslambda.Tracing_DISABLED,
	}
	if p.TracingOn() {
		props.Tracing = awslambda.Tracing_ACTIVE
	}
	if place != nil {
		// What Lambda needs to attach the function to the VPC (the actions
		// of AWSLambdaVPCAccessExecutionRole; EC2 allows no narrower resource
		// for the Describe calls).
		role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String("VpcNetworkInterfaces"),
			Actions: jsii.Strings("ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets",
				"ec2:DeleteNetworkInterface", "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"),
			Resources: jsii.Strings("*"),
		}))
		props.Vpc = place.vpc
		props.VpcSubnets = &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS}
		props.SecurityGroups = &[]awsec2.ISecurityGroup{place.sg}
	}
	fn := awslambda.NewFunction(stack, jsii.String(id), props)
	suppress(role, "AwsSolutions-IAM5", functionRoleWildcardReason, functionRoleWildcards...)
	return fn
}
