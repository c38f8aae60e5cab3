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
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
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
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
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

// TaskTokenActions answer a paused execution's task token (api only).
var TaskTokenActions = []string{"states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat"}

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
func newAppStack(scope constructs.Construct, p StackProps, d *dataStack) awscdk.Stack {
	sprops := p.StackProps
	if sprops.Description == nil {
		sprops.Description = jsii.String("clientagent (" + p.EnvName + "): LLM tool-calling orchestrator")
	}
	stack := awscdk.NewStack(scope, jsii.String(AppStackName(p.EnvName)), &sprops)
	tag(stack, p)
	prefix := "clientagent-" + p.EnvName
	if len(p.WebOrigins) == 0 {
		awscdk.Annotations_Of(stack).AddWarningV2(jsii.String("clientagent:noWebOrigins"),
			jsii.String("webOrigins is empty: no browser origin may call the API (CLI only); set -c webOrigins=https://… for the web page"), nil)
	}
	bucket, auditBucket := d.artifacts, d.audit

	place := &vpcPlacement{vpc: d.vpc, sg: d.fnSG}
	// Demo specialists: A2A endpoints on a Function URL with IAM auth (only
	// the functions granted below may call it, each request signed with
	// SigV4), in the VPC, so their tasks and publication ledger live in
	// Valkey: an input-required answer may reach another instance than the
	// question, and a retried publish must not publish twice. They fetch
	// inputs by presigned URL.
	agentURLs := slices.Clone(p.Agents)
	var demo awslambda.Function
	var demoURL awslambda.FunctionUrl
	if p.DemoAgents {
		// Their logs are not data the deployment keeps: they go with the app.
		demoLogs := awslogs.NewLogGroup(stack, jsii.String("FnDemoagentsLogs"), &awslogs.LogGroupProps{
			LogGroupName:  jsii.String("/aws/lambda/" + prefix + "-" + FnDemoAgents),
			Retention:     retentionDays[p.LogRetentionDays],
			RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
		})
		demo = newFunction(stack, p, functionSpec{FnDemoAgents, 512, 120, "demo A2A specialists"}, place, demoLogs)
		// PUBLIC_URL stays empty: the function takes its base URL from each
		// request's Host, since its own URL in its environment would be a cycle.
		demo.AddEnvironment(jsii.String("VALKEY_URL"), d.valkeyURL, nil)
		if p.TracingOn() {
			// The agents join a turn's trace through the A2A request's traceparent.
			demo.AddEnvironment(jsii.String("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), xrayOTLPEndpoint(), nil)
			allowXRayOTLP(demo)
		}
		demoURL = demo.AddFunctionUrl(&awslambda.FunctionUrlOptions{AuthType: awslambda.FunctionUrlAuthType_AWS_IAM})
		for _, path := range []string{"agents/svg", "agents/png", "agents/flange", "agents/publish"} {
			// The URL attribute ends with "/".
			agentURLs = append(agentURLs, *demoURL.Url()+path)
		}
	}

	env := map[string]*string{
		"CLIENTAGENT_ENV": jsii.String(p.EnvName),
		"VALKEY_URL":      d.valkeyURL,
		"ARTIFACT_BUCKET": bucket.BucketName(),
		"AUDIT_BUCKET":    auditBucket.BucketName(),
		"CLIENTAGENT_LLM": jsii.String(p.LLM),
		// pkg/metrics writes its Embedded Metric Format lines to this namespace.
		"CLIENTAGENT_METRICS_NAMESPACE": jsii.String("clientagent/" + p.EnvName),
	}
	if p.TracingOn() {
		// One trace per turn (pkg/telemetry): each function exports its
		// spans straight to X-Ray's OTLP endpoint, SigV4-signed
		// (pkg/platform/lambdatrace), at the end of each invocation.
		env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = xrayOTLPEndpoint()
	}
	if len(agentURLs) > 0 {
		// Tokens inside a Go string (the demo URL) resolve to an Fn::Join.
		env["CLIENTAGENT_AGENTS"] = jsii.String(strings.Join(agentURLs, ","))
	}
	for k, v := range map[string]string{
		"CLIENTAGENT_MODEL":         p.Model,
		"CLIENTAGENT_MODEL_SMALL":   p.ModelSmall,
		"CLIENTAGENT_MODEL_LARGE":   p.ModelLarge,
		"OPENAI_BASE_URL":           p.OpenAIBaseURL,
		"CLIENTAGENT_AWAIT_TIMEOUT": p.AwaitTimeout,
	} {
		if v != "" {
			env[k] = jsii.String(v)
		}
	}
	// Workflow templates of the deployment's own, as a layer under /opt:
	// code, not data, so it goes with the app stack.
	var layers []awslambda.ILayerVersion
	if p.WorkflowsDir != "" {
		layers = append(layers, awslambda.NewLayerVersion(stack, jsii.String("Workflows"), &awslambda.LayerVersionProps{
			Code:                    awslambda.Code_FromAsset(jsii.String(p.WorkflowsDir), nil),
			CompatibleArchitectures: &[]awslambda.Architecture{awslambda.Architecture_ARM_64()},
			CompatibleRuntimes:      &[]awslambda.Runtime{awslambda.Runtime_PROVIDED_AL2023()},
			Description:             jsii.String(prefix + " workflow templates (docs/workflows.md)"),
			RemovalPolicy:           awscdk.RemovalPolicy_DESTROY,
		}))
		env["CLIENTAGENT_WORKFLOWS_DIR"] = jsii.String("/opt")
	}
	fns := map[string]awslambda.Function{}
	for _, spec := range platformFunctions {
		fn := newFunction(stack, p, spec, place, d.fnLogs[spec.name])
		for _, k := range slices.Sorted(maps.Keys(env)) {
			fn.AddEnvironment(jsii.String(k), env[k], nil)
		}
		if p.TracingOn() {
			allowXRayOTLP(fn)
		}
		if len(layers) > 0 {
			fn.AddLayers(layers...)
		}
		fns[spec.name] = fn
	}
	// The functions that build the tool catalogue fetch the agent cards, and
	// invoke calls the skills: with the demo specialists behind IAM auth they
	// sign their requests (pkg/agents, CLIENTAGENT_AGENT_AUTH) and may call
	// that URL. await never reads the catalogue.
	if demoURL != nil {
		for _, name := range AgentCallers {
			fns[name].AddEnvironment(jsii.String("CLIENTAGENT_AGENT_AUTH"), jsii.String("sigv4"), nil)
			// lambda:InvokeFunctionUrl for an AWS_IAM URL, and, as Lambda
			// requires of URLs created since October 2025, lambda:InvokeFunction
			// when invoked through a URL (lambda:InvokedViaFunctionUrl).
			demoURL.GrantInvokeUrl(fns[name])
		}
	}
	// Explicit S3 actions rather than the CDK's grants, whose action lists
	// hold wildcards (s3:GetObject*, s3:List*, s3:Abort*). Only these two
	// touch artifact bytes: api (uploads, presigned downloads, deleting a
	// conversation's artifacts) and invoke (specialists' inputs and outputs).
	// ListBucket makes a missing key a 404 rather than a 403.
	objects := func(b awss3.Bucket) *string { return b.ArnForObjects(jsii.String("*")) }
	allow(fns[FnAPI], "ArtifactObjects", []string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}, objects(bucket))
	allow(fns[FnAPI], "ArtifactList", []string{"s3:ListBucket"}, bucket.BucketArn())
	allow(fns[FnInvoke], "ArtifactObjects", []string{"s3:GetObject", "s3:PutObject"}, objects(bucket))
	allow(fns[FnInvoke], "ArtifactList", []string{"s3:ListBucket"}, bucket.BucketArn())
	// Only the handlers that record decisions and calls write the audit
	// log, and none may read or delete it: validate (approvals, edits,
	// rejections, superseded and expired batches), invoke (executed calls:
	// only it knows a specialist ran), llmstep (FailTurn closes a batch's
	// unrun calls) and api (it records the failure of a dead execution the
	// same way, turn.RecordFailure).
	for _, name := range []string{FnValidate, FnInvoke, FnLLMStep, FnAPI} {
		allow(fns[name], "AuditPut", []string{"s3:PutObject"}, objects(auditBucket))
	}

	// The guardian: a Bedrock guardrail of the environment's (cdk.json
	// guardrailId, guardrailVersion), applied by the functions that check,
	// each allowed to apply that guardrail and no other.
	if p.GuardrailID != "" {
		guardrail := jsii.String("arn:" + *awscdk.Aws_PARTITION() + ":bedrock:" + *awscdk.Aws_REGION() + ":" + *awscdk.Aws_ACCOUNT_ID() + ":guardrail/" + p.GuardrailID)
		for _, name := range GuardianFunctions {
			fns[name].AddEnvironment(jsii.String("CLIENTAGENT_GUARDIAN"), jsii.String("bedrock:"+p.GuardrailID+":"+p.GuardrailVersion), nil)
			allow(fns[name], "BedrockApplyGuardrail", []string{"bedrock:ApplyGuardrail"}, guardrail)
		}
	}

	// MCP servers whose tools are skills (cdk.json mcpServers): the
	// functions that list or call their tools, each allowed to read exactly
	// the secrets of their headers.
	addMCPServers(stack, p, fns)

	// The model: only llmstep calls it (pkg/turn's LLMStep).
	llmFn := fns[FnLLMStep]
	switch p.LLM {
	case LLMBedrock:
		// Cross-region inference profiles route to foundation models in
		// other regions, hence the region wildcard on foundation models.
		allow(llmFn, "BedrockConverse", []string{"bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"},
			jsii.String("arn:"+*awscdk.Aws_PARTITION()+":bedrock:*::foundation-model/*"),
			jsii.String("arn:"+*awscdk.Aws_PARTITION()+":bedrock:"+*awscdk.Aws_REGION()+":"+*awscdk.Aws_ACCOUNT_ID()+":inference-profile/*"),
		)
	case LLMOpenAI:
		// The key stays in Secrets Manager: llmstep gets the secret's id and
		// reads the value at cold start (pkg/llm/llmconfig), so neither the
		// template nor the function's configuration ever holds it.
		var secret awssecretsmanager.ISecret
		secretID := jsii.String(p.OpenAIKeySecretName)
		if d.openAIKey != nil {
			secret, secretID = d.openAIKey, d.openAIKey.SecretArn()
			awscdk.NewCfnOutput(stack, jsii.String("OpenAIKeySecretArn"), &awscdk.CfnOutputProps{
				Value: secretID, Description: jsii.String("the created secret of the OpenAI-compatible key: put the real key in it"),
			})
		} else {
			secret = awssecretsmanager.Secret_FromSecretNameV2(stack, jsii.String("OpenAIKey"), secretID)
		}
		// GrantRead gives exactly GetSecretValue and DescribeSecret, on the
		// secret's ARN (with the random suffix matched for a secret by name).
		secret.GrantRead(llmFn, nil)
		llmFn.AddEnvironment(jsii.String("OPENAI_API_KEY_SECRET_ARN"), secretID, nil)
	}

	// The turn state machine: the repository's ASL file as it is, with the
	// step functions' ARNs substituted by CloudFormation.
	aslBytes, err := os.ReadFile(p.ASLFile)
	if err != nil {
		panic(fmt.Sprintf("read state machine definition: %v", err))
	}
	subs := map[string]*string{}
	for key, name := range StepFunctionKeys {
		subs[key] = fns[name].FunctionArn()
	}
	for _, key := range ASLPlaceholders(string(aslBytes)) {
		if _, ok := subs[key]; !ok {
			panic(fmt.Sprintf("%s uses ${%s}, which the stack does not provide", p.ASLFile, key))
		}
	}
	sm := awsstepfunctions.NewStateMachine(stack, jsii.String("TurnStateMachine"), &awsstepfunctions.StateMachineProps{
		StateMachineName:        jsii.String(prefix + "-turn"),
		StateMachineType:        awsstepfunctions.StateMachineType_STANDARD,
		DefinitionBody:          awsstepfunctions.DefinitionBody_FromString(jsii.String(string(aslBytes))),
		DefinitionSubstitutions: &subs,
		TracingEnabled:          jsii.Bool(p.TracingOn()),
		Logs: &awsstepfunctions.LogOptions{
			Destination: d.turnLogs,
			Level:       awsstepfunctions.LogLevel(p.StateMachineLogLevel),
			// Payloads carry ids, but a form's answers pass through too.
			IncludeExecutionData: jsii.Bool(false),
		},
	})
	// Sorted, like every map iteration here, so that the template is stable.
	for _, key := range slices.Sorted(maps.Keys(StepFunctionKeys)) {
		fns[StepFunctionKeys[key]].GrantInvoke(sm.Role())
	}

	// A turn whose execution failed, timed out or was stopped without a
	// step recording it (FailTurn could not reach Valkey, an operator
	// stopped it) is ended in its record by llmstep (turn.ExecutionEnded),
	// which EventBridge invokes asynchronously; a turn already ended is
	// left as it is. (A turn a limit ended is not among them: its execution
	// succeeds, the turn reading failed with its message.)
	turnEnded := awsevents.NewRule(stack, jsii.String("TurnEnded"), &awsevents.RuleProps{
		RuleName:    jsii.String(prefix + "-turn-ended"),
		Description: jsii.String("a turn's execution ended abnormally: llmstep records it on the turn"),
		EventPattern: &awsevents.EventPattern{
			Source:     jsii.Strings("aws.states"),
			DetailType: jsii.Strings("Step Functions Execution Status Change"),
			Detail: &map[string]interface{}{
				"stateMachineArn": []interface{}{sm.StateMachineArn()},
				"status":          []interface{}{"FAILED", "TIMED_OUT", "ABORTED"},
			},
		},
	})
	// An event that cannot be delivered (EventBridge gave up) or whose
	// handling failed (Lambda's asynchronous retries spent) lands in one
	// queue, which an alarm watches, instead of vanishing: the turn it
	// names may still read as running, and the message says which.
	turnEndedDLQ := awssqs.NewQueue(stack, jsii.String("TurnEndedDLQ"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
	})
	turnEnded.AddTarget(awseventstargets.NewLambdaFunction(llmFn, &awseventstargets.LambdaFunctionProps{
		RetryAttempts:   jsii.Number(8),
		MaxEventAge:     awscdk.Duration_Hours(jsii.Number(6)),
		DeadLetterQueue: turnEndedDLQ,
	}))
	// Only EventBridge invokes llmstep asynchronously (the state machine
	// waits for it), so this applies to the turn-ended events alone.
	llmFn.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
		RetryAttempts: jsii.Number(2),
		MaxEventAge:   awscdk.Duration_Hours(jsii.Number(6)),
		OnFailure:     awslambdadestinations.NewSqsDestination(turnEndedDLQ),
	})

	// api starts and inspects turns and answers their task tokens; the state
	// machine never references api, so the template has no cycle. await, which
	// the pause invokes, stores the token and cannot answer it (docs/design.md §7).
	api := fns[FnAPI]
	api.AddEnvironment(jsii.String("STATE_MACHINE_ARN"), sm.StateMachineArn(), nil)
	sm.GrantStartExecution(api)
	sm.GrantExecution(api, jsii.String("states:DescribeExecution"), jsii.String("states:StopExecution"))
	// A task token names its execution, not a resource IAM could match: the
	// service authorization reference lists no resource type for
	// SendTaskSuccess, SendTaskFailure and SendTaskHeartbeat, so a statement
	// naming the state machine matches no request. Their resource is "*",
	// for these three actions alone (TestWildcardResourcesOnlyWhereRequired).
	allow(api, "AnswerTaskTokens", TaskTokenActions, jsii.String("*"))

	// Who may call: the given issuer, or the data stack's Cognito user pool.
	issuer, audience := jsii.String(p.JWTIssuer), jsii.Strings(p.JWTAudience...)
	if d.pool != nil {
		// API Gateway checks a Cognito access token's client_id (it has no
		// aud) and an ID token's aud against the audience: both work.
		// The issuer as Cognito writes it into tokens (ProviderURL lacks https://).
		issuer = awscdk.Fn_Join(jsii.String(""), &[]*string{
			jsii.String("https://cognito-idp."), awscdk.Aws_REGION(), jsii.String("."), awscdk.Aws_URL_SUFFIX(), jsii.String("/"), d.pool.UserPoolId(),
		})
		audience = &[]*string{d.client.UserPoolClientId()}
		awscdk.NewCfnOutput(stack, jsii.String("UserPoolId"), &awscdk.CfnOutputProps{
			Value: d.pool.UserPoolId(), Description: jsii.String("the Cognito user pool (create users here)"),
		})
		awscdk.NewCfnOutput(stack, jsii.String("UserPoolClientId"), &awscdk.CfnOutputProps{
			Value: d.client.UserPoolClientId(), Description: jsii.String("the app client of the web page and the CLI (the JWT audience)"),
		})
	}

	// HTTP API: every /v1 route through the JWT authorizer to api.
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
	httpAPI := awsapigatewayv2.NewHttpApi(stack, jsii.String("HttpApi"), &awsapigatewayv2.HttpApiProps{
		ApiName:       jsii.String(prefix),
		Description:   jsii.String("clientagent HTTP API (docs/api/openapi.yaml)"),
		CorsPreflight: cors,
	})
	// The $default stage: the environment's default throttling for every
	// route, and a JSON access log line per request in the data stack's log
	// group (API Gateway delivers it through its service-linked role).
	stage := httpAPI.DefaultStage().Node().DefaultChild().(awsapigatewayv2.CfnStage)
	stage.SetDefaultRouteSettings(&awsapigatewayv2.CfnStage_RouteSettingsProperty{
		ThrottlingRateLimit:  jsii.Number(float64(p.APIThrottleRateLimit)),
		ThrottlingBurstLimit: jsii.Number(float64(p.APIThrottleBurstLimit)),
	})
	stage.SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
		DestinationArn: d.accessLogs.LogGroupArn(),
		Format:         jsii.String(AccessLogFormat),
	})
	// Live events: an AppSync Events API with the same JWT (events.go).
	addLiveEvents(stack, p, d, fns, issuer)
	authorizer := awsapigatewayv2authorizers.NewHttpJwtAuthorizer(jsii.String("Jwt"), issuer,
		&awsapigatewayv2authorizers.HttpJwtAuthorizerProps{
			AuthorizerName: jsii.String(prefix + "-jwt"),
			JwtAudience:    audience,
		})
	// Named methods rather than ANY, so that CORS preflights (OPTIONS) are
	// answered by API Gateway and never meet the authorizer.
	httpAPI.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
		Path: jsii.String("/v1/{proxy+}"),
		Methods: &[]awsapigatewayv2.HttpMethod{
			awsapigatewayv2.HttpMethod_GET, awsapigatewayv2.HttpMethod_POST, awsapigatewayv2.HttpMethod_PUT,
			awsapigatewayv2.HttpMethod_PATCH, awsapigatewayv2.HttpMethod_DELETE,
		},
		Integration: awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String("Api"), api, nil),
		Authorizer:  authorizer,
	})

	// Alarms: a failed or timed-out execution (a fault: a turn a limit ended
	// succeeds), any function's errors or throttles, and an undelivered
	// turn-ended event, to one SNS topic (subscribe to it, or set alarmEmail).
	topic := awssns.NewTopic(stack, jsii.String("Alarms"), &awssns.TopicProps{
		TopicName:   jsii.String(prefix + "-alarms"),
		DisplayName: jsii.String("clientagent " + p.EnvName + " alarms"),
	})
	if p.AlarmEmail != "" {
		topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(p.AlarmEmail), nil))
	}
	alarmAction := awscloudwatchactions.NewSnsAction(topic)
	// A long workflow continues in a new invoke invocation by returning
	// WorkflowContinuesError (pkg/turn), which Lambda counts as an error;
	// the invoke step logs each one ("status":"continues"), and invoke's
	// errors alarm subtracts them, so only real failures page anyone.
	continuations := awslogs.NewMetricFilter(stack, jsii.String("InvokeContinuations"), &awslogs.MetricFilterProps{
		LogGroup:        fns[FnInvoke].LogGroup(),
		FilterPattern:   awslogs.FilterPattern_StringValue(jsii.String("$.status"), jsii.String("="), jsii.String("continues")),
		MetricNamespace: jsii.String("clientagent/" + p.EnvName),
		MetricName:      jsii.String("WorkflowContinuations"),
		MetricValue:     jsii.String("1"),
		DefaultValue:    jsii.Number(0),
	})
	alarm := func(id, name, desc string, metric awscloudwatch.IMetric) {
		// ≥ 1 in a period: a failed execution, a function error, a message
		// in the dead-letter queue each deserve a look.
		a := awscloudwatch.NewAlarm(stack, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmName:          jsii.String(prefix + "-" + name),
			AlarmDescription:   jsii.String(desc),
			Metric:             metric,
			Threshold:          jsii.Number(1),
			EvaluationPeriods:  jsii.Number(1),
			ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
			TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
		})
		a.AddAlarmAction(alarmAction)
	}
	fiveMinutes := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Sum")}
	alarm("AlarmTurnsFailed", "turns-failed", "a turn's execution failed: a fault (a step's error, FailTurn), not a limit", sm.MetricFailed(fiveMinutes))
	alarm("AlarmTurnsTimedOut", "turns-timed-out", "a turn's execution timed out", sm.MetricTimedOut(fiveMinutes))
	// A full Valkey refuses writes (reads keep working): pkg/metrics counts
	// each refusal from the functions' logs (Embedded Metric Format).
	alarm("AlarmStoreFull", "store-full", "Valkey refused a write for lack of memory (maxmemory): raise the cache's limit", awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
		Namespace: jsii.String("clientagent/" + p.EnvName), MetricName: jsii.String("StoreFull"),
		Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Sum"),
	}))
	alarmed := slices.Clone(platformFunctions)
	if demo != nil {
		alarmed = append(alarmed, functionSpec{name: FnDemoAgents})
		fns[FnDemoAgents] = demo
	}
	for _, spec := range alarmed {
		fn, id := fns[spec.name], functionID(spec.name)
		var errs awscloudwatch.IMetric = fn.MetricErrors(fiveMinutes)
		if spec.name == FnInvoke {
			errs = awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
				Expression: jsii.String("errors - continuations"),
				UsingMetrics: &map[string]awscloudwatch.IMetric{
					"errors":        errs,
					"continuations": continuations.Metric(fiveMinutes),
				},
				Label:  jsii.String("invoke errors that are not workflow continuations"),
				Period: awscdk.Duration_Minutes(jsii.Number(5)),
			})
		}
		alarm("Alarm"+id+"Errors", spec.name+"-errors", spec.name+" returned errors", errs)
		alarm("Alarm"+id+"Throttles", spec.name+"-throttles", spec.name+" was throttled", fn.MetricThrottles(fiveMinutes))
	}
	alarm("AlarmTurnEndedDLQ", "turn-ended-dlq", "a turn-ended event was not handled: its turn may still read as running (messages in the dead-letter queue)",
		turnEndedDLQ.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
			Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Maximum"),
		}))
	newDashboard(stack, prefix, "clientagent/"+p.EnvName, sm, fns, alarmed, continuations, d.cache.Ref())

	awscdk.NewCfnOutput(stack, jsii.String("ApiUrl"), &awscdk.CfnOutputProps{
		Value: httpAPI.ApiEndpoint(), Description: jsii.String("base URL of the HTTP API (append /v1/…)"),
	})
	awscdk.NewCfnOutput(stack, jsii.String("JwtIssuer"), &awscdk.CfnOutputProps{
		Value: issuer, Description: jsii.String("the issuer the JWT authorizer accepts"),
	})
	awscdk.NewCfnOutput(stack, jsii.String("StateMachineArn"), &awscdk.CfnOutputProps{
		Value: sm.StateMachineArn(), Description: jsii.String("the turn state machine"),
	})
	awscdk.NewCfnOutput(stack, jsii.String("ArtifactBucketName"), &awscdk.CfnOutputProps{
		Value: bucket.BucketName(), Description: jsii.String("the artifact bucket"),
	})
	awscdk.NewCfnOutput(stack, jsii.String("AuditBucketName"), &awscdk.CfnOutputProps{
		Value: auditBucket.BucketName(), Description: jsii.String("the audit log of approvals and executed calls"),
	})
	awscdk.NewCfnOutput(stack, jsii.String("ValkeyEndpoint"), &awscdk.CfnOutputProps{
		Value: d.cache.AttrEndpointAddress(), Description: jsii.String("ElastiCache Serverless Valkey (TLS, port 6379)"),
	})
	awscdk.NewCfnOutput(stack, jsii.String("AlarmTopicArn"), &awscdk.CfnOutputProps{
		Value: topic.TopicArn(), Description: jsii.String("SNS topic of the alarms (subscribe to be told)"),
	})
	if demoURL != nil {
		awscdk.NewCfnOutput(stack, jsii.String("DemoAgentsUrl"), &awscdk.CfnOutputProps{
			Value: demoURL.Url(), Description: jsii.String("the demo A2A specialists (agents/svg, agents/png, …; IAM auth, SigV4-signed requests only)"),
		})
	}
	return stack
}

