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
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdaurl"

	"github.com/idemkit/idemkit/idem/internal/streamed"
	"github.com/idemkit/idemkit/internal/apierr"
)

// Wrap is lambdaurl.Wrap for handler, typically a Guard's net/http
// handler (guard.Middleware(mux)) or a router wrapped by an idem router
// adapter: each request handler serves is marked as streamed, so the
// Guard keeps answers up to idem.MaxResponseBytes (see the package doc).
// The mark is carried by the request's context, so middleware between
// Wrap and the Guard keeps it as long as it derives the request's context
// from the one it was given. The event's cookies (a function URL sends
// them in its cookies list, not among its headers) reach the handler as
// the request's Cookie header, so a route that declares Cookie among its
// fingerprint headers (idem.Route.Headers) fingerprints them. An event
// that cannot be read as an HTTP request (a path with an invalid
// percent-escape or a control byte) is answered 400 validation_error in
// the error envelope without running handler, rather than failing the
// invocation (which the function URL answers 502). A handler that panics
// before its answer begins (a guarded handler that aborts its response
// with http.ErrAbortHandler, its record released) fails the invocation,
// which the function URL answers 502, rather than end the process after
// an empty 200.
//
// It panics when handler is nil: a wiring mistake.
func Wrap(handler http.Handler) func(context.Context, *events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
	if handler == nil {
		panic("idemlambdaurl: Wrap needs a handler to serve")
	}
	serve := lambdaurl.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &sentWriter{ResponseWriter: w}
		if p, ok := r.Context().Value(panicKey{}).(*panicked); ok {
			defer p.recover(sw)
		}
		r = r.WithContext(streamed.With(r.Context()))
		if r.RequestURI == "" {
			// The request target as the function URL received it, as
			// net/http's server sets it (lambdaurl does not): a handler
			// before the Guard that rewrites the path (http.StripPrefix
			// mounting one of several applications) leaves it, so the
			// Guard puts the path sent in the fingerprint and two
			// applications never share an answer (RED_TEAM 533, 565).
			r.RequestURI = r.URL.RequestURI()
		}
		handler.ServeHTTP(sw, r)
	}))
	return func(ctx context.Context, req *events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
		if bad := unreadable(req); bad != nil {
			return bad, nil
		}
		p := &panicked{}
		out, err := serve(context.WithValue(ctx, panicKey{}, p), withCookieHeader(req))
		if err == nil && p.err != nil {
			// The handler panicked before a byte of its answer was
			// handed to lambdaurl, whose deferred write has made it an
			// empty 200: the invocation fails instead (the function URL
			// answers 502). Its body is closed, since no one will read
			// it: lambdaurl's goroutine waits for that to finish its
			// empty write, and stayed for the life of the process, one
			// per failed invocation (RED_TEAM 554).
			if c, ok := out.Body.(io.Closer); ok {
				_ = c.Close()
			}
			return nil, p.err
		}
		return out, err
	}
}

// panicKey is the context key of an invocation's panicked.
type panicKey struct{}

// panicked is the panic of an invocation's handler that ended it before
// its answer began (RED_TEAM 525). A guarded handler that aborts its
// response (http.ErrAbortHandler, as httputil.ReverseProxy does when its
// upstream's body breaks off) has its record released and the abort
// passed on by the Guard, as net/http aborts it; lambdaurl serves the
// handler on a goroutine of its own that recovers nothing, after a
// deferred write that hands the runtime an empty 200, so such a panic
// ended the process after answering the request's caller as if it had
// succeeded. A panic before the answer began fails the invocation (the
// function URL answers 502, as an API Gateway integration answers an
// invocation whose handler panicked); one after it began still ends the
// process, which cuts the streamed answer short, as net/http cuts the
// connection.
type panicked struct{ err error }

// recover, deferred around the handler, keeps the handler's panic as the
// invocation's error when nothing was sent on sw, and goes on panicking
// otherwise. The error is read once the runtime has been handed
// lambdaurl's empty answer, which happens after this returns.
func (p *panicked) recover(sw *sentWriter) {
	v := recover()
	if v == nil {
		return
	}
	if sw.sent {
		panic(v)
	}
	if v == http.ErrAbortHandler {
		p.err = errors.New("idemlambdaurl: the handler aborted its response (http.ErrAbortHandler)")
		return
	}
	p.err = fmt.Errorf("idemlambdaurl: the handler panicked: %v\n%s", v, debug.Stack())
}

// sentWriter notes whether the handler has begun its answer on the
// function URL's response writer.
type sentWriter struct {
	http.ResponseWriter
	sent bool
}

func (w *sentWriter) WriteHeader(code int) {
	w.sent = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *sentWriter) Write(b []byte) (int, error) {
	w.sent = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach lambdaurl's writer.
func (w *sentWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// unreadable answers 400 validation_error, in the error envelope, an event
// lambdaurl cannot turn into an http.Request: a raw path with an invalid
// percent-escape (a client's GET /%zz) or a control character, a method
// that is no HTTP token, or no event at all. lambdaurl returns an error
// for the first two (and dereferences the nil event), which fails the
// invocation, and the function URL answers its caller 502 for what was
// the client's mistake (RED_TEAM 507). It builds the URL as lambdaurl
// does; nil is returned for every event lambdaurl can serve.
func unreadable(req *events.LambdaFunctionURLRequest) *events.LambdaFunctionURLStreamingResponse {
	msg := "The request is not a function URL event."
	if req != nil {
		u := "https://" + req.RequestContext.DomainName + req.RawPath
		if req.RawQueryString != "" {
			u += "?" + req.RawQueryString
		}
		if _, err := http.NewRequest(req.RequestContext.HTTP.Method, u, http.NoBody); err == nil {
			return nil
		}
		msg = "The request's method or path cannot be read as an HTTP request."
	}
	e := apierr.New(http.StatusBadRequest, apierr.CodeValidation, "%s", msg)
	return &events.LambdaFunctionURLStreamingResponse{StatusCode: e.Status, Headers: e.Headers(), Body: bytes.NewReader(e.Body())}
}

// withCookieHeader returns req with its cookies as the Cookie header: a
// function URL puts the request's cookies in the event's cookies list,
// not among its headers, and lambdaurl reads the headers alone, so the
// handler would see no cookie and a route declaring Cookie among its
// fingerprint headers (idem.Route.Headers) would fingerprint none
// (RED_TEAM 449). The cookies are joined as a client sends them ("; "),
// as the API Gateway adapters read an HTTP API event's. req itself is not
// changed (a copy with its own header map); an event that already carries
// a Cookie header, or no cookies, is passed as it is.
func withCookieHeader(req *events.LambdaFunctionURLRequest) *events.LambdaFunctionURLRequest {
	if req == nil || len(req.Cookies) == 0 {
		return req
	}
	for k := range req.Headers {
		if strings.EqualFold(k, "Cookie") {
			return req
		}
	}
	out := *req
	out.Headers = make(map[string]string, len(req.Headers)+1)
	for k, v := range req.Headers {
		out.Headers[k] = v
	}
	out.Headers["cookie"] = strings.Join(req.Cookies, "; ")
	return &out
}

// Start is lambdaurl.Start with Wrap: it serves handler as the function's
// handler, with options (lambdaurl.WithDetectContentType among them).
func Start(handler http.Handler, options ...lambda.Option) {
	lambda.StartHandlerFunc(Wrap(handler), options...)
}
