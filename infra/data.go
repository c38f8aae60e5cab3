package main

import (
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscognito"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awselasticache"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// dataStack is what the data stack (clientagent-<env>-data) holds and the
// app stack uses through cross-stack references: everything that holds
// state or that state sits in. The cache needs the VPC's subnets and
// security groups, so they live here too: deleting the app stack never
// touches the network a retained cache occupies.
type dataStack struct {
	stack awscdk.Stack
	vpc   awsec2.Vpc
	// fnSGs are the functions' security groups, one per function (by
	// name): the only ones the cache admits.
	fnSGs map[string]awsec2.SecurityGroup
	cache awselasticache.CfnServerlessCache
	// valkeyUsers are the functions' ElastiCache user ids (valkeyacl.go).
	valkeyUsers map[string]*string
	valkeyURL   *string
	artifacts   awss3.Bucket
	audit       awss3.Bucket
	// pool and client exist only without a jwtIssuer.
	pool   awscognito.UserPool
	client awscognito.UserPoolClient
	// openAIKey is the created key secret (llm=openai without
	// openaiKeySecretName), else nil.
	openAIKey awssecretsmanager.Secret
	// fnLogs are the platform functions' log groups by function name.
	fnLogs   map[string]awslogs.LogGroup
	turnLogs awslogs.LogGroup
	// loopLogs hold the EXPRESS loop's executions: on AWS its history
	// exists nowhere else.
	loopLogs   awslogs.LogGroup
	accessLogs awslogs.LogGroup
}

// newDataStack defines the data stack of an environment. With RetainData
// (prod) the stack has termination protection and its data (buckets, log
// groups, the cache, the user pool, a created secret) is retained even if
// the stack is deleted; otherwise it all goes with the stack. Names of what
// may be retained end with the stack's own suffix (uniqueSuffix), so a data
// stack created again never collides with what an earlier one left behind.
func newDataStack(scope constructs.Construct, p StackProps) *dataStack {
	sprops := p.StackProps
	sprops.Description = jsii.String("clientagent (" + p.EnvName + "): data — network, Valkey, buckets, users, logs")
	sprops.TerminationProtection = jsii.Bool(p.RetainData)
	stack := awscdk.NewStack(scope, jsii.String(DataStackName(p.EnvName)), &sprops)
	tag(stack, p)
	prefix := "clientagent-" + p.EnvName
	// Buckets are deleted only when empty: CDK's autoDeleteObjects would
	// bring a custom resource whose role has wildcard S3 actions
	// (docs/deploy.md, teardown).
	removal := awscdk.RemovalPolicy_DESTROY
	if p.RetainData {
		removal = awscdk.RemovalPolicy_RETAIN
	}
	d := &dataStack{stack: stack, fnLogs: map[string]awslogs.LogGroup{}}

	// Network: the Lambdas live in private subnets with NAT egress (the LLM,
	// the specialists and the AWS APIs are outside the VPC; docs/deploy.md
	// weighs NAT against endpoints); the cache is reachable only from the
	// Lambdas' security group.
	d.vpc = awsec2.NewVpc(stack, jsii.String("Vpc"), &awsec2.VpcProps{
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
	// A flow log of the rejected traffic only: what a security group
	// refused (a function that lost its way to the cache, a probe) is the
	// question it answers, at a fraction of logging all traffic.
	flowLogs := awslogs.NewLogGroup(stack, jsii.String("VpcFlowLogs"), &awslogs.LogGroupProps{
		LogGroupName:  suffixed(stack, "/"+prefix+"/vpc-flow-rejected"),
		Retention:     retentionDays[p.LogRetentionDays],
		RemovalPolicy: removal,
	})
	flow := d.vpc.AddFlowLog(jsii.String("RejectedTraffic"), &awsec2.FlowLogOptions{
		Destination: awsec2.FlowLogDestination_ToCloudWatchLogs(flowLogs, nil),
		TrafficType: awsec2.FlowLogTrafficType_REJECT,
	})
	suppress(flow, "AwsSolutions-IAM5", "the flow log's role writes log streams of its one log group (<group arn>:*), as VPC Flow Logs needs",
		`/^Resource::<VpcFlowLogs[0-9A-F]{8}\.Arn>(:\*)?$/`, `/^Resource::\*$/`)
	privateSubnets := d.vpc.SelectSubnets(&awsec2.SubnetSelection{SubnetType: awsec2.SubnetType_PRIVATE_WITH_EGRESS})
	cacheSG := awsec2.NewSecurityGroup(stack, jsii.String("ValkeySecurityGroup"), &awsec2.SecurityGroupProps{
		Vpc:              d.vpc,
		Description:      jsii.String(prefix + " ElastiCache Serverless Valkey"),
		AllowAllOutbound: jsii.Bool(false),
	})
	// A security group per function: what may reach the cache is named
	// one by one, and a function's network role can change alone.
	d.fnSGs = map[string]awsec2.SecurityGroup{}
	for _, fn := range valkeyFunctions(p) {
		sg := awsec2.NewSecurityGroup(stack, jsii.String("Fn"+functionID(fn)+"SecurityGroup"), &awsec2.SecurityGroupProps{
			Vpc:              d.vpc,
			Description:      jsii.String(prefix + "-" + fn + " (egress to Valkey, the LLM, specialists, AWS APIs)"),
			AllowAllOutbound: jsii.Bool(true),
		})
		cacheSG.AddIngressRule(sg, awsec2.Port_TcpRange(jsii.Number(valkeyPort), jsii.Number(valkeyReaderPort)),
			jsii.String("Valkey from "+prefix+"-"+fn), nil)
		d.fnSGs[fn] = sg
	}
	userGroup := d.addValkeyUsers(p, prefix)

	subnetIDs := []interface{}{}
	for _, s := range *privateSubnets.SubnetIds {
		subnetIDs = append(subnetIDs, s)
	}
	cacheProps := &awselasticache.CfnServerlessCacheProps{
		Engine:              jsii.String("valkey"),
		MajorEngineVersion:  jsii.String("8"),
		ServerlessCacheName: suffixed(stack, cacheNameBase(prefix)),
		Description:         jsii.String("clientagent conversation records (docs/design.md §4)"),
		SubnetIds:           &subnetIDs,
		SecurityGroupIds:    &[]interface{}{cacheSG.SecurityGroupId()},
		// RBAC: only the functions' users, each signing in with IAM.
		UserGroupId: userGroup.Ref(),
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
	d.cache = awselasticache.NewCfnServerlessCache(stack, jsii.String("Valkey"), cacheProps)
	d.cache.ApplyRemovalPolicy(removal, nil)
	// TLS is always on for ElastiCache Serverless, hence rediss; it is cluster
	// mode, hence pkg/record/valkey's cluster=true (a cluster client).
	d.valkeyURL = awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("rediss://"), d.cache.AttrEndpointAddress(), jsii.String(":" + strconv.Itoa(valkeyPort) + "?cluster=true"),
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
	d.artifacts = awss3.NewBucket(stack, jsii.String("Artifacts"), &awss3.BucketProps{
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

	suppress(d.artifacts, "AwsSolutions-S1", "objects are written by api and invoke alone and read through short-lived presigned URLs that api hands "+
		"out per request, each in the API's access log; S3 access logs would need a bucket of their own to say less")
	// The audit log (docs/design.md §8, pkg/audit): what users approved or rejected
	// and what ran. Versioned, never expires; kept with the stack's data.
	d.audit = awss3.NewBucket(stack, jsii.String("Audit"), &awss3.BucketProps{
		BlockPublicAccess: awss3.BlockPublicAccess_BLOCK_ALL(),
		Encryption:        awss3.BucketEncryption_S3_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		Versioned:         jsii.Bool(true),
		ObjectOwnership:   awss3.ObjectOwnership_BUCKET_OWNER_ENFORCED,
		RemovalPolicy:     removal,
	})
	suppress(d.audit, "AwsSolutions-S1", "the bucket is itself the audit log: written (PutObject only) by the functions that record decisions, "+
		"versioned, never expiring, read by nobody in the stacks")

	// Who may call, without an issuer of one's own: a Cognito user pool.
	if p.JWTIssuer == "" {
		poolProps := &awscognito.UserPoolProps{
			UserPoolName: suffixed(stack, prefix+"-users"),
			// Users are created by an administrator (docs/deploy.md).
			SelfSignUpEnabled: jsii.Bool(false),
			SignInAliases:     &awscognito.SignInAliases{Email: jsii.Bool(true)},
			AutoVerify:        &awscognito.AutoVerifiedAttrs{Email: jsii.Bool(true)},
			AccountRecovery:   awscognito.AccountRecovery_EMAIL_ONLY,
			PasswordPolicy: &awscognito.PasswordPolicy{MinLength: jsii.Number(12), RequireLowercase: jsii.Bool(true),
				RequireUppercase: jsii.Bool(true), RequireDigits: jsii.Bool(true), RequireSymbols: jsii.Bool(true)},
			// A second factor from an authenticator app (TOTP): no SMS, so no
			// SNS role and no per-message cost.
			Mfa:             map[string]awscognito.Mfa{"off": awscognito.Mfa_OFF, "optional": awscognito.Mfa_OPTIONAL, "required": awscognito.Mfa_REQUIRED}[p.CognitoMFA],
			MfaSecondFactor: &awscognito.MfaSecondFactor{Otp: jsii.Bool(true), Sms: jsii.Bool(false)},
			RemovalPolicy:   removal,
		}
		if p.CognitoThreatProtection != "off" {
			// Threat protection needs the Plus plan (per monthly active user).
			poolProps.FeaturePlan = awscognito.FeaturePlan_PLUS
			poolProps.StandardThreatProtectionMode = awscognito.StandardThreatProtectionMode_AUDIT_ONLY
			if p.CognitoThreatProtection == "enforced" {
				poolProps.StandardThreatProtectionMode = awscognito.StandardThreatProtectionMode_FULL_FUNCTION
			}
		}
		d.pool = awscognito.NewUserPool(stack, jsii.String("Users"), poolProps)
		if p.CognitoThreatProtection == "off" {
			suppress(d.pool, "AwsSolutions-COG8", "threat protection (the Plus plan, billed per monthly active user) is the setting cognitoThreatProtection, off by default")
		}
		if p.CognitoMFA != "required" {
			suppress(d.pool, "AwsSolutions-COG2", "MFA is the setting cognitoMfa: optional (TOTP) by default, required on request")
		}
		d.client = d.pool.AddClient(jsii.String("Client"), &awscognito.UserPoolClientOptions{
			UserPoolClientName: jsii.String(prefix + "-web-cli"),
			// A public client (the web page, `clientagent chat`): no secret,
			// no hosted UI; tokens by SRP only, so the password never leaves
			// the client (no USER_PASSWORD_AUTH).
			GenerateSecret:             jsii.Bool(false),
			AuthFlows:                  &awscognito.AuthFlow{UserSrp: jsii.Bool(true)},
			DisableOAuth:               jsii.Bool(true),
			PreventUserExistenceErrors: jsii.Bool(true),
		})
	}

	// The OpenAI-compatible key, when the deployment names no secret of its
	// own: created with a random value, which the operator replaces after deploy.
	if p.LLM == LLMOpenAI && p.OpenAIKeySecretName == "" {
		d.openAIKey = awssecretsmanager.NewSecret(stack, jsii.String("OpenAIKey"), &awssecretsmanager.SecretProps{
			SecretName:    suffixed(stack, prefix+"/openai-api-key"),
			Description:   jsii.String("clientagent " + p.EnvName + ": the OpenAI-compatible API key (put-secret-value; read at each cold start)"),
			RemovalPolicy: removal,
		})
		suppress(d.openAIKey, "AwsSolutions-SMG4", "an external provider's API key: no rotation function can mint one; the operator replaces it (docs/deploy.md)")
	}

	// Logs are data too: every platform function's, the state machine's and
	// the HTTP API's access log. (The demo specialists' logs stay with them
	// in the app stack: whether they exist is a setting of the app.)
	logGroup := func(id, name string) awslogs.LogGroup {
		return awslogs.NewLogGroup(stack, jsii.String(id), &awslogs.LogGroupProps{
			LogGroupName:  suffixed(stack, name),
			Retention:     retentionDays[p.LogRetentionDays],
			RemovalPolicy: removal,
		})
	}
	for _, spec := range platformFunctions {
		d.fnLogs[spec.name] = logGroup("Fn"+functionID(spec.name)+"Logs", "/aws/lambda/"+prefix+"-"+spec.name)
	}
	// /aws/vendedlogs/ keeps CloudWatch Logs' resource policy, which log
	// delivery extends for each group, from outgrowing its size limit.
	d.turnLogs = logGroup("TurnStateMachineLogs", "/aws/vendedlogs/states/"+prefix+"-turn")
	d.loopLogs = logGroup("LoopStateMachineLogs", "/aws/vendedlogs/states/"+prefix+"-loop")
	d.accessLogs = logGroup("ApiAccessLogs", "/aws/vendedlogs/apigateway/"+prefix+"-api")
	return d
}

// uniqueSuffix is the first group of the stack id's UUID: the same for the
// life of the stack, another when the stack is created again.
func uniqueSuffix(stack awscdk.Stack) *string {
	uuid := awscdk.Fn_Select(jsii.Number(2), awscdk.Fn_Split(jsii.String("/"), stack.StackId(), nil))
	return awscdk.Fn_Select(jsii.Number(0), awscdk.Fn_Split(jsii.String("-"), uuid, nil))
}

// suffixed is base-<uniqueSuffix>: the physical name of something the
// stack may retain, which must not collide with what a deleted predecessor
// of the stack retained under the same base.
func suffixed(stack awscdk.Stack, base string) *string {
	return awscdk.Fn_Join(jsii.String(""), &[]*string{jsii.String(base + "-"), uniqueSuffix(stack)})
}

// cacheNameBase is prefix cut so that prefix-<8 hex digits> fits a
// serverless cache's 40 characters, without a trailing '-'.
func cacheNameBase(prefix string) string {
	return strings.TrimRight(prefix[:min(len(prefix), 40-len("-12345678"))], "-")
}

// tag marks every resource of a stack with the app and the environment.
func tag(stack awscdk.Stack, p StackProps) {
	awscdk.Tags_Of(stack).Add(jsii.String("app"), jsii.String("clientagent"), nil)
	awscdk.Tags_Of(stack).Add(jsii.String("env"), jsii.String(p.EnvName), nil)
}
