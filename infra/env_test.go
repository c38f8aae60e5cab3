package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"
)

// Per-environment settings (cdk.json "environments"), Cognito, alarms, and
// what holds for every configuration.

// deletionPolicies returns the DeletionPolicy of every resource of a type.
func (s *synthesized) deletionPolicies(typ string) map[string]any {
	out := map[string]any{}
	for id, r := range s.json["Resources"].(map[string]any) {
		rm := r.(map[string]any)
		if rm["Type"] == typ {
			out[id] = rm["DeletionPolicy"]
		}
	}
	return out
}

// `make synth ENV=dev` and `ENV=prod` differ where cdk.json says: prod
// retains data and logs longer, snapshots the cache daily, logs less, and
// allows the cache more.
func TestEnvironmentDifferences(t *testing.T) {
	t.Parallel()
	type view struct {
		LambdaLogLevels  []string // "app/system" of every function
		LogRetention     []any    // RetentionInDays of every log group
		LogGroupsPolicy  []any
		BucketsPolicy    []any
		CachePolicy      any
		CacheLimits      any
		CacheSnapshots   []any // SnapshotRetentionLimit, DailySnapshotTime
		UserPoolPolicy   any
		StateMachineLogs any
		NATGateways      int
		ArtifactExpiry   any
		DemoAgents       bool
	}
	get := func(s *synthesized) view {
		var v view
		for _, fn := range s.resources("AWS::Lambda::Function") {
			lc := fn["LoggingConfig"].(map[string]any)
			v.LambdaLogLevels = append(v.LambdaLogLevels, fmt.Sprintf("%v/%v", lc["ApplicationLogLevel"], lc["SystemLogLevel"]))
		}
		v.LambdaLogLevels = slices.Compact(slices.Sorted(slices.Values(v.LambdaLogLevels)))
		for id, lg := range s.resources("AWS::Logs::LogGroup") {
			v.LogRetention = append(v.LogRetention, lg["RetentionInDays"])
			v.LogGroupsPolicy = append(v.LogGroupsPolicy, s.deletionPolicies("AWS::Logs::LogGroup")[id])
		}
		v.LogRetention = slices.Compact(v.LogRetention)
		v.LogGroupsPolicy = slices.Compact(v.LogGroupsPolicy)
		for _, p := range s.deletionPolicies("AWS::S3::Bucket") {
			v.BucketsPolicy = append(v.BucketsPolicy, p)
		}
		v.BucketsPolicy = slices.Compact(v.BucketsPolicy)
		cacheID, cache := s.one(t, "AWS::ElastiCache::ServerlessCache")
		v.CachePolicy = s.deletionPolicies("AWS::ElastiCache::ServerlessCache")[cacheID]
		v.CacheLimits = cache["CacheUsageLimits"]
		v.CacheSnapshots = []any{cache["SnapshotRetentionLimit"], cache["DailySnapshotTime"]}
		poolID, _ := s.one(t, "AWS::Cognito::UserPool")
		v.UserPoolPolicy = s.deletionPolicies("AWS::Cognito::UserPool")[poolID]
		_, sm := s.turnMachine(t)
		v.StateMachineLogs = sm["LoggingConfiguration"].(map[string]any)["Level"]
		v.NATGateways = len(s.resources("AWS::EC2::NatGateway"))
		_, bucket := s.named(t, "AWS::S3::Bucket", "Artifacts")
		v.ArtifactExpiry = bucket["LifecycleConfiguration"].(map[string]any)["Rules"].([]any)[0].(map[string]any)["ExpirationInDays"]
		v.DemoAgents = s.functionID(FnDemoAgents) != ""
		return v
	}
	limits := func(gb, ecpu float64) any {
		return map[string]any{"DataStorage": map[string]any{"Maximum": gb, "Unit": "GB"}, "ECPUPerSecond": map[string]any{"Maximum": ecpu}}
	}
	want := map[string]view{
		"dev": {
			LambdaLogLevels: []string{"DEBUG/INFO"}, LogRetention: []any{float64(7)}, LogGroupsPolicy: []any{"Delete"},
			BucketsPolicy: []any{"Delete"}, CachePolicy: "Delete", CacheLimits: limits(1, 5000), CacheSnapshots: []any{nil, nil},
			UserPoolPolicy: "Delete", StateMachineLogs: "ALL", NATGateways: 1, ArtifactExpiry: float64(7), DemoAgents: true,
		},
		"prod": {
			LambdaLogLevels: []string{"INFO/WARN"}, LogRetention: []any{float64(365)}, LogGroupsPolicy: []any{"Retain"},
			BucketsPolicy: []any{"Retain"}, CachePolicy: "Retain", CacheLimits: limits(10, 100000), CacheSnapshots: []any{float64(7), "03:00"},
			UserPoolPolicy: "Retain", StateMachineLogs: "ERROR", NATGateways: 2, ArtifactExpiry: float64(30), DemoAgents: false,
		},
	}
	for env, w := range want {
		if diff := cmp.Diff(w, get(synth(t, env))); diff != "" {
			t.Errorf("%s (-want +got):\n%s", env, diff)
		}
	}
	// The created secret follows the data: prod keeps it.
	prod := synth(t, "prod")
	secretID, _ := prod.one(t, "AWS::SecretsManager::Secret")
	if got := prod.deletionPolicies("AWS::SecretsManager::Secret")[secretID]; got != "Retain" {
		t.Errorf("prod secret DeletionPolicy = %v, want Retain", got)
	}
	// The same through the assertions API, as a reviewer would write it.
	assertTemplate(t, "prod cache", func() {
		prod.tpl.HasResource(jsii.String("AWS::ElastiCache::ServerlessCache"), map[string]any{
			"DeletionPolicy":      "Retain",
			"UpdateReplacePolicy": "Retain",
			"Properties": assertions.Match_ObjectLike(&map[string]any{
				"Engine": "valkey", "SnapshotRetentionLimit": 7,
			}),
		})
	})
}

