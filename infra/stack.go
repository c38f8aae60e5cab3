// Package main is the CDK app that deploys clientagent to AWS, one stack per
// environment (DESIGN §6): the HTTP API with a JWT authorizer, the arm64
// provided.al2023 Lambdas built by `make build`, the STANDARD state machine
// from statemachine/turn.asl.json, ElastiCache Serverless Valkey in a VPC, the
// artifact bucket and the LLM's permissions or secret. It only describes
// resources; it must not call AWS itself (synthesis works offline).
package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscognito"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awselasticache"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
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
// machine must not depend on it (DESIGN §6, no template cycle).
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
// invoke is the longest: one specialist call may take 5 minutes
// (platform.FromEnv's InvokeTimeout) plus the artifact transfers around it.
var platformFunctions = []functionSpec{
	{FnAPI, 512, 29, "HTTP API (API.md); answers task tokens"},
	{FnLLMStep, 512, 120, "turn step: one LLM call with every tool"},
	{FnValidate, 256, 60, "turn step: batch validation"},
	{FnInvoke, 1024, 360, "turn step: one specialist (A2A) call"},
	{FnAppend, 256, 60, "turn step: results into the transcript"},
	{FnAwait, 256, 30, "turn step: stores the task token of a pause"},
}

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

// NewClientAgentStack defines the stack of one environment. It panics on an
// invalid configuration, as CDK constructs do; call props.Validate first for
// an error instead.
func NewClientAgentStack(scope constructs.Construct, id string, props *StackProps) awscdk.Stack {
	if props == nil {
		props = &StackProps{}
	}
	if err := props.Validate(); err != nil {
		panic(fmt.Sprintf("clientagent stack %s: %v", id, err))
	}
	p := props.withDefaults()
	sprops := p.StackProps
	if sprops.Description == nil {
		sprops.Description = jsii.String("clientagent (" + p.EnvName + "): LLM tool-calling orchestrator")
	}
	stack := awscdk.NewStack(scope, jsii.String(id), &sprops)
	awscdk.Tags_Of(stack).Add(jsii.String("app"), jsii.String("clientagent"), nil)
	awscdk.Tags_Of(stack).Add(jsii.String("env"), jsii.String(p.EnvName), nil)
	prefix := "clientagent-" + p.EnvName
	// What holds data (buckets, logs, the cache, users, the created secret)
	// outlives the stack in prod; elsewhere it goes with it. Buckets are
	// deleted only when empty: CDK's autoDeleteObjects would bring a custom
	// resource whose role has wildcard S3 actions (docs/deploy.md, teardown).
	removal := awscdk.RemovalPolicy_DESTROY
	if p.RetainData {
		removal = awscdk.RemovalPolicy_RETAIN
	}
	if len(p.WebOrigins) == 0 {
		awscdk.Annotations_Of(stack).AddWarningV2(jsii.String("clientagent:noWebOrigins"),
			jsii.String("webOrigins is empty: no browser origin may call the API (CLI only); set -c webOrigins=https://… for the web page"), nil)
	}

	// Network: the Lambdas live in private subnets with NAT egress (the LLM,
	// the specialists and the AWS APIs are outside the VPC; docs/deploy.md
	// weighs NAT against endpoints); the cache is reachable only from the
	// Lambdas' security group.
	vpc := awsec2.NewVpc(stack, jsii.String("Vpc"), &awsec2.VpcProps{
		MaxAzs:      jsii.Number(2),
		NatGateways: jsii.Number(float64(p.NATGateways)),
		SubnetConfiguration: &[]*awsec2.SubnetConfiguration{
			{Name: jsii.String("public"), SubnetType: awsec2.SubnetType_PUBLIC, CidrMask: jsii.Number(24)},
			{Name: jsii.String("private"), SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS, CidrMask: jsii.Number(22)},
		},
		GatewayEndpoints: &map[string]*awsec2.GatewayVpcEndpointOptions{
			// Artifact bytes to and from S3 stay off the NAT gateway (free).
			"S3": {Service: awsec2.GatewayVpcEndpointAwsService_S3()},
		},
	})
	privateSubnets := vpc.SelectSubnets(&awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS})
	fnSG := awsec2.NewSecurityGroup(stack, jsii.String("FunctionsSecurityGroup"), &awsec2.SecurityGroupProps{
		Vpc:              vpc,
		Description:      jsii.String(prefix + " Lambdas (egress to Valkey, the LLM, specialists, AWS APIs)"),
		AllowAllOutbound: jsii.Bool(true),
	})
	cacheSG := awsec2.NewSecurityGroup(stack, jsii.String("ValkeySecurityGroup"), &awsec2.SecurityGroupProps{
		Vpc:              vpc,
		Description:      jsii.String(prefix + " ElastiCache Serverless Valkey"),
		AllowAllOutbound: jsii.Bool(false),
	})
	cacheSG.AddIngressRule(fnSG, awsec2.Port_TcpRange(jsii.Number(valkeyPort), jsii.Number(valkeyReaderPort)),
		jsii.String("Valkey from the clientagent Lambdas"), nil)

	subnetIDs := []interface{}{}
	for _, s := range *privateSubnets.SubnetIds {
		subnetIDs = append(subnetIDs, s)
	}
	cacheProps := &awselasticache.CfnServerlessCacheProps{
		Engine:              jsii.String("valkey"),
		MajorEngineVersion:  jsii.String("8"),
		ServerlessCacheName: jsii.String(prefix),
		Description:         jsii.String("clientagent conversation records (DESIGN §3)"),
		SubnetIds:           &subnetIDs,
		SecurityGroupIds:    &[]interface{}{cacheSG.SecurityGroupId()},
		// Serverless scales without bound unless told: the limits turn a
		// runaway client into errors instead of a bill.
		CacheUsageLimits: &awselasticache.CfnServerlessCache_CacheUsageLimitsProperty{
			DataStorage: &awselasticache.CfnServerlessCache_DataStorageProperty{
				Maximum: jsii.Number(float64(p.ValkeyMaxStorageGB)), Unit: jsii.String("GB"),
			},
			EcpuPerSecond: &awselasticache.CfnServerlessCache_ECPUPerSecondProperty{
				Maximum: jsii.Number(float64(p.ValkeyMaxECPUPerSecond)),
			},
		},
	}
	if p.ValkeySnapshotRetentionDays > 0 {
		cacheProps.SnapshotRetentionLimit = jsii.Number(float64(p.ValkeySnapshotRetentionDays))
		cacheProps.DailySnapshotTime = jsii.String(p.ValkeySnapshotTime)
	}
	cache := awselasticache.NewCfnServerlessCache(stack, jsii.String("Valkey"), cacheProps)
	cache.ApplyRemovalPolicy(removal, nil)
	// TLS is always on for ElastiCache Serverless, hence rediss; it is cluster
	// mode, hence pkg/record/valkey's cluster=true (a cluster client).
	valkeyURL := awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("rediss://"), cache.AttrEndpointAddress(), jsii.String(":" + strconv.Itoa(valkeyPort) + "?cluster=true"),
	})

	// Artifacts.
	var bucketCORS *[]*awss3.CorsRule
	if len(p.WebOrigins) > 0 {
		bucketCORS = &[]*awss3.CorsRule{{
			// The API redirects downloads to presigned URLs; the web page follows them.
			AllowedMethods: &[]awss3.HttpMethods{awss3.HttpMethods_GET, awss3.HttpMethods_HEAD},
			AllowedOrigins: jsii.Strings(p.WebOrigins...),
			AllowedHeaders: jsii.Strings("*"),
			MaxAge:         jsii.Number(3600),
		}}
	}
	bucket := awss3.NewBucket(stack, jsii.String("Artifacts"), &awss3.BucketProps{
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		Versioned:         jsii.Bool(false),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		Cors:              bucketCORS,
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id:                                  jsii.String("expire-artifacts"),
			Expiration:                          awscdk.Duration_Days(jsii.Number(float64(p.ArtifactExpiryDays))),
			AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
		}},
		RemovalPolicy: removal,
	})

	// The audit log (DESIGN §7, pkg/audit): what users approved or rejected
	// and what ran. Versioned, never expires; kept with the stack's data.
	auditBucket := awss3.NewBucket(stack, jsii.String("Audit"), &awss3.BucketProps{
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		Versioned:         jsii.Bool(true),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		RemovalPolicy:     removal,
	})

	place := &vpcPlacement{vpc: vpc, sg: fnSG}
	// Demo specialists: public A2A endpoints (a Function URL) in the VPC, so
	// their tasks and publication ledger live in Valkey: an input-required
	// answer may reach another instance than the question, and a retried
	// publish must not publish twice. They fetch inputs by presigned URL.
	agentURLs := slices.Clone(p.Agents)
	var demo awslambda.Function
	var demoURL awslambda.FunctionUrl
	if p.DemoAgents {
		demo = newFunction(stack, p, functionSpec{FnDemoAgents, 512, 120, "demo A2A specialists"}, place, removal)
		// PUBLIC_URL stays empty: the function takes its base URL from each
		// request's Host, since its own URL in its environment would be a cycle.
		demo.AddEnvironment(jsii.String("VALKEY_URL"), valkeyURL, nil)
		demoURL = demo.AddFunctionUrl(&awslambda.FunctionUrlOptions{AuthType: awslambda.FunctionUrlAuthType_NONE})
		for _, path := range []string{"agents/svg", "agents/png", "agents/flange", "agents/publish"} {
			// The URL attribute ends with "/".
			agentURLs = append(agentURLs, *demoURL.Url()+path)
		}
	}

	env := map[string]*string{
		"CLIENTAGENT_ENV": jsii.String(p.EnvName),
		"VALKEY_URL":      valkeyURL,
		"ARTIFACT_BUCKET": bucket.BucketName(),
		"AUDIT_BUCKET":    auditBucket.BucketName(),
		"CLIENTAGENT_LLM": jsii.String(p.LLM),
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
	// Workflow templates of the deployment's own, as a layer under /opt.
	var layers []awslambda.ILayerVersion
	if p.WorkflowsDir != "" {
		layers = append(layers, awslambda.NewLayerVersion(stack, jsii.String("Workflows"), &awslambda.LayerVersionProps{
			Code:                    awslambda.Code_FromAsset(jsii.String(p.WorkflowsDir), nil),
			CompatibleArchitectures: &[]awslambda.Architecture{awslambda.Architecture_ARM_64()},
			CompatibleRuntimes:      &[]awslambda.Runtime{awslambda.Runtime_PROVIDED_AL2023()},
			Description:             jsii.String(prefix + " workflow templates (docs/workflows.md)"),
			RemovalPolicy:           removal,
		}))
		env["CLIENTAGENT_WORKFLOWS_DIR"] = jsii.String("/opt")
	}
	fns := map[string]awslambda.Function{}
	for _, spec := range platformFunctions {
		fn := newFunction(stack, p, spec, place, removal)
		for _, k := range slices.Sorted(maps.Keys(env)) {
			fn.AddEnvironment(jsii.String(k), env[k], nil)
		}
		if len(layers) > 0 {
			fn.AddLayers(layers...)
		}
		fns[spec.name] = fn
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
	// log, and none may read or delete it: validate (approvals, rejections,
	// superseded and expired batches), append (executed calls), llmstep
	// (FailTurn keeps the calls of a batch that ran) and api (it records
	// the failure of a dead execution the same way, turn.RecordFailure).
	for _, name := range []string{FnValidate, FnAppend, FnLLMStep, FnAPI} {
		allow(fns[name], "AuditPut", []string{"s3:PutObject"}, objects(auditBucket))
	}

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
		if p.OpenAIKeySecretName != "" {
			secret = awssecretsmanager.Secret_FromSecretNameV2(stack, jsii.String("OpenAIKey"), secretID)
		} else {
			created := awssecretsmanager.NewSecret(stack, jsii.String("OpenAIKey"), &awssecretsmanager.SecretProps{
				SecretName:    jsii.String(prefix + "/openai-api-key"),
				Description:   jsii.String("clientagent " + p.EnvName + ": the OpenAI-compatible API key (put-secret-value; read at each cold start)"),
				RemovalPolicy: removal,
			})
			secret, secretID = created, created.SecretArn()
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
	smLogs := awslogs.NewLogGroup(stack, jsii.String("TurnStateMachineLogs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("/aws/vendedlogs/states/" + prefix + "-turn"),
		Retention:     retentionDays[p.LogRetentionDays],
		RemovalPolicy: removal,
	})
	sm := awsstepfunctions.NewStateMachine(stack, jsii.String("TurnStateMachine"), &awsstepfunctions.StateMachineProps{
		StateMachineName:        jsii.String(prefix + "-turn"),
		StateMachineType:        awsstepfunctions.StateMachineType_STANDARD,
		DefinitionBody:          awsstepfunctions.DefinitionBody_FromString(jsii.String(string(aslBytes))),
		DefinitionSubstitutions: &subs,
		TracingEnabled:          jsii.Bool(true),
		Logs: &awsstepfunctions.LogOptions{
			Destination: smLogs,
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
	// left as it is.
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
	turnEnded.AddTarget(awseventstargets.NewLambdaFunction(llmFn, &awseventstargets.LambdaFunctionProps{
		RetryAttempts: jsii.Number(8),
		MaxEventAge:   awscdk.Duration_Hours(jsii.Number(6)),
	}))

	// api starts and inspects turns and answers their task tokens; the state
	// machine never references api, so the template has no cycle. await, which
	// the pause invokes, stores the token and cannot answer it (DESIGN §6).
	api := fns[FnAPI]
	api.AddEnvironment(jsii.String("STATE_MACHINE_ARN"), sm.StateMachineArn(), nil)
	sm.GrantStartExecution(api)
	sm.GrantExecution(api, jsii.String("states:DescribeExecution"), jsii.String("states:StopExecution"))
	sm.GrantTaskResponse(api)

	// Who may call: the given issuer, or a Cognito user pool of our own.
	issuer, audience := jsii.String(p.JWTIssuer), jsii.Strings(p.JWTAudience...)
	if p.JWTIssuer == "" {
		pool := awscognito.NewUserPool(stack, jsii.String("Users"), &awscognito.UserPoolProps{
			UserPoolName: jsii.String(prefix + "-users"),
			// Users are created by an administrator (docs/deploy.md).
			SelfSignUpEnabled: jsii.Bool(false),
			SignInAliases:     &awscognito.SignInAliases{Email: jsii.Bool(true)},
			AutoVerify:        &awscognito.AutoVerifiedAttrs{Email: jsii.Bool(true)},
			AccountRecovery:   awscognito.AccountRecovery_EMAIL_ONLY,
			PasswordPolicy:    &awscognito.PasswordPolicy{MinLength: jsii.Number(12)},
			RemovalPolicy:     removal,
		})
		client := pool.AddClient(jsii.String("Client"), &awscognito.UserPoolClientOptions{
			UserPoolClientName: jsii.String(prefix + "-web-cli"),
			// A public client (the web page, `clientagent chat`): no secret,
			// no hosted UI; tokens by password (SRP or plain over TLS).
			GenerateSecret:             jsii.Bool(false),
			AuthFlows:                  &awscognito.AuthFlow{UserSrp: jsii.Bool(true), UserPassword: jsii.Bool(true)},
			DisableOAuth:               jsii.Bool(true),
			PreventUserExistenceErrors: jsii.Bool(true),
		})
		// API Gateway checks a Cognito access token's client_id (it has no
		// aud) and an ID token's aud against the audience: both work.
		// The issuer as Cognito writes it into tokens (ProviderURL lacks https://).
		issuer = awscdk.Fn_Join(jsii.String(""), &[]*string{
			jsii.String("https://cognito-idp."), awscdk.Aws_REGION(), jsii.String("."), awscdk.Aws_URL_SUFFIX(), jsii.String("/"), pool.UserPoolId(),
		})
		audience = &[]*string{client.UserPoolClientId()}
		awscdk.NewCfnOutput(stack, jsii.String("UserPoolId"), &awscdk.CfnOutputProps{
			Value: pool.UserPoolId(), Description: jsii.String("the Cognito user pool (create users here)"),
		})
		awscdk.NewCfnOutput(stack, jsii.String("UserPoolClientId"), &awscdk.CfnOutputProps{
			Value: client.UserPoolClientId(), Description: jsii.String("the app client of the web page and the CLI (the JWT audience)"),
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
			ExposeHeaders: jsii.Strings("location", "www-authenticate"),
			MaxAge:        awscdk.Duration_Hours(jsii.Number(1)),
		}
	}
	httpAPI := awsapigatewayv2.NewHttpApi(stack, jsii.String("HttpApi"), &awsapigatewayv2.HttpApiProps{
		ApiName:       jsii.String(prefix),
		Description:   jsii.String("clientagent HTTP API (API.md)"),
		CorsPreflight: cors,
	})
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

	// Alarms: a failed or timed-out turn, and any function's errors or
	// throttles, to one SNS topic (subscribe to it, or set alarmEmail).
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
	alarm("AlarmTurnsFailed", "turns-failed", "a turn's execution failed", sm.MetricFailed(fiveMinutes))
	alarm("AlarmTurnsTimedOut", "turns-timed-out", "a turn's execution timed out", sm.MetricTimedOut(fiveMinutes))
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
	newDashboard(stack, prefix, sm, fns, alarmed, continuations, cache)

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
		Value: cache.AttrEndpointAddress(), Description: jsii.String("ElastiCache Serverless Valkey (TLS, port 6379)"),
	})
	awscdk.NewCfnOutput(stack, jsii.String("AlarmTopicArn"), &awscdk.CfnOutputProps{
		Value: topic.TopicArn(), Description: jsii.String("SNS topic of the alarms (subscribe to be told)"),
	})
	if demoURL != nil {
		awscdk.NewCfnOutput(stack, jsii.String("DemoAgentsUrl"), &awscdk.CfnOutputProps{
			Value: demoURL.Url(), Description: jsii.String("the demo A2A specialists (agents/svg, agents/png, …)"),
		})
	}
	return stack
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

// newFunction defines one Lambda from BinDir/<name>/bootstrap, with a role
// of its own that holds only explicit statements: no AWS managed policies
// (AWSLambdaBasicExecutionRole would let it write to any log group).
func newFunction(stack awscdk.Stack, p StackProps, spec functionSpec, place *vpcPlacement, removal awscdk.RemovalPolicy) awslambda.Function {
	id := "Fn" + functionID(spec.name)
	name := "clientagent-" + p.EnvName + "-" + spec.name
	logs := awslogs.NewLogGroup(stack, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("/aws/lambda/" + name),
		Retention:     retentionDays[p.LogRetentionDays],
		RemovalPolicy: removal,
	})
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
		Tracing:               awslambda.Tracing_ACTIVE,
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
func newDashboard(stack awscdk.Stack, prefix string, sm awsstepfunctions.StateMachine, fns map[string]awslambda.Function, specs []functionSpec,
	continuations awslogs.MetricFilter, cache awselasticache.CfnServerlessCache) {
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
			DimensionsMap: &map[string]*string{"clusterId": cache.ServerlessCacheName()},
			Statistic:     jsii.String(stat),
			Period:        awscdk.Duration_Minutes(jsii.Number(5)),
		})
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
		},
	})
}
