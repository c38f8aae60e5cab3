package main

import (
	"regexp"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsappsync"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
)

// Live events on AWS (docs/deploy.md, "Live events on AWS"): an AppSync
// Events API. The steps and the api function append each event to the
// conversation's log in Valkey and publish it (pkg/livepub, HTTPS signed
// with their role) to the channel /live/<sub>/<conversation>; the page and
// the CLI subscribe over the API's WebSocket with the same JWT as the HTTP
// API's. No Lambda holds an open page: AppSync keeps the connections.
// (A Lambda Function URL cannot stream from a function in a VPC, and held
// one 256 MB function per open page for up to 5 minutes.)

// LiveNamespace is the channel namespace of live events.
const LiveNamespace = "live"

// LivePublishers are the functions that publish live events: every one
// that writes the event log.
var LivePublishers = []string{FnAPI, FnLLMStep, FnValidate, FnInvoke, FnAppend, FnAwait}

// LiveSubscribeHandler is the namespace's onSubscribe handler (APPSYNC_JS):
// a channel is /live/<sub>/<conversation>, and only the owner of the sub
// segment may subscribe to it (or to /live/<sub>/*). The publisher writes
// the owner's sub there (livepub.Channel), so no lookup is needed.
// Publishing from a client is refused outright: only the roles publish,
// over IAM.
const LiveSubscribeHandler = `import { util } from '@aws-appsync/utils';

export function onSubscribe(ctx) {
  const segments = ctx.info.channel.segments;
  const sub = ctx.identity && ctx.identity.sub;
  if (!sub || segments.length < 2 || segments[1] !== sub) {
    util.unauthorized();
  }
}

export function onPublish(ctx) {
  return ctx.events;
}
`

// quoted is each of ss as a regular expression matching it literally.
func quoted(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = regexp.QuoteMeta(s)
	}
	return out
}

// liveEvents is the Event API of live events.
type liveEvents struct {
	api       awsappsync.CfnApi
	namespace awsappsync.CfnChannelNamespace
}

// addLiveEvents creates the Event API (connect and subscribe with the HTTP
// API's JWT: the Cognito user pool when the stack has one, else the
// issuer's OIDC; publish with IAM only), its namespace and handler, grants
// the publishers appsync:EventPublish on that namespace alone, and tells
// them (and the api function, which answers GET /v1/info) where it is.
// The publishers reach its public HTTPS endpoint through the VPC's NAT
// gateway, as they reach the model and the specialists.
func addLiveEvents(stack awscdk.Stack, p StackProps, d *dataStack, fns map[string]awslambda.Function, issuer *string) liveEvents {
	prefix := "clientagent-" + p.EnvName
	userAuth := "OPENID_CONNECT"
	provider := &awsappsync.CfnApi_AuthProviderProperty{AuthType: jsii.String(userAuth)}
	if d.pool != nil {
		userAuth = "AMAZON_COGNITO_USER_POOLS"
		provider = &awsappsync.CfnApi_AuthProviderProperty{AuthType: jsii.String(userAuth),
			CognitoConfig: &awsappsync.CfnApi_CognitoConfigProperty{UserPoolId: d.pool.UserPoolId(), AwsRegion: awscdk.Aws_REGION(),
				AppIdClientRegex: awscdk.Fn_Join(jsii.String(""), &[]*string{jsii.String("^"), d.client.UserPoolClientId(), jsii.String("$")})}}
	} else {
		provider.OpenIdConnectConfig = &awsappsync.CfnApi_OpenIDConnectConfigProperty{Issuer: issuer,
			// AppSync matches the token's aud (client id) against this regex.
			ClientId: jsii.String("^(" + strings.Join(quoted(p.JWTAudience), "|") + ")$")}
	}
	mode := func(t string) *awsappsync.CfnApi_AuthModeProperty {
		return &awsappsync.CfnApi_AuthModeProperty{AuthType: jsii.String(t)}
	}
	api := awsappsync.NewCfnApi(stack, jsii.String("LiveEvents"), &awsappsync.CfnApiProps{
		Name: jsii.String(prefix + "-live"),
		EventConfig: &awsappsync.CfnApi_EventConfigProperty{
			AuthProviders:             &[]any{provider, &awsappsync.CfnApi_AuthProviderProperty{AuthType: jsii.String("AWS_IAM")}},
			ConnectionAuthModes:       &[]any{mode(userAuth)},
			DefaultPublishAuthModes:   &[]any{mode("AWS_IAM")},
			DefaultSubscribeAuthModes: &[]any{mode(userAuth)},
		},
	})
	nsMode := func(t string) *awsappsync.CfnChannelNamespace_AuthModeProperty {
		return &awsappsync.CfnChannelNamespace_AuthModeProperty{AuthType: jsii.String(t)}
	}
	ns := awsappsync.NewCfnChannelNamespace(stack, jsii.String("LiveNamespace"), &awsappsync.CfnChannelNamespaceProps{
		ApiId:              api.AttrApiId(),
		Name:               jsii.String(LiveNamespace),
		PublishAuthModes:   &[]any{nsMode("AWS_IAM")},
		SubscribeAuthModes: &[]any{nsMode(userAuth)},
		CodeHandlers:       jsii.String(LiveSubscribeHandler),
	})
	for _, name := range LivePublishers {
		fn := fns[name]
		allow(fn, "LiveEventsPublish", []string{"appsync:EventPublish"}, ns.AttrChannelNamespaceArn())
		fn.AddEnvironment(jsii.String("CLIENTAGENT_LIVE_HTTP_DOMAIN"), api.AttrDnsHttp(), nil)
		fn.AddEnvironment(jsii.String("CLIENTAGENT_LIVE_REALTIME_DOMAIN"), api.AttrDnsRealtime(), nil)
		fn.AddEnvironment(jsii.String("CLIENTAGENT_LIVE_NAMESPACE"), jsii.String(LiveNamespace), nil)
	}
	awscdk.NewCfnOutput(stack, jsii.String("LiveEventsRealtimeDomain"), &awscdk.CfnOutputProps{
		Value:       api.AttrDnsRealtime(),
		Description: jsii.String("the AppSync Events WebSocket domain of live events (clients learn it from GET /v1/info)"),
	})
	return liveEvents{api: api, namespace: ns}
}
