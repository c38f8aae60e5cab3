package main

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Issue 15: the events stream on AWS. The events function answers on a
// Function URL of its own that streams (RESPONSE_STREAM); no authorizer
// stands in front of a URL, so its AuthType is NONE and the function checks
// the HTTP API authorizer's JWT itself, with that authorizer's issuer and
// audiences. Browsers on webOrigins may GET it with the Authorization and
// Last-Event-ID headers. It runs beside the api function: same VPC
// placement, security group and Valkey.
func TestEventsFunctionURL(t *testing.T) {
	t.Parallel()
	for _, config := range slices.Sorted(maps.Keys(configs)) {
		s := synth(t, config)
		fnID, fn := s.function(t, FnEvents)
		if fn["Timeout"] != float64(900) || fn["MemorySize"] != float64(256) {
			t.Errorf("%s: events timeout %v s, memory %v MB; want 900 (Lambda's longest: the stream's own bound ends it) and 256",
				config, fn["Timeout"], fn["MemorySize"])
		}

		// Its URL: streaming, no IAM auth; the only public URL of the stack.
		var urls []map[string]any
		for id, u := range s.resources("AWS::Lambda::Url") {
			if slices.Contains(refsIn(u["TargetFunctionArn"]), fnID) {
				urls = append(urls, u)
			} else if u["AuthType"] == "NONE" {
				t.Errorf("%s: URL %s has AuthType NONE, want only the events URL public", config, id)
			}
		}
		if len(urls) != 1 {
			t.Fatalf("%s: %d Function URLs of events, want 1", config, len(urls))
		}
		url := urls[0]
		if url["InvokeMode"] != "RESPONSE_STREAM" || url["AuthType"] != "NONE" {
			t.Errorf("%s: events URL InvokeMode %v, AuthType %v; want RESPONSE_STREAM, NONE", config, url["InvokeMode"], url["AuthType"])
		}
		var wantCORS any
		if len(s.props.WebOrigins) > 0 {
			wantCORS = map[string]any{
				"AllowOrigins": toAny(s.props.WebOrigins), "AllowMethods": []any{"GET"},
				"AllowHeaders": []any{"authorization", "last-event-id"}, "ExposeHeaders": []any{"retry-after", "www-authenticate"},
				"MaxAge": float64(3600),
			}
		}
		if diff := cmp.Diff(wantCORS, url["Cors"]); diff != "" {
			t.Errorf("%s: events URL CORS (-want +got):\n%s", config, diff)
		}

		// Who may invoke it: anyone, through the URL only (the function
		// checks the token). Nothing else reaches it: no API route, no rule.
		var perms []string
		for _, p := range s.resources("AWS::Lambda::Permission") {
			if slices.Contains(refsIn(p["FunctionName"]), fnID) {
				perms = append(perms, mustJSON(map[string]any{"Action": p["Action"], "Principal": p["Principal"],
					"FunctionUrlAuthType": p["FunctionUrlAuthType"], "InvokedViaFunctionUrl": p["InvokedViaFunctionUrl"],
					"SourceArn": p["SourceArn"]}))
			}
		}
		slices.Sort(perms)
		wantPerms := []string{
			mustJSON(map[string]any{"Action": "lambda:InvokeFunction", "Principal": "*", "FunctionUrlAuthType": nil, "InvokedViaFunctionUrl": true, "SourceArn": nil}),
			mustJSON(map[string]any{"Action": "lambda:InvokeFunctionUrl", "Principal": "*", "FunctionUrlAuthType": "NONE", "InvokedViaFunctionUrl": nil, "SourceArn": nil}),
		}
		if diff := cmp.Diff(wantPerms, perms); diff != "" {
			t.Errorf("%s: events resource policy (-want +got):\n%s", config, diff)
		}

		// The JWT it checks is the HTTP API authorizer's.
		_, authorizer := s.one(t, "AWS::ApiGatewayV2::Authorizer")
		jwtConf := asMap(authorizer["JwtConfiguration"])
		env := envOf(fn)
		if got, want := mustJSON(env["CLIENTAGENT_JWT_ISSUER"]), mustJSON(jwtConf["Issuer"]); got != want {
			t.Errorf("%s: events CLIENTAGENT_JWT_ISSUER = %s, want the authorizer's issuer %s", config, got, want)
		}
		if got, want := mustJSON(env["CLIENTAGENT_JWT_AUDIENCE"]), mustJSON(joinedAudience(jwtConf["Audience"])); got != want {
			t.Errorf("%s: events CLIENTAGENT_JWT_AUDIENCE = %s, want the authorizer's audiences %s", config, got, want)
		}

		// Beside api: the same Valkey and subnets, a security group of its own.
		_, api := s.function(t, FnAPI)
		if got, want := mustJSON(env["VALKEY_URL"]), mustJSON(envOf(api)["VALKEY_URL"]); got != want {
			t.Errorf("%s: events VALKEY_URL = %s, want api's %s", config, got, want)
		}
		vpc, apiVPC := asMap(fn["VpcConfig"]), asMap(api["VpcConfig"])
		if got, want := mustJSON(vpc["SubnetIds"]), mustJSON(apiVPC["SubnetIds"]); got != want || vpc == nil {
			t.Errorf("%s: events subnets = %s, want api's %s", config, got, want)
		}
		if got, apis := mustJSON(vpc["SecurityGroupIds"]), mustJSON(apiVPC["SecurityGroupIds"]); got == apis {
			t.Errorf("%s: events security groups = %s, api's: want one of its own", config, got)
		}

		// The output the web page's config.eventsBase takes: the URL's host
		// after https://, no trailing slash.
		out := asMap(asMap(s.json["Outputs"])["EventsUrl"])
		if v := mustJSON(out["Value"]); !strings.Contains(v, `"https://"`) || !strings.Contains(v, "Fn::Select") ||
			!slices.Contains(refsIn(out["Value"]), urlID(s, fnID)) {
			t.Errorf("%s: EventsUrl output = %s, want https:// and the events URL's host", config, v)
		}
	}
}

