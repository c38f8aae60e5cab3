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
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awselasticache"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
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

// StackProps configures one environment's stack. The zero value of an
// optional field means its documented default.
type StackProps struct {
	awscdk.StackProps

	// EnvName names the environment (dev, staging, prod); it prefixes
	// resource names: lowercase letters, digits and '-', at most 20.
	EnvName string
	// BinDir holds `make build`'s output: BinDir/<function>/bootstrap.
	BinDir string
	// ASLFile is statemachine/turn.asl.json, read at synth time.
	ASLFile string

	// JWTIssuer and JWTAudience configure the HTTP API's JWT authorizer.
	JWTIssuer   string
	JWTAudience []string
	// WebOrigins are the origins allowed by CORS (the web page). Empty: "*"
	// in the dev environment, an error elsewhere.
	WebOrigins []string

	// LLM is bedrock (default), openai or scripted.
	LLM string
	// Model is CLIENTAGENT_MODEL (bedrock default DefaultBedrockModel);
	// ModelSmall and ModelLarge the optional other flavours.
	Model, ModelSmall, ModelLarge string
	// OpenAIBaseURL is OPENAI_BASE_URL (empty: api.openai.com).
	OpenAIBaseURL string
	// OpenAIKeySecretName names an existing Secrets Manager secret holding the
	// API key; empty: the stack creates one whose value you set after deploy.
	OpenAIKeySecretName string

	// Agents are specialist base URLs (CLIENTAGENT_AGENTS) besides the demo ones.
	Agents []string
	// DemoAgents deploys the demo specialists behind a Function URL and
	// lists them in CLIENTAGENT_AGENTS.
	DemoAgents bool

	// ArtifactExpiryDays expires artifacts in S3 after this many days (default 30).
	ArtifactExpiryDays int
	// NATGateways is the VPC's NAT gateway count (default 1; the Lambdas
	// need egress to the LLM and the specialists).
	NATGateways int
	// AwaitTimeout is CLIENTAGENT_AWAIT_TIMEOUT (a Go duration); empty: the
	// platform's default.
	AwaitTimeout string
}

var envNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,19}$`)

// withDefaults returns a copy of p with the documented defaults filled in.
func (p StackProps) withDefaults() StackProps {
	if p.EnvName == "" {
		p.EnvName = "dev"
	}
	if p.BinDir == "" {
		p.BinDir = filepath.Join("..", "bin")
	}
	if p.ASLFile == "" {
		p.ASLFile = filepath.Join("..", "statemachine", "turn.asl.json")
	}
	if p.LLM == "" {
		p.LLM = LLMBedrock
	}
	if p.LLM == LLMBedrock && p.Model == "" {
		p.Model = DefaultBedrockModel
	}
	if len(p.WebOrigins) == 0 && p.EnvName == "dev" {
		p.WebOrigins = []string{"*"}
	}
	if p.ArtifactExpiryDays == 0 {
		p.ArtifactExpiryDays = 30
	}
	if p.NATGateways == 0 {
		p.NATGateways = 1
	}
	return p
}

// Validate reports the first configuration error of p (after defaults).
func (p StackProps) Validate() error {
	p = p.withDefaults()
	switch {
	case !envNameRE.MatchString(p.EnvName):
		return fmt.Errorf("env %q: want lowercase letters, digits and '-', starting with a letter, at most 20", p.EnvName)
	case p.JWTIssuer == "":
		return fmt.Errorf("jwtIssuer is required (the JWT authorizer's issuer URL)")
	case !strings.HasPrefix(p.JWTIssuer, "https://"):
		return fmt.Errorf("jwtIssuer %q: API Gateway needs an https:// issuer", p.JWTIssuer)
	case len(p.JWTAudience) == 0:
		return fmt.Errorf("jwtAudience is required (comma-separated audiences)")
	case len(p.WebOrigins) == 0:
		return fmt.Errorf("webOrigins is required outside dev (the web page's origins, comma-separated)")
	case !slices.Contains([]string{LLMBedrock, LLMOpenAI, LLMScripted}, p.LLM):
		return fmt.Errorf("llm %q: want bedrock, openai or scripted", p.LLM)
	case p.ArtifactExpiryDays < 0:
		return fmt.Errorf("artifactExpiryDays %d: want a positive number of days", p.ArtifactExpiryDays)
	case p.NATGateways < 0 || p.NATGateways > 3:
		return fmt.Errorf("natGateways %d: want 1 to 3", p.NATGateways)
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
	return nil
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

	// Network: the Lambdas live in private subnets with NAT egress (the LLM,
	// the specialists and the AWS APIs are outside the VPC); the cache is
	// reachable only from the Lambdas' security group.
	vpc := awsec2.NewVpc(stack, jsii.String("Vpc"), &awsec2.VpcProps{
		MaxAzs:      jsii.Number(2),
		NatGateways: jsii.Number(float64(p.NATGateways)),
		SubnetConfiguration: &[]*awsec2.SubnetConfiguration{
			{Name: jsii.String("public"), SubnetType: awsec2.SubnetType_PUBLIC, CidrMask: jsii.Number(24)},
			{Name: jsii.String("private"), SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS, CidrMask: jsii.Number(22)},
		},
		GatewayEndpoints: &map[string]*awsec2.GatewayVpcEndpointOptions{
			// Artifact bytes to and from S3 stay off the NAT gateway.
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
	cache := awselasticache.NewCfnServerlessCache(stack, jsii.String("Valkey"), &awselasticache.CfnServerlessCacheProps{
		Engine:              jsii.String("valkey"),
		MajorEngineVersion:  jsii.String("8"),
		ServerlessCacheName: jsii.String(prefix),
		Description:         jsii.String("clientagent conversation records (DESIGN §3)"),
		SubnetIds:           &subnetIDs,
		SecurityGroupIds:    &[]interface{}{cacheSG.SecurityGroupId()},
	})
	// TLS is always on for ElastiCache Serverless, hence rediss; it is cluster
	// mode, hence pkg/record/valkey's cluster=true (a cluster client).
	valkeyURL := awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("rediss://"), cache.AttrEndpointAddress(), jsii.String(":" + strconv.Itoa(valkeyPort) + "?cluster=true"),
	})

	// Artifacts.
	bucketCORS := []*awss3.CorsRule{{
		// The API redirects downloads to presigned URLs; the web page follows them.
		AllowedMethods: &[]awss3.HttpMethods{awss3.HttpMethods_GET, awss3.HttpMethods_HEAD},
		AllowedOrigins: jsii.Strings(p.WebOrigins...),
		AllowedHeaders: jsii.Strings("*"),
		MaxAge:         jsii.Number(3600),
	}}
	bucket := awss3.NewBucket(stack, jsii.String("Artifacts"), &awss3.BucketProps{
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		Versioned:         jsii.Bool(false),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		Cors:              &bucketCORS,
		LifecycleRules: &[]*awss3.LifecycleRule{{
			Id:                                  jsii.String("expire-artifacts"),
			Expiration:                          awscdk.Duration_Days(jsii.Number(float64(p.ArtifactExpiryDays))),
			AbortIncompleteMultipartUploadAfter: awscdk.Duration_Days(jsii.Number(1)),
		}},
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	})

	// The audit log (DESIGN §7, pkg/audit): what users approved or rejected
	// and what ran. Versioned, never expires, kept when the stack goes.
	auditBucket := awss3.NewBucket(stack, jsii.String("Audit"), &awss3.BucketProps{
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		Versioned:         jsii.Bool(true),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
	})

	// Demo specialists: public A2A endpoints (a Function URL) in the VPC, so
	// their tasks and publication ledger live in Valkey: an input-required
	// answer may reach another instance than the question, and a retried
	// publish must not publish twice. They fetch inputs by presigned URL.
	agentURLs := slices.Clone(p.Agents)
	var demoURL awslambda.FunctionUrl
	if p.DemoAgents {
		demo := newFunction(stack, p, functionSpec{FnDemoAgents, 512, 120, "demo A2A specialists"}, &vpcPlacement{vpc: vpc, sg: fnSG})
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
	fns := map[string]awslambda.Function{}
	for _, spec := range platformFunctions {
		fn := newFunction(stack, p, spec, &vpcPlacement{vpc: vpc, sg: fnSG})
		for _, k := range slices.Sorted(maps.Keys(env)) {
			fn.AddEnvironment(jsii.String(k), env[k], nil)
		}
		fns[spec.name] = fn
	}
	// Only these two touch artifact bytes: api (uploads, presigned
	// downloads) and invoke (specialists' inputs and outputs).
	bucket.GrantReadWrite(fns[FnAPI], nil)
	bucket.GrantReadWrite(fns[FnInvoke], nil)
	// Only the steps that record decisions (validate) and executed calls
	// (append) write the audit log, and they cannot read or delete it.
	auditBucket.GrantPut(fns[FnValidate], nil)
	auditBucket.GrantPut(fns[FnAppend], nil)

	// The model: only llmstep calls it (pkg/turn's LLMStep).
	llmFn := fns[FnLLMStep]
	switch p.LLM {
	case LLMBedrock:
		llmFn.AddToRolePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:     jsii.String("BedrockConverse"),
			Actions: jsii.Strings("bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"),
			// Cross-region inference profiles route to foundation models in
			// other regions, hence the region wildcard on foundation models.
			Resources: jsii.Strings(
				"arn:"+*awscdk.Aws_PARTITION()+":bedrock:*::foundation-model/*",
				"arn:"+*awscdk.Aws_PARTITION()+":bedrock:"+*awscdk.Aws_REGION()+":"+*awscdk.Aws_ACCOUNT_ID()+":inference-profile/*",
			),
		}))
	case LLMOpenAI:
		var secret awssecretsmanager.ISecret
		if p.OpenAIKeySecretName != "" {
			secret = awssecretsmanager.Secret_FromSecretNameV2(stack, jsii.String("OpenAIKey"), jsii.String(p.OpenAIKeySecretName))
		} else {
			secret = awssecretsmanager.NewSecret(stack, jsii.String("OpenAIKey"), &awssecretsmanager.SecretProps{
				SecretName:  jsii.String(prefix + "/openai-api-key"),
				Description: jsii.String("clientagent " + p.EnvName + ": the OpenAI-compatible API key (put-secret-value, then redeploy)"),
			})
		}
		secret.GrantRead(llmFn, nil)
		llmFn.AddEnvironment(jsii.String("OPENAI_API_KEY_SECRET_ARN"), secret.SecretArn(), nil)
		// pkg/llm/llmconfig reads OPENAI_API_KEY itself, so CloudFormation
		// injects the secret's value at deploy time (a dynamic reference:
		// the template never holds it). A redeploy picks up a rotated key.
		llmFn.AddEnvironment(jsii.String("OPENAI_API_KEY"), secret.SecretValue().UnsafeUnwrap(), nil)
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
		Retention:     awslogs.RetentionDays_ONE_MONTH,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	sm := awsstepfunctions.NewStateMachine(stack, jsii.String("TurnStateMachine"), &awsstepfunctions.StateMachineProps{
		StateMachineName:        jsii.String(prefix + "-turn"),
		StateMachineType:        awsstepfunctions.StateMachineType_STANDARD,
		DefinitionBody:          awsstepfunctions.DefinitionBody_FromString(jsii.String(string(aslBytes))),
		DefinitionSubstitutions: &subs,
		TracingEnabled:          jsii.Bool(true),
		Logs: &awsstepfunctions.LogOptions{
			Destination: smLogs,
			Level:       awsstepfunctions.LogLevel_ALL,
			// Payloads carry ids, but a form's answers pass through too.
			IncludeExecutionData: jsii.Bool(false),
		},
	})
	// Sorted, like every map iteration here, so that the template is stable.
	for _, key := range slices.Sorted(maps.Keys(StepFunctionKeys)) {
		fns[StepFunctionKeys[key]].GrantInvoke(sm.Role())
	}

	// api starts and inspects turns and answers their task tokens; the state
	// machine never references api, so the template has no cycle.
	api := fns[FnAPI]
	api.AddEnvironment(jsii.String("STATE_MACHINE_ARN"), sm.StateMachineArn(), nil)
	sm.GrantStartExecution(api)
	sm.GrantExecution(api, jsii.String("states:DescribeExecution"), jsii.String("states:StopExecution"))
	sm.GrantTaskResponse(api)

	// HTTP API: every /v1 route through the JWT authorizer to api.
	cors := &awsapigatewayv2.CorsPreflightOptions{
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
	httpAPI := awsapigatewayv2.NewHttpApi(stack, jsii.String("HttpApi"), &awsapigatewayv2.HttpApiProps{
		ApiName:       jsii.String(prefix),
		Description:   jsii.String("clientagent HTTP API (API.md)"),
		CorsPreflight: cors,
	})
	authorizer := awsapigatewayv2authorizers.NewHttpJwtAuthorizer(jsii.String("Jwt"), jsii.String(p.JWTIssuer),
		&awsapigatewayv2authorizers.HttpJwtAuthorizerProps{
			AuthorizerName: jsii.String(prefix + "-jwt"),
			JwtAudience:    jsii.Strings(p.JWTAudience...),
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

	awscdk.NewCfnOutput(stack, jsii.String("ApiUrl"), &awscdk.CfnOutputProps{
		Value: httpAPI.ApiEndpoint(), Description: jsii.String("base URL of the HTTP API (append /v1/…)"),
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
	if demoURL != nil {
		awscdk.NewCfnOutput(stack, jsii.String("DemoAgentsUrl"), &awscdk.CfnOutputProps{
			Value: demoURL.Url(), Description: jsii.String("the demo A2A specialists (agents/svg, agents/png, …)"),
		})
	}
	return stack
}

// vpcPlacement puts a function in the VPC's private subnets.
type vpcPlacement struct {
	vpc awsec2.IVpc
	sg  awsec2.ISecurityGroup
}

// newFunction defines one Lambda from BinDir/<name>/bootstrap.
func newFunction(stack awscdk.Stack, p StackProps, spec functionSpec, place *vpcPlacement) awslambda.Function {
	id := "Fn" + strings.ToUpper(spec.name[:1]) + spec.name[1:]
	logs := awslogs.NewLogGroup(stack, jsii.String(id+"Logs"), &awslogs.LogGroupProps{
		LogGroupName:  jsii.String("/aws/lambda/clientagent-" + p.EnvName + "-" + spec.name),
		Retention:     awslogs.RetentionDays_ONE_MONTH,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	props := &awslambda.FunctionProps{
		FunctionName:  jsii.String("clientagent-" + p.EnvName + "-" + spec.name),
		Description:   jsii.String(spec.desc),
		Runtime:       awslambda.Runtime_PROVIDED_AL2023(),
		Architecture:  awslambda.Architecture_ARM_64(),
		Handler:       jsii.String("bootstrap"),
		Code:          awslambda.Code_FromAsset(jsii.String(filepath.Join(p.BinDir, spec.name)), nil),
		MemorySize:    jsii.Number(spec.memory),
		Timeout:       awscdk.Duration_Seconds(jsii.Number(spec.timeout)),
		LoggingFormat: awslambda.LoggingFormat_JSON,
		LogGroup:      logs,
		Tracing:       awslambda.Tracing_ACTIVE,
	}
	if place != nil {
		props.Vpc = place.vpc
		props.VpcSubnets = &awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS}
		props.SecurityGroups = &[]awsec2.ISecurityGroup{place.sg}
	}
	return awslambda.NewFunction(stack, jsii.String(id), props)
}