// Without jwtIssuer the stack creates a Cognito user pool and a public app
// client, and the JWT authorizer trusts exactly them.
func TestCognitoWhenNoIssuer(t *testing.T) {
	t.Parallel()
	s := synth(t, "dev")
	poolID, pool := s.one(t, "AWS::Cognito::UserPool")
	clientID, client := s.one(t, "AWS::Cognito::UserPoolClient")
	if got := mustJSON(pool["AdminCreateUserConfig"]); got != `{"AllowAdminCreateUserOnly":true}` {
		t.Errorf("AdminCreateUserConfig = %s, want admin-created users only", got)
	}
	gotClient := map[string]any{
		"GenerateSecret":    client["GenerateSecret"],
		"ExplicitAuthFlows": client["ExplicitAuthFlows"],
		"AllowedOAuthFlows": client["AllowedOAuthFlows"],
		"UserPoolId":        client["UserPoolId"],
	}
	wantClient := map[string]any{
		"GenerateSecret": false,
		// SRP only: no plain password flow.
		"ExplicitAuthFlows": []any{"ALLOW_USER_SRP_AUTH", "ALLOW_REFRESH_TOKEN_AUTH"},
		"AllowedOAuthFlows": nil,
		"UserPoolId":        map[string]any{"Ref": poolID},
	}
	if diff := cmp.Diff(wantClient, gotClient); diff != "" {
		t.Errorf("user pool client (-want +got):\n%s", diff)
	}
	_, auth := s.one(t, "AWS::ApiGatewayV2::Authorizer")
	jwt := auth["JwtConfiguration"].(map[string]any)
	if diff := cmp.Diff([]any{map[string]any{"Ref": clientID}}, jwt["Audience"]); diff != "" {
		t.Errorf("JWT audience (-want +got):\n%s", diff)
	}
	// https://cognito-idp.<region>.amazonaws.com/<pool id>, as in the tokens
	issuer := mustJSON(jwt["Issuer"])
	for _, part := range []string{`"https://cognito-idp.`, `{"Ref":"AWS::Region"}`, `{"Ref":"AWS::URLSuffix"}`, `"/"`, `{"Ref":"` + poolID + `"}`} {
		if !strings.Contains(issuer, part) {
			t.Errorf("JWT issuer = %s, want it to contain %s", issuer, part)
		}
	}
	outputs := s.json["Outputs"].(map[string]any)
	for name, ref := range map[string]string{"UserPoolId": poolID, "UserPoolClientId": clientID} {
		out, _ := outputs[name].(map[string]any)
		if diff := cmp.Diff(map[string]any{"Ref": ref}, out["Value"]); diff != "" {
			t.Errorf("output %s (-want +got):\n%s", name, diff)
		}
	}
	if got := mustJSON(outputs["JwtIssuer"].(map[string]any)["Value"]); got != issuer {
		t.Errorf("output JwtIssuer = %s, want the authorizer's %s", got, issuer)
	}

	// With an issuer of one's own, no pool.
	own := synth(t, "bedrock")
	assertTemplate(t, "own issuer", func() {
		own.tpl.ResourceCountIs(jsii.String("AWS::Cognito::UserPool"), jsii.Number(0))
		own.tpl.ResourceCountIs(jsii.String("AWS::Cognito::UserPoolClient"), jsii.Number(0))
	})
	for _, name := range []string{"UserPoolId", "UserPoolClientId"} {
		if _, ok := own.json["Outputs"].(map[string]any)[name]; ok {
			t.Errorf("output %s with an own issuer, want none", name)
		}
	}
}

