package main

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Issue 27, point 1: live events on AWS go through an AppSync Events API,
// not a streaming Function URL (which cannot stream from a function in a
// VPC, and held a Lambda per open page). Clients connect and subscribe
// with the HTTP API's JWT (the Cognito pool, or the issuer's OIDC with the
// authorizer's audiences); only IAM publishes, and only the functions that
// write the event log may, on the live namespace alone; the namespace's
// onSubscribe handler refuses a channel whose user segment is not the
// caller's sub. No Function URL is public and no function streams.
func TestLiveEventsAppSync(t *testing.T) {
	t.Parallel()
	for _, config := range slices.Sorted(maps.Keys(configs)) {
		s := synth(t, config)
		apiID, api := s.one(t, "AWS::AppSync::Api")
		ec := asMap(api["EventConfig"])
		userAuth := "OPENID_CONNECT"
		if len(s.resources("AWS::Cognito::UserPool")) > 0 {
			userAuth = "AMAZON_COGNITO_USER_POOLS"
		}
		modes := func(v any) string { return mustJSON(v) }
		if got, want := modes(ec["ConnectionAuthModes"]), `[{"AuthType":"`+userAuth+`"}]`; got != want {
			t.Errorf("%s: ConnectionAuthModes = %s, want %s", config, got, want)
		}
		if got, want := modes(ec["DefaultSubscribeAuthModes"]), `[{"AuthType":"`+userAuth+`"}]`; got != want {
			t.Errorf("%s: DefaultSubscribeAuthModes = %s, want %s", config, got, want)
		}
		if got := modes(ec["DefaultPublishAuthModes"]); got != `[{"AuthType":"AWS_IAM"}]` {
			t.Errorf("%s: DefaultPublishAuthModes = %s, want AWS_IAM only", config, got)
		}
		// The user auth is the HTTP API authorizer's issuer and audience.
		_, authorizer := s.one(t, "AWS::ApiGatewayV2::Authorizer")
		jwt := asMap(authorizer["JwtConfiguration"])
		var provider map[string]any
		for _, p := range asList(ec["AuthProviders"]) {
			if asMap(p)["AuthType"] == userAuth {
				provider = asMap(p)
			}
		}
		switch {
		case provider == nil:
			t.Errorf("%s: no %s auth provider", config, userAuth)
		case userAuth == "OPENID_CONNECT":
			oidc := asMap(provider["OpenIDConnectConfig"])
			if got, want := mustJSON(oidc["Issuer"]), mustJSON(jwt["Issuer"]); got != want {
				t.Errorf("%s: OIDC issuer %s, want the authorizer's %s", config, got, want)
			}
			for _, a := range asList(jwt["Audience"]) {
				if id, _ := oidc["ClientId"].(string); !regexp.MustCompile(id).MatchString(a.(string)) || regexp.MustCompile(id).MatchString(a.(string)+"x") {
					t.Errorf("%s: OIDC ClientId %s lacks the authorizer's audience %s", config, mustJSON(oidc["ClientId"]), mustJSON(a))
				}
			}
		default:
			cog := asMap(provider["CognitoConfig"])
			poolID, _ := s.one(t, "AWS::Cognito::UserPool")
			clientID, _ := s.one(t, "AWS::Cognito::UserPoolClient")
			if !slices.Contains(refsIn(cog["UserPoolId"]), poolID) || !slices.Contains(refsIn(cog["AppIdClientRegex"]), clientID) {
				t.Errorf("%s: Cognito config %s, want the stack's pool and app client", config, mustJSON(cog))
			}
		}

		nsID, ns := s.one(t, "AWS::AppSync::ChannelNamespace")
		if ns["Name"] != LiveNamespace || !slices.Contains(refsIn(ns["ApiId"]), apiID) {
			t.Errorf("%s: namespace %v of %v, want %q of the Event API", config, ns["Name"], mustJSON(ns["ApiId"]), LiveNamespace)
		}
		if got := mustJSON(ns["PublishAuthModes"]); got != `[{"AuthType":"AWS_IAM"}]` {
			t.Errorf("%s: namespace PublishAuthModes = %s, want AWS_IAM only", config, got)
		}
		code, _ := ns["CodeHandlers"].(string)
		for _, want := range []string{"export function onSubscribe", "segments[1] !== sub", "util.unauthorized()"} {
			if !strings.Contains(code, want) {
				t.Errorf("%s: namespace handler lacks %q:\n%s", config, want, code)
			}
		}

		// Who publishes: the event log's writers, on the namespace alone.
		names := []string{FnAPI, FnLLMStep, FnValidate, FnInvoke, FnAppend, FnAwait}
		if s.props.DemoAgents {
			names = append(names, FnDemoAgents)
		}
		for _, name := range names {
			_, fn := s.function(t, name)
			var on []string
			for _, st := range s.roleStatements(t, fn, "Role") {
				for _, a := range actionsOf(st) {
					if strings.HasPrefix(a, "appsync:") {
						if a != "appsync:EventPublish" {
							t.Errorf("%s: %s may %s, want appsync:EventPublish only", config, name, a)
						}
						on = append(on, refsIn(st["Resource"])...)
					}
				}
			}
			publishes := slices.Contains(LivePublishers, name)
			if publishes != (len(on) > 0) || publishes && !slices.Equal(slices.Compact(on), []string{nsID}) {
				t.Errorf("%s: %s publishes on %v, want %v", config, name, on, map[bool]string{true: "the live namespace only", false: "nothing"}[publishes])
			}
			env := envOf(fn)
			if publishes && (!slices.Contains(refsIn(env["CLIENTAGENT_LIVE_HTTP_DOMAIN"]), apiID) || env["CLIENTAGENT_LIVE_NAMESPACE"] != LiveNamespace ||
				!slices.Contains(refsIn(env["CLIENTAGENT_LIVE_REALTIME_DOMAIN"]), apiID)) {
				t.Errorf("%s: %s live environment %s", config, name, mustJSON(map[string]any{"http": env["CLIENTAGENT_LIVE_HTTP_DOMAIN"], "rt": env["CLIENTAGENT_LIVE_REALTIME_DOMAIN"], "ns": env["CLIENTAGENT_LIVE_NAMESPACE"]}))
			}
		}

		// No streaming function is left: no public URL, no RESPONSE_STREAM.
		for id, u := range s.resources("AWS::Lambda::Url") {
			if u["AuthType"] == "NONE" || u["InvokeMode"] == "RESPONSE_STREAM" {
				t.Errorf("%s: Function URL %s (AuthType %v, InvokeMode %v), want none public or streaming", config, id, u["AuthType"], u["InvokeMode"])
			}
		}
		if _, ok := asMap(s.json["Outputs"])["EventsUrl"]; ok {
			t.Errorf("%s: the EventsUrl output is still there", config)
		}
	}
}