// xrayOTLPEndpoint is X-Ray's OTLP traces endpoint in the stack's region.
func xrayOTLPEndpoint() *string {
	return jsii.String("https://xray." + *awscdk.Aws_REGION() + ".amazonaws.com/v1/traces")
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
	return awslambda.NewFunction(stack, jsii.String(id), props)
}

// newDashboard is the operators' view of one environment: turns (started,
// succeeded, failed, their duration), every function's duration, errors
// and throttles, the workflow continuations, and the cache's load.
func newDashboard(stack awscdk.Stack, prefix, namespace string, sm awsstepfunctions.StateMachine, fns map[string]awslambda.Function, specs []functionSpec,
	continuations awslogs.MetricFilter, cacheName *string) {
	period := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Sum")}
	p99 := &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("p99")}
	graph := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(title), Left: &metrics, Width: jsii.Number(12), Height: jsii.Number(6),
		})
	}
	var durations, errs, throttles []awscloudwatch.IMetric
	for _, spec := range specs {
		fn := fns[spec.name]
		label := &awscloudwatch.MetricOptions{Label: jsii.String(spec.name)}
		durations = append(durations, fn.MetricDuration(p99).With(label))
		errs = append(errs, fn.MetricErrors(period).With(label))
		throttles = append(throttles, fn.MetricThrottles(period).With(label))
	}
	cacheMetric := func(name, stat string) awscloudwatch.IMetric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace:     jsii.String("AWS/ElastiCache"),
			MetricName:    jsii.String(name),
			DimensionsMap: &map[string]*string{"clusterId": cacheName},
			Statistic:     jsii.String(stat),
			Period:        awscdk.Duration_Minutes(jsii.Number(5)),
		})
	}
	// The per-turn metrics the functions log as EMF when a turn ends
	// (pkg/metrics, pkg/turn): totals, and turns by status.
	turnMetric := func(name, stat string, dims map[string]*string, label string) awscloudwatch.IMetric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String(namespace), MetricName: jsii.String(name), DimensionsMap: &dims,
			Statistic: jsii.String(stat), Period: awscdk.Duration_Minutes(jsii.Number(5)), Label: jsii.String(label),
		})
	}
	var byStatus []awscloudwatch.IMetric
	for _, status := range TurnStatuses {
		byStatus = append(byStatus, turnMetric("TurnEnded", "Sum", map[string]*string{"Status": jsii.String(status)}, status))
	}
	awscloudwatch.NewDashboard(stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(prefix),
		Widgets: &[]*[]awscloudwatch.IWidget{
			{
				graph("Turns", sm.MetricStarted(period), sm.MetricSucceeded(period), sm.MetricFailed(period), sm.MetricTimedOut(period)),
				graph("Turn duration (p99, ms)", sm.MetricTime(p99)),
			},
			{
				graph("Function duration (p99, ms)", durations...),
				graph("Function errors", errs...),
			},
			{
				graph("Function throttles", throttles...),
				graph("Workflow continuations", continuations.Metric(period)),
			},
			{
				graph("Valkey processing units (ECPU)", cacheMetric("ElastiCacheProcessingUnits", "Sum")),
				graph("Valkey data (bytes)", cacheMetric("BytesUsedForCache", "Maximum")),
			},
			{
				graph("Turns ended, by status", byStatus...),
				graph("Model cost (USD)", turnMetric("TurnCostUSD", "Sum", nil, "total"), turnMetric("TurnCostUSD", "p99", nil, "p99 per turn")),
			},
			{
				graph("Tokens per turn", turnMetric("TurnTokens", "Average", nil, "average"), turnMetric("TurnTokens", "p99", nil, "p99"),
					turnMetric("TurnCachedTokens", "Average", nil, "cached (average)")),
				graph("LLM calls and steps per turn", turnMetric("TurnLLMCalls", "Average", nil, "LLM calls (average)"), turnMetric("TurnLLMCalls", "Maximum", nil, "LLM calls (max)"),
					turnMetric("TurnSteps", "Average", nil, "steps (average)")),
			},
			{
				graph("Turn duration from the turns' own figures (ms)", turnMetric("TurnDuration", "p50", nil, "p50"), turnMetric("TurnDuration", "p99", nil, "p99"),
					turnMetric("TurnUserWait", "p99", nil, "waiting for the user (p99)")),
			},
		},
	})
}
