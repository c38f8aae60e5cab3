package platform

import (
	"context"
	"net/http"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdaurl"
)

// StreamingURL is the Lambda handler that serves h behind a Function URL in
// RESPONSE_STREAM mode (aws-lambda-go's lambdaurl): the client gets what h
// writes as h writes it. h's ResponseWriter is an http.Flusher whose Flush
// has nothing to do — lambdaurl hands each Write straight to the Runtime
// API's chunked response — because a handler that must stream (the API's
// event stream) asks for a Flusher first and refuses to stream without one.
func StreamingURL(h http.Handler) func(context.Context, *events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
	return lambdaurl.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(unbuffered{w}, r)
	}))
}

// unbuffered is lambdaurl's ResponseWriter, which has no buffer to flush.
type unbuffered struct{ http.ResponseWriter }

func (unbuffered) Flush() {}

// Unwrap lets http.ResponseController reach lambdaurl's writer.
func (u unbuffered) Unwrap() http.ResponseWriter { return u.ResponseWriter }
