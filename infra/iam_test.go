package main

import (
	"encoding/json"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/google/go-cmp/cmp"
)

// Least privilege: every statement of every role is in the template, with
// exact action names.

// wildcardActions lists "<resource>: <action>" for every action with a '*'
// in any IAM policy of a template: AWS::IAM::Policy, the inline Policies of
// AWS::IAM::Role, AWS::IAM::ManagedPolicy.
func wildcardActions(tpl map[string]any) []string {
	var out []string
	check := func(id string, doc any) {
		d, _ := doc.(map[string]any)
		for _, st := range asList(d["Statement"]) {
			s, _ := st.(map[string]any)
			for _, key := range []string{"Action", "NotAction"} {
				for _, a := range asList(s[key]) {
					if a == nil {
						continue
					}
					if str, ok := a.(string); !ok || strings.Contains(str, "*") {
						out = append(out, id+": "+mustJSON(a))
					}
				}
			}
		}
	}
	resources, _ := tpl["Resources"].(map[string]any)
	for id, r := range resources {
		rm, _ := r.(map[string]any)
		props, _ := rm["Properties"].(map[string]any)
		switch rm["Type"] {
		case "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy":
			check(id, props["PolicyDocument"])
		case "AWS::IAM::Role":
			for _, p := range asList(props["Policies"]) {
				pm, _ := p.(map[string]any)
				check(id, pm["PolicyDocument"])
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestWildcardActionsFindsThem(t *testing.T) {
	t.Parallel()
	var tpl map[string]any
	err := json.Unmarshal([]byte(`{"Resources":{
		"P":{"Type":"AWS::IAM::Policy","Properties":{"PolicyDocument":{"Statement":[{"Effect":"Allow","Action":["s3:GetObject","s3:List*"],"Resource":"*"}]}}},
		"R":{"Type":"AWS::IAM::Role","Properties":{"Policies":[{"PolicyName":"x","PolicyDocument":{"Statement":{"Effect":"Allow","Action":"*","Resource":"arn:x"}}}]}},
		"M":{"Type":"AWS::IAM::ManagedPolicy","Properties":{"PolicyDocument":{"Statement":[{"Effect":"Allow","Action":"logs:PutLogEvents","Resource":"arn:x:*"}]}}},
		"B":{"Type":"AWS::S3::BucketPolicy","Properties":{"PolicyDocument":{"Statement":[{"Effect":"Deny","Action":"s3:*"}]}}}}}`), &tpl)
	if err != nil {
		t.Fatal(err)
	}
	// The bucket policy's Deny s3:* is a resource policy, not a grant.
	if diff := cmp.Diff([]string{`P: "s3:List*"`, `R: "*"`}, wildcardActions(tpl)); diff != "" {
		t.Errorf("wildcardActions() (-want +got):\n%s", diff)
	}
}

// No IAM statement anywhere grants a wildcard action, and nothing brings
// statements the template does not show: no AWS managed policies, no CDK
// custom resources (their singleton roles would be outside our review).
func TestNoWildcardActions(t *testing.T) {
	t.Parallel()
	for _, config := range slices.Sorted(maps.Keys(configs)) {
		s := synth(t, config)
		if got := wildcardActions(s.json); len(got) > 0 {
			t.Errorf("%s: wildcard actions %v", config, got)
		}
		for id, r := range s.json["Resources"].(map[string]any) {
			rm := r.(map[string]any)
			typ, _ := rm["Type"].(string)
			if strings.HasPrefix(typ, "Custom::") || typ == "AWS::CloudFormation::CustomResource" {
				t.Errorf("%s: custom resource %s (%s)", config, id, typ)
			}
			if props, _ := rm["Properties"].(map[string]any); typ == "AWS::IAM::Role" && props["ManagedPolicyArns"] != nil {
				t.Errorf("%s: role %s has managed policies %s, want explicit statements", config, id, mustJSON(props["ManagedPolicyArns"]))
			}
		}
		// Our functions are the only ones: no CDK singleton Lambdas.
		want := 6 // the platform's (live events need none: events.go)
		if s.props.DemoAgents {
			want = 7
		}
		assertTemplate(t, config+" functions", func() {
			s.tpl.ResourceCountIs(jsii.String("AWS::Lambda::Function"), jsii.Number(float64(want)))
		})
	}
}

// Each function's role holds exactly these actions (bedrock configuration).
func TestFunctionRolesExactActions(t *testing.T) {
	t.Parallel()
	s := synth(t, "bedrock")
	base := []string{"elasticache:Connect", "logs:CreateLogStream", "logs:PutLogEvents", "xray:PutTelemetryRecords", "xray:PutTraceSegments",
		"ec2:AssignPrivateIpAddresses", "ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface",
		"ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets", "ec2:UnassignPrivateIpAddresses"}
	with := func(more ...string) []string {
		out := append(slices.Clone(base), more...)
		slices.Sort(out)
		return out
	}
	// The demo specialists' URL (IAM auth) for the functions that read
	// agent cards or call skills.
	demoURL := []string{"lambda:InvokeFunction", "lambda:InvokeFunctionUrl"}
	want := map[string][]string{
		// appsync:EventPublish: every writer of the event log publishes live events.
		FnAPI: with(append(demoURL, "appsync:EventPublish", "s3:DeleteObject", "s3:GetObject", "s3:ListBucket", "s3:PutObject",
			"states:DescribeExecution", "states:SendTaskSuccess",
			"states:StartExecution", "states:StopExecution")...),
		// sqs: a turn-ended event it failed to handle goes to the dead-letter queue.
		FnLLMStep: with(append(demoURL, "appsync:EventPublish", "bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream", "s3:PutObject",
			"sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:SendMessage")...),
		FnValidate:   with(append(demoURL, "appsync:EventPublish", "s3:PutObject")...),
		FnInvoke:     with(append(demoURL, "appsync:EventPublish", "s3:GetObject", "s3:ListBucket", "s3:PutObject")...),
		FnAppend:     with(append(demoURL, "appsync:EventPublish")...),
		FnAwait:      with("appsync:EventPublish"),
		FnDemoAgents: with(),
	}
	for name, w := range want {
		_, fn := s.function(t, name)
		var got []string
		for _, st := range s.roleStatements(t, fn, "Role") {
			if st["Effect"] == "Allow" {
				got = append(got, actionsOf(st)...)
			}
		}
		slices.Sort(got)
		got = slices.Compact(got)
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("%s role actions (-want +got):\n%s", name, diff)
		}
		// Its logs go to its own log group only.
		logsID, _ := s.named(t, "AWS::Logs::LogGroup", "Fn"+functionID(name)+"Logs")
		if got := actionsOn(s.roleStatements(t, fn, "Role"), logsID); !slices.Equal(got, []string{"logs:CreateLogStream", "logs:PutLogEvents"}) {
			t.Errorf("%s actions on its log group %s = %v, want CreateLogStream and PutLogEvents", name, logsID, got)
		}
	}
	// Every function's role is its own, assumed by Lambda only.
	assertTemplate(t, "roles", func() {
		s.tpl.AllResourcesProperties(jsii.String("AWS::IAM::Role"), map[string]any{
			"AssumeRolePolicyDocument": map[string]any{"Statement": []any{map[string]any{
				"Action": "sts:AssumeRole", "Effect": "Allow",
				"Principal": map[string]any{"Service": assertions.Match_AnyValue()},
			}}},
		})
	})
}

// docs/design.md §7: the function that answers task tokens (api) is not the one the
// pause invokes (await): await stores the token and cannot answer it.
func TestTaskTokenAnsweredOnlyByAPI(t *testing.T) {
	t.Parallel()
	for _, config := range []string{"bedrock", "prod"} {
		s := synth(t, config)
		for _, name := range functionNames() {
			_, fn := s.function(t, name)
			stmts := s.roleStatements(t, fn, "Role")
			for _, action := range []string{"states:SendTaskSuccess", "states:SendTaskFailure", "states:SendTaskHeartbeat"} {
				// Nothing sends a failure or a heartbeat (TaskTokenActions).
				want := name == FnAPI && action == "states:SendTaskSuccess"
				if got := len(allowed(stmts, action)) > 0; got != want {
					t.Errorf("%s: %s may %s: %v, want %v", config, name, action, got, want)
				}
			}
		}
		_, sm := s.turnMachine(t)
		awaitID, _ := s.function(t, FnAwait)
		if diff := cmp.Diff(map[string]any{"Fn::GetAtt": []any{awaitID, "Arn"}}, sm["DefinitionSubstitutions"].(map[string]any)["AwaitFunction"]); diff != "" {
			t.Errorf("%s: the pause's function (-want await +got):\n%s", config, diff)
		}
	}
}

// wildcardResourceExceptions are the actions a role may hold on Resource
// "*", each because AWS offers no narrower resource for it (the service
// authorization reference lists no resource type). Anything else on "*" is
// a grant wider than it needs to be.
var wildcardResourceExceptions = map[string]string{
	// Lambda's attachment to the VPC (AWSLambdaVPCAccessExecutionRole's actions).
	"ec2:CreateNetworkInterface":     "Lambda in a VPC",
	"ec2:DescribeNetworkInterfaces":  "Lambda in a VPC",
	"ec2:DescribeSubnets":            "Lambda in a VPC",
	"ec2:DeleteNetworkInterface":     "Lambda in a VPC",
	"ec2:AssignPrivateIpAddresses":   "Lambda in a VPC",
	"ec2:UnassignPrivateIpAddresses": "Lambda in a VPC",
	// X-Ray tracing of the functions and the state machine.
	"xray:PutTraceSegments":    "tracing",
	"xray:PutTelemetryRecords": "tracing",
	"xray:GetSamplingRules":    "tracing",
	"xray:GetSamplingTargets":  "tracing",
	// Step Functions' log delivery to CloudWatch Logs (the state machine's role).
	"logs:CreateLogDelivery":        "state machine logging",
	"logs:GetLogDelivery":           "state machine logging",
	"logs:UpdateLogDelivery":        "state machine logging",
	"logs:DeleteLogDelivery":        "state machine logging",
	"logs:ListLogDeliveries":        "state machine logging",
	"logs:PutResourcePolicy":        "state machine logging",
	"logs:DescribeResourcePolicies": "state machine logging",
	"logs:DescribeLogGroups":        "state machine logging",
	// Issue 14: a task token is not a resource; api answers the pauses.
	"states:SendTaskSuccess": "task tokens (api only: TestTaskTokenAnsweredOnlyByAPI)",
}

// wildcardResourceActions lists "<policy>: <action>" for every action an
// Allow statement of an IAM policy grants on Resource "*" (alone or among
// others), sorted.
func wildcardResourceActions(tpl map[string]any) []string {
	var out []string
	for id, r := range asMap(tpl["Resources"]) {
		rm := asMap(r)
		if rm["Type"] != "AWS::IAM::Policy" {
			continue
		}
		doc := asMap(asMap(rm["Properties"])["PolicyDocument"])
		for _, st := range asList(doc["Statement"]) {
			sm := asMap(st)
			if sm["Effect"] != "Allow" || !slices.Contains(asList(sm["Resource"]), any("*")) {
				continue
			}
			for _, a := range actionsOf(sm) {
				out = append(out, id+": "+a)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Least privilege for resources too: "*" only for the actions AWS offers
// no narrower resource for, each named above with its reason.
func TestWildcardResourcesOnlyWhereRequired(t *testing.T) {
	t.Parallel()
	for _, config := range slices.Sorted(maps.Keys(configs)) {
		s := synth(t, config)
		for _, entry := range wildcardResourceActions(s.json) {
			_, action, _ := strings.Cut(entry, ": ")
			if _, ok := wildcardResourceExceptions[action]; !ok {
				t.Errorf("%s: %s on Resource \"*\", want a resource (or a named exception with its reason)", config, entry)
			}
		}
	}
	// The check sees what it must.
	var tpl map[string]any
	if err := json.Unmarshal([]byte(`{"Resources":{"P":{"Type":"AWS::IAM::Policy","Properties":{"PolicyDocument":{"Statement":[
		{"Effect":"Allow","Action":["s3:GetObject","ec2:DescribeSubnets"],"Resource":["arn:x","*"]},
		{"Effect":"Allow","Action":"s3:PutObject","Resource":"arn:y"},
		{"Effect":"Deny","Action":"s3:DeleteObject","Resource":"*"}]}}}}}`), &tpl); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"P: ec2:DescribeSubnets", "P: s3:GetObject"}, wildcardResourceActions(tpl)); diff != "" {
		t.Errorf("wildcardResourceActions() (-want +got):\n%s", diff)
	}
}

// The task-token actions api may call are the ones the repository's code
// calls (the Step Functions client's SendTask… methods), no more.
func TestTaskTokenActionsAreWhatAPICalls(t *testing.T) {
	t.Parallel()
	called := map[string]bool{}
	call := regexp.MustCompile(`\.(SendTask(?:Success|Failure|Heartbeat))\(`)
	err := filepath.WalkDir(filepath.Join("..", "pkg"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
			strings.Contains(path, "sfnlocal") { // the local engine serves these calls; it makes none
			return err
		}
		b, err := os.ReadFile(path)
		for _, m := range call.FindAllStringSubmatch(string(b), -1) {
			called["states:"+m[1]] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(slices.Sorted(maps.Keys(called)), slices.Sorted(slices.Values(TaskTokenActions))); diff != "" {
		t.Errorf("task-token actions called (-) and granted (+):\n%s", diff)
	}
}
