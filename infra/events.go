package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
)

// FnEvents serves GET /v1/conversations/{cid}/events (Server-Sent Events)
// behind a Function URL of its own: the HTTP API cannot stream a response,
// a Function URL with InvokeMode RESPONSE_STREAM can (docs/deploy.md, "Live
// events on AWS").
const FnEvents = "events"

// eventsFunction is sized for holding a stream open: little memory, and
// Lambda's longest timeout (15 minutes), so that the stream's own bound
// (pkg/api: 5 minutes), not the function's, ends it and the page reconnects with
// Last-Event-ID. A stream that outlives the client is billed to its end,
// so the bound is what a forgotten tab costs.
var eventsFunction = functionSpec{FnEvents, 256, 900, "live events of a conversation (SSE) on a streaming Function URL"}

// EventsAllowHeaders are the request headers the web page sends to the
// events URL: the bearer token and the id of the last event it saw.
// EventsExposeHeaders are the response headers it may read beside the
// safelisted ones, as of the HTTP API: a 503's Retry-After, a 401's
// WWW-Authenticate.
var (
	EventsAllowHeaders  = []string{"authorization", "last-event-id"}
	EventsExposeHeaders = []string{"retry-after", "www-authenticate"}
)

// addEventsURL gives the events function the issuer and audiences of the
// HTTP API's JWT authorizer, which it checks itself (auth.JWKS: no
// authorizer stands in front of a Function URL, so its AuthType is NONE),
// and its streaming Function URL: GET from the web page's origins, with the
// Authorization and Last-Event-ID headers. The URL is the EventsUrl output,
// without the trailing slash Lambda gives it, as the page's eventsBase.
func addEventsURL(stack awscdk.Stack, p StackProps, fn awslambda.Function, issuer *string, audience *[]*string) awslambda.FunctionUrl {
	fn.AddEnvironment(jsii.String("CLIENTAGENT_JWT_ISSUER"), issuer, nil)
	fn.AddEnvironment(jsii.String("CLIENTAGENT_JWT_AUDIENCE"), awscdk.Fn_Join(jsii.String(","), audience), nil)
	var cors *awslambda.FunctionUrlCorsOptions
	if len(p.WebOrigins) > 0 {
		// Lambda answers the preflights and adds the CORS headers itself.
		cors = &awslambda.FunctionUrlCorsOptions{
			AllowedOrigins: jsii.Strings(p.WebOrigins...),
			AllowedMethods: &[]awslambda.HttpMethod{awslambda.HttpMethod_GET},
			AllowedHeaders: jsii.Strings(EventsAllowHeaders...),
			ExposedHeaders: jsii.Strings(EventsExposeHeaders...),
			MaxAge:         awscdk.Duration_Hours(jsii.Number(1)),
		}
	}
	url := fn.AddFunctionUrl(&awslambda.FunctionUrlOptions{
		AuthType:   awslambda.FunctionUrlAuthType_NONE,
		InvokeMode: awslambda.InvokeMode_RESPONSE_STREAM,
		Cors:       cors,
	})
	// https://<id>.lambda-url.<region>.on.aws/ → https://<id>.lambda-url.<region>.on.aws
	host := awscdk.Fn_Select(jsii.Number(2), awscdk.Fn_Split(jsii.String("/"), url.Url(), nil))
	awscdk.NewCfnOutput(stack, jsii.String("EventsUrl"), &awscdk.CfnOutputProps{
		Value:       awscdk.Fn_Join(jsii.String(""), &[]*string{jsii.String("https://"), host}),
		Description: jsii.String("base URL of GET /v1/conversations/{cid}/events (streamed; the web page's config.eventsBase)"),
	})
	return url
}