// Every /v1/ route of every configuration goes through the JWT authorizer.
func TestEveryV1RouteHasJWTAuthorizer(t *testing.T) {
	t.Parallel()
	for config := range configs {
		s := synth(t, config)
		authID, _ := s.one(t, "AWS::ApiGatewayV2::Authorizer")
		routes := s.resources("AWS::ApiGatewayV2::Route")
		if len(routes) == 0 {
			t.Errorf("%s: no routes", config)
		}
		for id, r := range routes {
			key, _ := r["RouteKey"].(string)
			if _, path, _ := strings.Cut(key, " "); !strings.HasPrefix(path, "/v1/") {
				t.Errorf("%s: route %s %q outside /v1/", config, id, key)
			}
			if r["AuthorizationType"] != "JWT" || mustJSON(r["AuthorizerId"]) != mustJSON(map[string]any{"Ref": authID}) {
				t.Errorf("%s: route %s %q is not behind the JWT authorizer", config, id, key)
			}
		}
	}
}

// Every Go function of every configuration: arm64, provided.al2023, handler
// bootstrap (the `make build` output), JSON logs with the environment's levels.
func TestEveryFunctionArm64ProvidedAL2023(t *testing.T) {
	t.Parallel()
	for config := range configs {
		s := synth(t, config)
		assertTemplate(t, config, func() {
			s.tpl.AllResourcesProperties(jsii.String("AWS::Lambda::Function"), map[string]any{
				"Runtime": "provided.al2023", "Architectures": []any{"arm64"}, "Handler": "bootstrap",
				"TracingConfig": map[string]any{"Mode": "Active"},
			})
		})
		for id, fn := range s.resources("AWS::Lambda::Function") {
			lc := fn["LoggingConfig"].(map[string]any)
			got := []any{lc["LogFormat"], lc["ApplicationLogLevel"], lc["SystemLogLevel"]}
			if diff := cmp.Diff([]any{"JSON", s.props.LogLevel, s.props.SystemLogLevel}, got); diff != "" {
				t.Errorf("%s: %s LoggingConfig (-want +got):\n%s", config, id, diff)
			}
		}
	}
}

