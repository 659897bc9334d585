// Package idemlambdaurl serves a Guard's net/http handler behind a Lambda
// function URL in response streaming mode (InvokeMode RESPONSE_STREAM), as
// aws-lambda-go's lambdaurl package does, telling the Guard that each
// request's answer is streamed.
//
// A Lambda function returns a buffered answer as one invocation payload of
// at most 6 MB (about 4.5 MB of binary body, base64-encoded), so inside a
// Lambda invocation the net/http adapters (Guard.Middleware, Guard.Handle,
// Guard.Routed and the router adapters) record an answer whose payload
// would pass that bound as not kept: its caller gets the answer (or the
// 502 of the failed invocation) and every retry of its key `410
// idemkit.response_not_kept`. A function URL in response streaming mode
// streams the body instead, so such an answer reaches its caller whole.
// Served through Wrap or Start, the Guard knows the answer is streamed and
// bounds it by idem.MaxResponseBytes (6 MB) alone: an answer up to that
// size is kept and replayed byte for byte to the key's retries. Served
// through lambdaurl.Wrap or lambdaurl.Start directly, the Guard cannot tell
// and keeps the buffered bound (never a wrong replay, only a 410 where a
// replay was possible).
//
// Package idem does not import this package or lambdaurl, which links
// aws-lambda-go's lambda package (and net/rpc, html/template) into a
// program: only a program that imports this package links them.
//
// Use Wrap or Start only for a function URL in response streaming mode
// (lambdaurl's own requirement): a buffered function URL or an API Gateway
// integration returns the answer as one payload, bounded as above, and is
// served through aws-lambda-go-api-proxy or the API Gateway adapters.
package idemlambdaurl

import (
	"context"
	"net/http"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdaurl"

	"github.com/idemkit/idemkit/idem/internal/streamed"
)

// Wrap is lambdaurl.Wrap for handler, typically a Guard's net/http
// handler (guard.Middleware(mux)) or a router wrapped by an idem router
// adapter: each request handler serves is marked as streamed, so the
// Guard keeps answers up to idem.MaxResponseBytes (see the package doc).
// The mark is carried by the request's context, so middleware between
// Wrap and the Guard keeps it as long as it derives the request's context
// from the one it was given.
//
// It panics when handler is nil: a wiring mistake.
func Wrap(handler http.Handler) func(context.Context, *events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
	if handler == nil {
		panic("idemlambdaurl: Wrap needs a handler to serve")
	}
	return lambdaurl.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handler.ServeHTTP(w, r.WithContext(streamed.With(r.Context())))
	}))
}

// Start is lambdaurl.Start with Wrap: it serves handler as the function's
// handler, with options (lambdaurl.WithDetectContentType among them).
func Start(handler http.Handler, options ...lambda.Option) {
	lambda.StartHandlerFunc(Wrap(handler), options...)
}