// The events function reads Valkey (through its own security group, as its
// own read-only ElastiCache user: elasticache:Connect) and holds no other
// privilege: no Step Functions, no S3, no other function.
func TestEventsRoleLeastPrivilege(t *testing.T) {
	t.Parallel()
	s := synth(t, "bedrock")
	_, fn := s.function(t, FnEvents)
	stmts := s.roleStatements(t, fn, "Role")
	var got []string
	for _, st := range stmts {
		if st["Effect"] == "Allow" {
			got = append(got, actionsOf(st)...)
		}
	}
	slices.Sort(got)
	want := []string{"ec2:AssignPrivateIpAddresses", "ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface",
		"ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets", "ec2:UnassignPrivateIpAddresses", "elasticache:Connect",
		"logs:CreateLogStream", "logs:PutLogEvents", "xray:PutTelemetryRecords", "xray:PutTraceSegments"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events role actions (-want +got):\n%s", diff)
	}
	logsID, _ := s.named(t, "AWS::Logs::LogGroup", "FnEventsLogs")
	if got := actionsOn(stmts, logsID); !slices.Equal(got, []string{"logs:CreateLogStream", "logs:PutLogEvents"}) {
		t.Errorf("events actions on its log group %s = %v, want CreateLogStream and PutLogEvents", logsID, got)
	}
	for _, key := range slices.Sorted(maps.Keys(envOf(fn))) {
		if key == "STATE_MACHINE_ARN" || key == "CLIENTAGENT_AGENT_AUTH" || key == "OPENAI_API_KEY_SECRET_ARN" {
			t.Errorf("events has %s, which its role does not use", key)
		}
	}
}

// joinedAudience is the authorizer's audience list as one comma-separated
// value, the way CloudFormation sees Fn::Join of it: literals joined at
// synthesis, a single token as itself.
func joinedAudience(aud any) any {
	l := asList(aud)
	var strs []string
	for _, a := range l {
		s, ok := a.(string)
		if !ok {
			if len(l) == 1 {
				return a
			}
			return map[string]any{"Fn::Join": []any{",", l}}
		}
		strs = append(strs, s)
	}
	return strings.Join(strs, ",")
}

// urlID is the logical id of the Function URL of the function fnID.
func urlID(s *synthesized, fnID string) string {
	for id, u := range s.resources("AWS::Lambda::Url") {
		if slices.Contains(refsIn(u["TargetFunctionArn"]), fnID) {
			return id
		}
	}
	return ""
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