// Alarms: failed and timed-out executions, every function's errors and
// throttles, and turn-ended events in the dead-letter queue, all to the
// alarm topic; alarmEmail subscribes an address.
func TestAlarms(t *testing.T) {
	t.Parallel()
	for _, config := range []string{"bedrock", "prod"} {
		s := synth(t, config)
		topicID, _ := s.one(t, "AWS::SNS::Topic")
		smID, _ := s.turnMachine(t)
		dlqID, _ := s.one(t, "AWS::SQS::Queue")
		var got []string
		for id, a := range s.resources("AWS::CloudWatch::Alarm") {
			if limitAlarms[strings.TrimPrefix(a["AlarmName"].(string), "clientagent-"+s.props.EnvName+"-")] {
				continue // TestLimitAlarms
			}
			if diff := cmp.Diff([]any{map[string]any{"Ref": topicID}}, a["AlarmActions"]); diff != "" {
				t.Errorf("%s: alarm %s actions (-want +got):\n%s", config, id, diff)
			}
			if a["Threshold"] != float64(1) || a["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" || a["TreatMissingData"] != "notBreaching" {
				t.Errorf("%s: alarm %s = %s, want ≥ 1 in a period, missing data not breaching", config, id, mustJSON(a))
			}
			metric := a
			suffix := ""
			if ms, ok := a["Metrics"].([]any); ok {
				// invoke's errors alarm is metric math: its errors minus the
				// workflow continuations its log shows.
				var expr string
				for _, m := range ms {
					mm := m.(map[string]any)
					if e, ok := mm["Expression"].(string); ok {
						expr = e
						continue
					}
					stat := mm["MetricStat"].(map[string]any)["Metric"].(map[string]any)
					if stat["MetricName"] == "WorkflowContinuations" {
						suffix = fmt.Sprintf(" minus %v/%v", stat["Namespace"], stat["MetricName"])
						continue
					}
					metric = stat
				}
				if expr != "errors - continuations" {
					t.Errorf("%s: alarm %s expression = %q, want errors - continuations", config, id, expr)
				}
			}
			dims, _ := json.Marshal(metric["Dimensions"])
			var target string
			for _, ref := range refsIn(metric["Dimensions"]) {
				target = ref
			}
			switch {
			case target == smID:
				target = "statemachine"
			case target == dlqID:
				target = "turn-ended-dlq"
				// Messages waiting, not a sum over the period.
				if metric["Statistic"] != "Maximum" {
					t.Errorf("%s: alarm %s statistic = %v, want Maximum", config, id, metric["Statistic"])
				}
			case strings.Contains(string(dims), "FunctionName"):
				for _, name := range append(functionNames(), FnDemoAgents) {
					if fid := s.functionID(name); fid == target {
						target = name
					}
				}
			}
			got = append(got, fmt.Sprintf("%v %v/%v%s", target, metric["Namespace"], metric["MetricName"], suffix))
		}
		slices.Sort(got)
		want := []string{"statemachine AWS/States/ExecutionsFailed", "statemachine AWS/States/ExecutionsTimedOut",
			"turn-ended-dlq AWS/SQS/ApproximateNumberOfMessagesVisible", " clientagent/" + s.props.EnvName + "/StoreFull"}
		names := functionNames()
		if s.props.DemoAgents {
			names = append(names, FnDemoAgents)
		}
		for _, name := range names {
			errs := name + " AWS/Lambda/Errors"
			if name == FnInvoke {
				errs += " minus clientagent/" + s.props.EnvName + "/WorkflowContinuations"
			}
			want = append(want, errs, name+" AWS/Lambda/Throttles")
		}
		slices.Sort(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s alarms (-want +got):\n%s", config, diff)
		}
		// The continuations are counted from invoke's own log lines.
		_, filter := s.one(t, "AWS::Logs::MetricFilter")
		invokeLogs, _ := s.named(t, "AWS::Logs::LogGroup", "FnInvokeLogs")
		if filter["FilterPattern"] != `{ $.status = "continues" }` || mustJSON(filter["LogGroupName"]) != mustJSON(map[string]any{"Ref": invokeLogs}) {
			t.Errorf("%s: metric filter = %s, want status continues on invoke's log group %s", config, mustJSON(filter), invokeLogs)
		}
		subs := s.resources("AWS::SNS::Subscription")
		var emails []string
		for _, sub := range subs {
			emails = append(emails, fmt.Sprintf("%v %v", sub["Protocol"], sub["Endpoint"]))
		}
		var wantEmails []string
		if s.props.AlarmEmail != "" {
			wantEmails = []string{"email " + s.props.AlarmEmail}
		}
		if diff := cmp.Diff(wantEmails, emails); diff != "" {
			t.Errorf("%s alarm subscriptions (-want +got):\n%s", config, diff)
		}
	}
}

// limitAlarms are the alarms that watch a limit rather than count faults
// (addLimitAlarms), by name without the environment's prefix.
var limitAlarms = map[string]bool{"turns-throttled": true, "api-5xx": true, "account-concurrency": true, "store-storage": true, "store-ecpu": true}

// The limits' alarms: throttled executions, the API's 5xx, the account's
// Lambda concurrency at 80% of its quota, and the cache at 75% of its
// storage and ECPU caps, each with its threshold from the configuration.
func TestLimitAlarms(t *testing.T) {
	t.Parallel()
	for _, config := range []string{"bedrock", "prod"} {
		s := synth(t, config)
		p := s.props
		topicID, _ := s.one(t, "AWS::SNS::Topic")
		smID, _ := s.turnMachine(t)
		apiID, _ := s.one(t, "AWS::ApiGatewayV2::Api")
		cacheID, _ := s.one(t, "AWS::ElastiCache::ServerlessCache")
		type alarm struct {
			Metric, Target string
			Threshold      float64
			Periods        float64
			Expression     string
		}
		got := map[string]alarm{}
		for _, a := range s.resources("AWS::CloudWatch::Alarm") {
			name := strings.TrimPrefix(a["AlarmName"].(string), "clientagent-"+p.EnvName+"-")
			if !limitAlarms[name] {
				continue
			}
			if diff := cmp.Diff([]any{map[string]any{"Ref": topicID}}, a["AlarmActions"]); diff != "" {
				t.Errorf("%s: alarm %s actions (-want +got):\n%s", config, name, diff)
			}
			if a["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" {
				t.Errorf("%s: alarm %s compares %v", config, name, a["ComparisonOperator"])
			}
			al := alarm{Threshold: a["Threshold"].(float64), Periods: a["EvaluationPeriods"].(float64)}
			metric := a
			ms, _ := a["Metrics"].([]any)
			for _, m := range ms {
				mm := m.(map[string]any)
				if e, ok := mm["Expression"].(string); ok {
					al.Expression = e
					continue
				}
				metric = mm["MetricStat"].(map[string]any)["Metric"].(map[string]any)
			}
			al.Metric = fmt.Sprintf("%v/%v", metric["Namespace"], metric["MetricName"])
			for _, ref := range refsIn(metric["Dimensions"]) {
				al.Target = ref
			}
			got[name] = al
		}
		want := map[string]alarm{
			"turns-throttled":     {"AWS/States/ExecutionThrottled", smID, 1, 1, ""},
			"api-5xx":             {"AWS/ApiGateway/5xx", apiID, API5xxThreshold, 1, ""},
			"account-concurrency": {"AWS/Lambda/ClaimedAccountConcurrency", "", 0.8 * float64(p.LambdaAccountConcurrency), 3, ""},
			"store-storage":       {"AWS/ElastiCache/BytesUsedForCache", cacheID, 0.75 * float64(p.ValkeyMaxStorageGB) * 1e9, 1, ""},
			"store-ecpu":          {"AWS/ElastiCache/ElastiCacheProcessingUnits", cacheID, 0.75 * float64(p.ValkeyMaxECPUPerSecond), 5, "ecpu / 60"},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s limit alarms (-want +got):\n%s", config, diff)
		}
	}
}

// functionID returns the logical id of a function by name, or "".
func (s *synthesized) functionID(name string) string {
	want := "clientagent-" + s.props.EnvName + "-" + name
	for id, p := range s.resources("AWS::Lambda::Function") {
		if p["FunctionName"] == want {
			return id
		}
	}
	return ""
}

// docs/design.md §11/§6: what Step Functions runs is the ASL file with the function
// ARNs substituted, each state calling the function its key names.
func TestDefinitionIsASLWithSubstitutions(t *testing.T) {
	t.Parallel()
	s := synth(t, "dev")
	loopID, loop := s.loopMachine(t)
	_, turn := s.turnMachine(t)
	got := map[string]string{}
	for _, m := range []struct {
		file string
		sm   map[string]any
	}{{loopPath, loop}, {aslPath, turn}} {
		asl, err := os.ReadFile(m.file)
		if err != nil {
			t.Fatal(err)
		}
		// CloudFormation's substitution, with each function's ARN standing
		// for its logical id, and the loop's for its own.
		subs := m.sm["DefinitionSubstitutions"].(map[string]any)
		arnOf := map[string]string{}
		for key, v := range subs {
			if key == "LoopStateMachine" {
				if diff := cmp.Diff(map[string]any{"Ref": loopID}, v); diff != "" {
					t.Errorf("DefinitionSubstitutions[LoopStateMachine] (-want +got):\n%s", diff)
				}
				arnOf[key] = "arn:aws:states:us-east-1:123456789012:stateMachine:" + loopID
				continue
			}
			id := getAttTarget(v)
			if id == "" {
				t.Fatalf("DefinitionSubstitutions[%s] = %s, want a function's Arn", key, mustJSON(v))
			}
			arnOf[key] = "arn:aws:lambda:us-east-1:123456789012:function:" + id
		}
		apply := func(def string) string {
			for key, arn := range arnOf {
				def = strings.ReplaceAll(def, "${"+key+"}", arn)
			}
			return def
		}
		deployed := apply(m.sm["DefinitionString"].(string))
		if want := apply(string(asl)); deployed != want {
			t.Fatalf("the deployed definition differs from %s with the substitutions applied", m.file)
		}
		// Walk the states (the Map's too): state → function it invokes.
		var def map[string]any
		if err := json.Unmarshal([]byte(deployed), &def); err != nil {
			t.Fatalf("deployed definition: %v", err)
		}
		var walk func(states map[string]any)
		walk = func(states map[string]any) {
			for name, st := range states {
				sm := st.(map[string]any)
				if args, ok := sm["Arguments"].(map[string]any); ok {
					if fn, ok := args["FunctionName"].(string); ok {
						id := fn[strings.LastIndex(fn, ":")+1:]
						for _, n := range append(functionNames(), FnDemoAgents) {
							if s.functionID(n) == id {
								got[name] = n
							}
						}
						if got[name] == "" {
							got[name] = fn
						}
					}
					if arn, ok := args["StateMachineArn"].(string); ok {
						got[name] = arn[strings.LastIndex(arn, ":")+1:]
					}
				}
				if proc, ok := sm["ItemProcessor"].(map[string]any); ok {
					walk(proc["States"].(map[string]any))
				}
			}
		}
		walk(def["States"].(map[string]any))
		if def["QueryLanguage"] != "JSONata" {
			t.Errorf("%s: QueryLanguage = %v, want JSONata", m.file, def["QueryLanguage"])
		}
	}
	want := map[string]string{
		"LLMStep": FnLLMStep, "ValidateBatch": FnValidate, "AwaitUser": FnAwait,
		"InvokeCall": FnInvoke, "CallFailed": FnInvoke, "AppendResults": FnAppend, "FailTurn": FnLLMStep,
		"RunLoop": loopID,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("state → function (-want +got):\n%s", diff)
	}
}

// Operators get one dashboard per environment: turns and their duration,
// every function's duration, errors and throttles, workflow continuations
// and the cache's load.
func TestDashboard(t *testing.T) {
	t.Parallel()
	s := synth(t, "bedrock")
	_, d := s.one(t, "AWS::CloudWatch::Dashboard")
	if d["DashboardName"] != "clientagent-test" {
		t.Errorf("DashboardName = %v, want clientagent-test", d["DashboardName"])
	}
	body := mustJSON(d["DashboardBody"])
	for _, want := range []string{`\"AWS/States\",\"ExecutionsStarted\"`, `ExecutionsFailed`, `ExecutionTime`,
		`\"clientagent/test\",\"WorkflowContinuations\"`, `ElastiCacheProcessingUnits`, `BytesUsedForCache`, `\"Throttles\"`} {
		if !strings.Contains(body, want) {
			t.Errorf("dashboard body lacks %s", want)
		}
	}
	for _, name := range append(functionNames(), FnDemoAgents) {
		if !strings.Contains(body, `{"Ref":"`+s.functionID(name)+`"}`) {
			t.Errorf("dashboard does not show function %s", name)
		}
	}
}

// A turn whose execution ended abnormally without a step recording it is
// ended by llmstep: an EventBridge rule on the state machine's failed,
// timed-out and aborted executions targets it (turn.ExecutionEnded), with
// a resource policy rather than any role statement.
func TestTurnEndedRule(t *testing.T) {
	t.Parallel()
	s := synth(t, "bedrock")
	smID, _ := s.turnMachine(t)
	_, rule := s.one(t, "AWS::Events::Rule")
	want := map[string]any{
		"source":      []any{"aws.states"},
		"detail-type": []any{"Step Functions Execution Status Change"},
		"detail": map[string]any{
			"stateMachineArn": []any{map[string]any{"Ref": smID}},
			"status":          []any{"FAILED", "TIMED_OUT", "ABORTED"},
		},
	}
	if diff := cmp.Diff(want, rule["EventPattern"]); diff != "" {
		t.Errorf("EventPattern (-want +got):\n%s", diff)
	}
	llmID := s.functionID(FnLLMStep)
	targets, _ := rule["Targets"].([]any)
	if len(targets) != 1 || mustJSON(targets[0].(map[string]any)["Arn"]) != mustJSON(map[string]any{"Fn::GetAtt": []any{llmID, "Arn"}}) {
		t.Fatalf("Targets = %s, want llmstep", mustJSON(rule["Targets"]))
	}
	var allowed bool
	for _, p := range s.resources("AWS::Lambda::Permission") {
		if p["Principal"] == "events.amazonaws.com" && mustJSON(p["FunctionName"]) == mustJSON(map[string]any{"Fn::GetAtt": []any{llmID, "Arn"}}) {
			allowed = true
		}
	}
	if !allowed {
		t.Errorf("no Lambda permission lets EventBridge invoke llmstep")
	}

	// Issue 14: an event EventBridge cannot deliver, or whose handling
	// fails through Lambda's asynchronous retries, lands in one encrypted
	// dead-letter queue (kept 14 days, alarmed on: TestAlarms).
	dlqID, dlq := s.one(t, "AWS::SQS::Queue")
	gotQueue := map[string]any{"SqsManagedSseEnabled": dlq["SqsManagedSseEnabled"], "MessageRetentionPeriod": dlq["MessageRetentionPeriod"]}
	if diff := cmp.Diff(map[string]any{"SqsManagedSseEnabled": true, "MessageRetentionPeriod": float64(14 * 24 * 3600)}, gotQueue); diff != "" {
		t.Errorf("dead-letter queue (-want +got):\n%s", diff)
	}
	target := targets[0].(map[string]any)
	gotTarget := map[string]any{"DeadLetterConfig": target["DeadLetterConfig"], "RetryPolicy": target["RetryPolicy"]}
	wantTarget := map[string]any{
		"DeadLetterConfig": map[string]any{"Arn": map[string]any{"Fn::GetAtt": []any{dlqID, "Arn"}}},
		"RetryPolicy":      map[string]any{"MaximumRetryAttempts": float64(8), "MaximumEventAgeInSeconds": float64(6 * 3600)},
	}
	if diff := cmp.Diff(wantTarget, gotTarget); diff != "" {
		t.Errorf("rule target (-want +got):\n%s", diff)
	}
	// Only EventBridge may put messages in it, and only over TLS.
	_, qp := s.one(t, "AWS::SQS::QueuePolicy")
	var senders []string
	for _, st := range asList(asMap(qp["PolicyDocument"])["Statement"]) {
		sm := asMap(st)
		if sm["Effect"] == "Allow" {
			senders = append(senders, fmt.Sprintf("%v %v if %s", asMap(sm["Principal"])["Service"], sm["Action"], mustJSON(sm["Condition"])))
		}
	}
	ruleID, _ := s.one(t, "AWS::Events::Rule")
	wantSender := fmt.Sprintf(`events.amazonaws.com sqs:SendMessage if {"ArnEquals":{"aws:SourceArn":{"Fn::GetAtt":["%s","Arn"]}}}`, ruleID)
	if diff := cmp.Diff([]string{wantSender}, senders); diff != "" {
		t.Errorf("queue policy Allow statements (-want +got):\n%s", diff)
	}
	if doc := mustJSON(qp["PolicyDocument"]); !strings.Contains(doc, `"aws:SecureTransport":"false"`) {
		t.Errorf("queue policy = %s, want a Deny without TLS", doc)
	}
	// llmstep's own failures on these events (its asynchronous invocations:
	// only EventBridge makes them) go to the same queue.
	_, cfg := s.one(t, "AWS::Lambda::EventInvokeConfig")
	gotCfg := map[string]any{"FunctionName": cfg["FunctionName"], "OnFailure": asMap(cfg["DestinationConfig"])["OnFailure"]}
	wantCfg := map[string]any{
		"FunctionName": map[string]any{"Ref": llmID},
		"OnFailure":    map[string]any{"Destination": map[string]any{"Fn::GetAtt": []any{dlqID, "Arn"}}},
	}
	if diff := cmp.Diff(wantCfg, gotCfg); diff != "" {
		t.Errorf("llmstep asynchronous invocation (-want +got):\n%s", diff)
	}
}

// Issue 14: the HTTP API's stage logs every request as one JSON object to
// a log group of the data stack, and throttles every route by default at
// the environment's limits (cdk.json).
func TestHTTPAPIStageLogsAndThrottles(t *testing.T) {
	t.Parallel()
	want := map[string][2]float64{"dev": {25, 50}, "prod": {500, 1000}, "bedrock": {50, 100}}
	for config, limits := range want {
		s := synth(t, config)
		apiID, _ := s.one(t, "AWS::ApiGatewayV2::Api")
		_, stage := s.one(t, "AWS::ApiGatewayV2::Stage")
		if stage["StageName"] != "$default" || mustJSON(stage["ApiId"]) != mustJSON(map[string]any{"Ref": apiID}) {
			t.Errorf("%s: stage %v of %v, want $default of %s", config, stage["StageName"], stage["ApiId"], apiID)
		}
		gotThrottle := asMap(stage["DefaultRouteSettings"])
		wantThrottle := map[string]any{"ThrottlingRateLimit": limits[0], "ThrottlingBurstLimit": limits[1]}
		if diff := cmp.Diff(wantThrottle, gotThrottle); diff != "" {
			t.Errorf("%s: DefaultRouteSettings (-want +got):\n%s", config, diff)
		}
		logs := asMap(stage["AccessLogSettings"])
		groupID, _ := s.named(t, "AWS::Logs::LogGroup", "ApiAccessLogs")
		if diff := cmp.Diff(map[string]any{"Fn::GetAtt": []any{groupID, "Arn"}}, logs["DestinationArn"]); diff != "" {
			t.Errorf("%s: access log destination (-want +got):\n%s", config, diff)
		}
		if _, ok := asMap(s.data["Resources"])[groupID]; !ok {
			t.Errorf("%s: access log group %s is not in the data stack", config, groupID)
		}
		format, _ := logs["Format"].(string)
		var line map[string]string
		if err := json.Unmarshal([]byte(format), &line); err != nil {
			t.Errorf("%s: access log format %q is not a JSON object: %v", config, format, err)
		}
		for key, v := range map[string]string{"requestId": "$context.requestId", "status": "$context.status", "routeKey": "$context.routeKey", "user": "$context.authorizer.claims.sub"} {
			if line[key] != v {
				t.Errorf("%s: access log %s = %q, want %q", config, key, line[key], v)
			}
		}
	}
}

const testAlarmTopicArn = "arn:aws:sns:eu-west-1:123456789012:ops-pager"

func init() {
	// prod from cdk.json sending its alarms to an existing topic.
	// It also requires MFA and enforces threat protection (TestCognitoSecurity).
	configs["alarmtopic"] = fromCDKJSON("prod", map[string]any{CtxAlarmEmail: "", CtxAlarmTopicArn: testAlarmTopicArn,
		CtxCognitoMFA: "required", CtxCognitoThreat: "enforced"})
}

// The stack's alarm topic admits publishers over TLS only; an existing
// topic (alarmTopicArn) replaces it, and every alarm goes there.
func TestAlarmTopic(t *testing.T) {
	t.Parallel()
	s := synth(t, "bedrock")
	topicID, _ := s.one(t, "AWS::SNS::Topic")
	_, policy := s.one(t, "AWS::SNS::TopicPolicy")
	if diff := cmp.Diff([]any{map[string]any{"Ref": topicID}}, policy["Topics"]); diff != "" {
		t.Errorf("topic policy topics (-want +got):\n%s", diff)
	}
	var denied bool
	for _, st := range asList(asMap(policy["PolicyDocument"])["Statement"]) {
		st := asMap(st)
		cond := mustJSON(st["Condition"])
		if st["Effect"] == "Deny" && slices.Contains(actionsOf(st), "sns:Publish") && cond == `{"Bool":{"aws:SecureTransport":"false"}}` {
			denied = true
		}
	}
	if !denied {
		t.Errorf("topic policy = %s, want a Deny of sns:Publish without aws:SecureTransport", mustJSON(policy))
	}

	e := synth(t, "alarmtopic")
	if n := len(e.resources("AWS::SNS::Topic")); n != 0 {
		t.Errorf("with alarmTopicArn: %d SNS topics, want none", n)
	}
	alarms := e.resources("AWS::CloudWatch::Alarm")
	if len(alarms) == 0 {
		t.Fatal("with alarmTopicArn: no alarms")
	}
	for id, a := range alarms {
		if diff := cmp.Diff([]any{testAlarmTopicArn}, a["AlarmActions"]); diff != "" {
			t.Errorf("alarm %s actions (-want +got):\n%s", id, diff)
		}
	}
	if got := asMap(asMap(e.json["Outputs"])["AlarmTopicArn"])["Value"]; got != testAlarmTopicArn {
		t.Errorf("AlarmTopicArn output = %v, want %s", got, testAlarmTopicArn)
	}
}

// Synth warns of an environment whose model would have no tools: no demo
// specialists, no agents, no MCP servers (prod as cdk.json has it).
func TestNoSpecialistsWarning(t *testing.T) {
	t.Parallel()
	for config, want := range map[string]bool{"prod": true, "bedrock": false, "openai": false, "mcp": false} {
		s := synth(t, config)
		var got bool
		for _, w := range s.warnings {
			if strings.Contains(w, "no specialists") {
				got = true
			}
		}
		if got != want {
			t.Errorf("%s: a no-specialists warning = %v, want %v (warnings %q)", config, got, want, s.warnings)
		}
	}
}

// The user pool's MFA (a TOTP app, no SMS) and threat protection are
// settings: optional MFA and no threat protection by default, required MFA
// and enforced protection (the Plus plan) when asked for.
func TestCognitoSecurity(t *testing.T) {
	t.Parallel()
	type security struct{ MFA, Factors, Tier, Mode any }
	for config, want := range map[string]security{
		"dev":        {"OPTIONAL", []any{"SOFTWARE_TOKEN_MFA"}, nil, nil},
		"alarmtopic": {"ON", []any{"SOFTWARE_TOKEN_MFA"}, "PLUS", "ENFORCED"},
	} {
		s := synth(t, config)
		_, pool := s.one(t, "AWS::Cognito::UserPool")
		got := security{pool["MfaConfiguration"], pool["EnabledMfas"], pool["UserPoolTier"], asMap(pool["UserPoolAddOns"])["AdvancedSecurityMode"]}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s user pool security (-want +got):\n%s", config, diff)
		}
		pp := asMap(asMap(pool["Policies"])["PasswordPolicy"])
		if pp["MinimumLength"] != float64(12) || pp["RequireSymbols"] != true || pp["RequireUppercase"] != true || pp["RequireNumbers"] != true {
			t.Errorf("%s password policy = %s, want 12 characters of every class", config, mustJSON(pp))
		}
	}
}

// The file bounds of the configuration reach every platform function as
// pkg/platform's FilesFromEnv reads them; unset, the functions keep the
// platform's defaults (no variable).
func TestFileBoundsEnvironment(t *testing.T) {
	t.Parallel()
	want := map[string]any{"CLIENTAGENT_CONVERSATION_QUOTA": "500MiB", "CLIENTAGENT_MAX_FILE_SIZE": "64MiB",
		"CLIENTAGENT_FILE_TIMEOUT": "90s", "CLIENTAGENT_FILE_MIN_RATE": "16KiB", "CLIENTAGENT_FILE_RATE_WINDOW": "20s"}
	for config, set := range map[string]bool{"openai": true, "bedrock": false} {
		s := synth(t, config)
		for _, name := range functionNames() {
			_, fn := s.function(t, name)
			env := envOf(fn)
			for k, v := range want {
				if set && env[k] != v {
					t.Errorf("%s: %s %s = %v, want %v", config, name, k, env[k], v)
				}
				if _, ok := env[k]; !set && ok {
					t.Errorf("%s: %s %s = %v, want unset (the default)", config, name, k, env[k])
				}
			}
		}
	}
}

// docs/deploy.md states how many alarms a deployment has, with and
// without the demo specialists: the templates have that many.
func TestAlarmCountInDocs(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\((\d+) with the demo specialists, (\d+) without`).FindStringSubmatch(string(b))
	cost := regexp.MustCompile(`CloudWatch alarms, \$0\.10 each \| \$[0-9.]+ \((\d+)\) \| \$[0-9.]+ \((\d+), no demo specialists\)`).FindStringSubmatch(string(b))
	if m == nil || cost == nil {
		t.Fatalf("docs/deploy.md: no alarm counts found (want \"(N with the demo specialists, M without\" and the cost table's row)")
	}
	for i, config := range []string{"bedrock", "prod"} {
		s := synth(t, config)
		if s.props.DemoAgents != (i == 0) {
			t.Fatalf("%s: demo specialists %v, want %v", config, s.props.DemoAgents, i == 0)
		}
		n := strconv.Itoa(len(s.resources("AWS::CloudWatch::Alarm")))
		if m[i+1] != n || cost[i+1] != n {
			t.Errorf("%s has %s alarms; docs/deploy.md says %s (watch list) and %s (cost table)", config, n, m[i+1], cost[i+1])
		}
	}
}
