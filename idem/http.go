package idem

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/idemkit/idemkit/idem/internal/streamed"
	"github.com/idemkit/idemkit/internal/apierr"
)

// Middleware wraps a net/http handler (for aws-lambda-go-api-proxy and
// container users). The routed operation comes from Config.HTTPOperation,
// else the ServeMux pattern: the pattern the wrapped *http.ServeMux (or any
// router with its Handler(*http.Request) (http.Handler, string) method)
// routes the request to, when next is one, with that pattern's path values
// (a router's pattern that a ServeMux would not route the request by, in
// a syntax of its own, is the operation all the same, with the whole path
// in the fingerprint in place of its path values)
// (also when that mux is itself mounted on an outer ServeMux under a
// subtree, "/api/", whose pattern the request then carries as
// Request.Pattern: the operation and Config.Routes are the wrapped mux's
// patterns; an http.StripPrefix goes outside the middleware, since around
// it the middleware has no mux to ask, and the path the client sent is
// then in the fingerprint too, as it is whenever a handler before the
// Guard rewrote the path: applications mounted under two prefixes never
// share an answer); otherwise Request.Pattern, set
// when the middleware wraps a handler registered on a ServeMux (or on
// another router that sets it, as chi does: a pattern a ServeMux would not
// route the request by, chi's "/files/*" or "/orders/{id:[0-9]+}", has
// the whole path in the fingerprint in place of its path values). The raw
// path is otherwise never used. A request the
// wrapped mux routes to no pattern (its 404, 405 or redirect) passes
// straight through, with Config.HTTPOperation set too. A keyed request for which no operation can be found at
// all (a handler on no ServeMux pattern, no HTTPOperation) is answered 500
// idemkit.server_configuration_error (CodeServerConfiguration): a wiring
// mistake, not retryable by the caller. The
// tenant comes from Config.HTTPTenant (Middleware panics without one, unless
// Config.Tenant is SingleTenant). Requests under idempotency have their
// response buffered (to cache it); all others stream straight through.
// A buffered handler's flushes send nothing early (the answer goes out
// whole when it returns), the read and write deadlines it sets through
// http.ResponseController are the connection's, and it cannot hijack the
// connection; its trailers (declared in "Trailer", or set under
// http.TrailerPrefix) go out, and are replayed, after the body, and a
// header it sets after its status is committed is not sent, as net/http
// does; an answer whose body disagrees with the Content-Length it
// declares (a copy that broke off), which net/http would cut short, is
// one the Guard cannot read, recorded as not kept, never kept cut short.
// A handler that returns without writing a word after its request's
// context ended (its client hung up; a deadline passed), or after its own
// context ended with ErrLeaseLost, bailed out: nothing is recorded, the
// record is released (a hang-up answered CodeClientClosed, a deadline
// 500, a lost lease 503 CodeStoreUnavailable or 409 in flight), and the
// retry runs it; one that wrote its answer is recorded as it answered.
// A body over the bound of an http.MaxBytesReader in front of the Guard
// is 413 payload_too_large, as one over MaxRequestBytes; a body that
// stopped arriving (the server's ReadTimeout) is 408 CodeRequestTimeout
// (net/http closes the connection), never a 400 refusing it.
// Inside a Lambda invocation (behind aws-lambda-go-api-proxy) an answer
// whose payload Lambda could not return is answered once and recorded as
// not kept; behind a function URL in response streaming mode, served
// through idem/idemlambdaurl, answers are streamed and kept up to
// MaxResponseBytes.
// The handler of a request under idempotency sees its Accept-Encoding
// with only the content codings the Guard can undo (gzip, deflate,
// identity), so that an answer a compression middleware inside the Guard
// encodes can be read and replayed to a retry that accepts another; the
// Guard reads a JSON or Contract body only uncoded (415
// unsupported_media_type otherwise). A
// handler that panics with http.ErrAbortHandler has its response aborted,
// as net/http aborts it (the record is released: a retry runs again); any
// other panic is a retryable 500.
//
// Surrounding whitespace in Idempotency-Key cannot be rejected here: Go's
// HTTP server strips the whitespace around every header value while
// parsing the request, so " key " arrives as "key" and is accepted. The
// API Gateway adapters (HTTPAPI, REST) receive the raw value and reject it
// (400 idempotency_key_invalid, details.reason "whitespace"). Repeated
// Idempotency-Key headers are rejected here as there.
func (g *Guard) Middleware(next http.Handler) http.Handler {
	return g.handle("", next, nil)
}

// Routed is Middleware for a router that routes requests itself and that
// this package cannot ask: route says which route serves a request, as
// the operation (the method and the router's own pattern, "POST
// /orders/{id}") and the values of that pattern's path parameters, which
// the fingerprint covers as it does a ServeMux pattern's; ok false means
// no route serves the request (the router answers it: 404, 405), and the
// request passes straight through, unguarded. A route that serves the
// request (ok) but names no operation ("") is a wiring mistake: a keyed
// request to it is answered 500 idemkit.server_configuration_error, never
// passed through. A route whose operation is a template ("{id}", ":id",
// "*path" segments) given without a value for each of its parameters has
// the whole path in
// the fingerprint in their place, never one answer for every resource of
// the route. Config.HTTPOperation, when set, still names the
// operation. The adapters in idem/router (chi,
// gorilla/mux, gin, echo; each its own module) are built on it; use one
// of them with those routers, since their middlewares run before the
// router tells the pattern (chi's Use) or outside net/http (gin, echo).
// It panics when route or next is nil: a wiring mistake.
func (g *Guard) Routed(route func(r *http.Request) (operation string, params map[string]string, ok bool), next http.Handler) http.Handler {
	if route == nil {
		panic("idem: Guard.Routed needs the function that says which route serves a request")
	}
	return g.handle("", next, route)
}

// Handle wraps next for one route whose canonical operation id is
// operation. It panics when operation is empty (a wiring mistake reported
// at start-up; use Middleware to take the operation from the ServeMux).
func (g *Guard) Handle(operation string, next http.Handler) http.Handler {
	if operation == "" {
		panic("idem: Guard.Handle needs a non-empty operation id (or use Guard.Middleware, which takes the operation from the ServeMux pattern or Config.HTTPOperation)")
	}
	return g.handle(operation, next, nil)
}

func (g *Guard) handle(operation string, next http.Handler, route func(*http.Request) (string, map[string]string, bool)) http.Handler {
	if next == nil {
		panic("idem: Guard.Middleware/Handle need a handler to wrap")
	}
	g.requireTenant("net/http")
	var mux *muxRoutes
	if router, ok := next.(patternRouter); ok && operation == "" && route == nil {
		// With Config.HTTPOperation the mux still says which requests
		// no pattern serves (its 404, 405 or redirect, passed through:
		// RED_TEAM 532); the operation and fingerprint stay the hook's.
		mux = &muxRoutes{router: router, gateOnly: g.cfg.HTTPOperation != nil}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt, ok := g.httpRoute(r, operation, mux, route)
		if !ok || !g.buffers(w, r, rt.operation) {
			next.ServeHTTP(w, r) // the router's own answer, or nothing to guard
			return
		}
		in := fromHTTP(r, rt, g.cfg.HTTPTenant, g.cfg.HTTPCredential)
		if g.hostHeader {
			in.parts.header = netHostHeader(r)
		}
		if e := readBody(r, in); e != nil {
			writeResponse(w, g.decorate(g.errorResponse(e, in.requestID), in, "", false, ""))
			return
		}
		if inLambda(r.Context()) && !streamed.In(r.Context()) {
			// Inside Lambda the answer is one buffered payload, bounded
			// below MaxResponseBytes (markOverProxy), unless the request
			// came through idem/idemlambdaurl, whose answers a function URL
			// streams: those are bounded by MaxResponseBytes alone.
			in.lambdaShape = shapeProxy
		}
		var aborted atomic.Bool
		resp := g.serve(r.Context(), in, recorded(next, w, r, in, &aborted))
		if aborted.Load() {
			// The handler aborted its response (http.ErrAbortHandler): the
			// Guard released the record as for any panic, and the response
			// is aborted here too, as net/http aborts it, not answered 500.
			panic(http.ErrAbortHandler)
		}
		if inLambda(r.Context()) {
			resp = trailersAsHeaders(resp)
		}
		writeResponse(w, resp)
	})
}

// trailersAsHeaders returns resp with its trailers (kept under
// http.TrailerPrefix: recorder.answerHeaders) as headers of their names:
// inside a Lambda invocation the answer is one payload, with no trailers,
// whose headers the proxy reads from the map once the handler returns, as
// it reads a handler's trailers without the Guard. resp is returned as it
// is when it has none; else a copy (its header map may be a record's).
func trailersAsHeaders(resp *Response) *Response {
	has := false
	for k := range resp.Headers {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			has = true
			break
		}
	}
	if !has {
		return resp
	}
	out := *resp
	out.Headers = make(map[string][]string, len(resp.Headers))
	for k, vs := range resp.Headers {
		if !strings.HasPrefix(k, http.TrailerPrefix) {
			out.Headers[k] = vs
		}
	}
	// After the headers, in the order of their names: a name sent as a
	// header and a trailer has its values in one order every time.
	for _, k := range slices.Sorted(maps.Keys(resp.Headers)) {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			name = http.CanonicalHeaderKey(name)
			out.Headers[name] = append(slices.Clip(out.Headers[name]), resp.Headers[k]...)
		}
	}
	return &out
}

// buffers reports whether the net/http adapter runs r, routed to the
// operation routed, under the protocol, its response buffered. Any other
// request streams straight through: a safe method, a skipped route, a
// disabled Guard, and a request without a key on a route that neither
// requires, derives nor decodes one, which gets the policy's headers (the
// ERP policy: on every response) up front, on w.
func (g *Guard) buffers(w http.ResponseWriter, r *http.Request, routed string) bool {
	route := g.cfg.Routes[g.operation(routed)]
	if g.cfg.Disabled || !mutating(r.Method) || route.Skip {
		return false
	}
	if len(r.Header.Values(HeaderKey)) > 0 || g.cfg.Required || route.Contract != nil || route.DeriveKey != nil {
		return true
	}
	if g.cfg.Policy.Headers != nil {
		g.cfg.Policy.Headers(w.Header(), Answer{RequestID: httpRequestID(r)})
	}
	return false
}

// recorded runs next for r, with in's body as its body, and returns the
// response it wrote; w is the writer the answer goes out on (the
// connection's deadlines are set through it: recorder). A panic with
// http.ErrAbortHandler sets aborted before it goes on (the Guard recovers
// it as any handler panic). A body that disagrees with the Content-Length
// the handler declared is an answer the Guard cannot read (bodyLengthOff).
// Inside a Lambda invocation (behind aws-lambda-go-api-proxy, shapeProxy)
// a response too large for Lambda to return is marked not kept
// (markOverProxy).
func recorded(next http.Handler, w http.ResponseWriter, r *http.Request, in *request, aborted *atomic.Bool) handlerFunc {
	body := in.body
	return func(ctx context.Context) (*Response, error) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					aborted.Store(true)
				}
				panic(p)
			}
		}()
		rec := &recorder{header: make(http.Header), w: w}
		r2 := r.WithContext(ctx)
		if ae := r.Header.Values("Accept-Encoding"); len(ae) > 0 {
			// Only codings the Guard reads are offered to the handler
			// (offeredCodings); the request's own header is unchanged.
			if offered, changed := offeredCodings(strings.Join(ae, ",")); changed {
				h := make(http.Header, len(r.Header))
				for k, vs := range r.Header {
					h[k] = vs
				}
				h["Accept-Encoding"] = []string{offered}
				r2.Header = h
			}
		}
		r2.Body = io.NopCloser(bytes.NewReader(body))
		r2.ContentLength = int64(len(body))
		next.ServeHTTP(rec, r2)
		if !rec.committed && rec.body.Len() == 0 {
			if err := r.Context().Err(); err != nil {
				// Not a word, its request's context ended (its client
				// gone, or a deadline a middleware set, as
				// http.TimeoutHandler does): the handler bailed out on it
				// (the idiom for an ended request context), not an empty
				// 200 to replay to every retry: the context's error, its
				// record released (a hang-up answered 499: RED_TEAM 411).
				return nil, err
			}
			if ctx.Err() != nil {
				// Likewise when only its own context ended: the Guard cut
				// its lease (ErrLeaseLost), as an API Gateway handler
				// returning the cause is answered (503 or 409 in flight,
				// the record released: RED_TEAM 530).
				return nil, context.Cause(ctx)
			}
		}
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		resp := &Response{Status: rec.status, Headers: rec.answerHeaders(), Body: rec.body.Bytes()}
		if declared, off := bodyLengthOff(resp); off {
			// A copy that broke off (or ran over): net/http would cut
			// the connection, its client seeing the body end early; the
			// bytes written are not the answer, and are never kept as it
			// (RED_TEAM 403).
			return nil, unreadable(resp, fmt.Errorf("%w: a body of %d bytes under Content-Length %d", errBodyLength, len(resp.Body), declared))
		}
		if in.lambdaShape == shapeProxy {
			markOverProxy(in, resp)
		}
		return resp, nil
	}
}

// markOverProxy marks r, a net/http handler's answer inside a Lambda
// invocation, as not kept (markOverLambda) when Lambda could not return
// the payload an API Gateway proxy (aws-lambda-go-api-proxy) builds from
// it (proxyPayload). As through the API Gateway adapters, the caller gets
// the answer (and API Gateway's 502), every duplicate 410, never the same
// failed payload again. A small answer is never measured.
func markOverProxy(in *request, r *Response) {
	if out, size, ok := proxyPayload(r); ok {
		markOverLambda(in, r, out, size)
	}
}

// proxyPayload is the payload an API Gateway proxy (aws-lambda-go-api-proxy)
// builds from r, a net/http answer, and its size as lambdaSize counts it:
// the body as text when it is valid UTF-8, else base64-encoded, and every
// header, in the proxy's REST shape (each header a list, the larger of its
// two shapes). ok is false, and nothing is built, when r is too small to
// be over Lambda's limit however it is encoded (mayOverLambda).
func proxyPayload(r *Response) (out events.APIGatewayProxyResponse, size int, ok bool) {
	hdrs := lambdaSize("", nil, r.Headers, nil)
	if !mayOverLambda(base64.StdEncoding.EncodedLen(len(r.Body)) + hdrs) {
		return out, 0, false
	}
	out = events.APIGatewayProxyResponse{StatusCode: r.Status, MultiValueHeaders: r.Headers}
	if utf8.Valid(r.Body) {
		out.Body = string(r.Body)
	} else {
		out.Body, out.IsBase64Encoded = base64.StdEncoding.EncodeToString(r.Body), true
	}
	return out, len(out.Body) + hdrs, true
}

// httpRoute finds the route of r: the operation given (Handle), else
// the one route says (Routed), else the wrapped mux's pattern
// (Middleware over a ServeMux), else r.Pattern; Config.HTTPOperation,
// when set, names the operation. ok is false when route or the mux says
// no route serves r: the request is theirs to answer. Safe methods and a
// disabled Guard are never asked about.
func (g *Guard) httpRoute(r *http.Request, operation string, mux *muxRoutes, route func(*http.Request) (string, map[string]string, bool)) (rt httpRoute, ok bool) {
	rt = httpRoute{pattern: r.Pattern, pathValue: r.PathValue}
	asks := mutating(r.Method) && !g.cfg.Disabled
	if route != nil && asks {
		p, params, ok := route(r)
		if !ok {
			return rt, false
		}
		// A route that serves r but names no operation ("") is guarded
		// all the same, and answered 500 server_configuration_error.
		rt.pattern, rt.params, rt.routed = p, params, true
		// A template without the values the request gave it (a hook
		// that returns none, or some of them: RED_TEAM 315): the whole
		// path stands for them.
		rt.wholePath = templated(p) && (len(params) == 0 || !coversTemplate(p, params))
	}
	if mux != nil && asks {
		// The wrapped mux's pattern, even when the request carries an
		// outer mux's (the wrapped one mounted under a subtree such as
		// "/api/"): the route that serves the request is the inner one.
		if mux.gateOnly {
			if !mux.serves(r) {
				return rt, false
			}
		} else {
			p, values, ok := mux.resolve(r)
			if !ok {
				return rt, false
			}
			rt.pattern, rt.pathValue, rt.wholePath = p, values, values == nil
		}
	}
	// Else the request's Pattern, set by the router that routed it: a
	// ServeMux's, or another router's (chi sets its own), read by
	// fromHTTP.
	rt.fromRequest = route == nil && (mux == nil || mux.gateOnly)
	switch {
	case operation != "":
		rt.operation = operation
	case g.cfg.HTTPOperation != nil:
		rt.operation = g.cfg.HTTPOperation(r)
	default:
		rt.operation, rt.fromPattern = rt.pattern, true
	}
	return rt, true
}

// netHostHeader reads the headers of a net/http request, its Host header
// from Request.Host, where Go's server puts it: the header source of a
// request on a Guard some route of which declares Host among its
// fingerprint headers (Guard.hostHeader).
func netHostHeader(r *http.Request) func(name string) []string {
	return func(name string) []string {
		if vs := r.Header.Values(name); len(vs) > 0 || !strings.EqualFold(name, "Host") || r.Host == "" {
			return vs
		}
		return []string{r.Host}
	}
}

// readBody reads r's body into in, up to MaxRequestBytes: a body that
// cannot be read is 400 validation_error, a larger one 413
// payload_too_large, as is one over the bound of an http.MaxBytesReader
// in front of the Guard (RED_TEAM 406), and one that stopped arriving 408
// CodeRequestTimeout.
func readBody(r *http.Request, in *request) *apierr.Error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	if r.ContentLength > MaxRequestBytes {
		// Refused before a byte is read: a client waiting for 100
		// Continue is not asked to send it (RED_TEAM 409).
		return apierr.New(413, apierr.CodePayloadTooLarge, "The request body exceeds %d bytes.", MaxRequestBytes)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
	_ = r.Body.Close()
	if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
		if tooLarge.Limit <= 0 {
			// A router's own bound whose size the adapter cannot know
			// (echo's BodyLimit, RED_TEAM 552): named, not invented.
			return apierr.New(413, apierr.CodePayloadTooLarge, "The request body exceeds the server's limit.")
		}
		return apierr.New(413, apierr.CodePayloadTooLarge, "The request body exceeds %d bytes.", min(tooLarge.Limit, MaxRequestBytes))
	}
	if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		// The body stopped arriving (the server's read deadline ended
		// the read): a timeout the client may retry, never a refusal of
		// the body (RED_TEAM 408).
		return apierr.New(http.StatusRequestTimeout, CodeRequestTimeout, "The request body was not received in time.")
	}
	if err != nil {
		return apierr.New(400, apierr.CodeValidation, "The request body could not be read.")
	}
	if len(body) > MaxRequestBytes {
		return apierr.New(413, apierr.CodePayloadTooLarge, "The request body exceeds %d bytes.", MaxRequestBytes)
	}
	in.body = body
	return nil
}

// maxRequestIDLen is the longest X-Request-Id, in bytes, that the net/http
// adapters take as the current attempt's id.
const maxRequestIDLen = 128

// httpRequestID is the current attempt's id: the caller's X-Request-Id
// when it is 1..maxRequestIDLen visible ASCII characters, else the Lambda
// request id, else a new one. An id the caller sends is stored in the
// record and echoed in headers and envelopes, so nothing else is taken: a
// header of hundreds of kilobytes would make the record too large to store.
func httpRequestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); validRequestID(id) {
		return id
	}
	if lc, ok := lambdacontext.FromContext(r.Context()); ok && lc.AwsRequestID != "" {
		return lc.AwsRequestID
	}
	return newOwnerToken()
}

func writeResponse(w http.ResponseWriter, resp *Response) {
	h := w.Header()
	trailers := false
	for k, vs := range resp.Headers {
		if k == base64Marker {
			continue
		}
		if strings.HasPrefix(k, http.TrailerPrefix) {
			trailers = true // sent after the body
			continue
		}
		h[k] = vs
	}
	if !trailers {
		h.Set("Content-Length", strconv.Itoa(len(resp.Body)))
	}
	// With trailers, no Content-Length: net/http sends the body chunked
	// (HTTP/1.1), then the trailers.
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
	if trailers {
		// The header went out at WriteHeader; what is set on the map now
		// is sent as trailers. A declared trailer's name is cleared first,
		// so that a header of that name does not go out as a trailer too.
		for k := range resp.Headers {
			if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
				delete(h, name)
			}
		}
		for k, vs := range resp.Headers {
			if strings.HasPrefix(k, http.TrailerPrefix) {
				h[k] = vs
			}
		}
	}
}

// errBodyLength is the error logged for a net/http handler's answer whose
// body disagrees with the Content-Length it declared.
var errBodyLength = errors.New("idem: handler's body disagrees with its Content-Length")

// bodyLengthOff reports whether resp, a net/http handler's answer, has a
// body of another length than the Content-Length the handler declared
// (declared), as net/http reads it: the first value, a decimal number;
// another value is dropped by net/http, and ignored here. A status
// without a body (1xx, 204, 304) is never off.
func bodyLengthOff(resp *Response) (declared int64, off bool) {
	vs := resp.Headers["Content-Length"]
	if len(vs) == 0 || resp.Status < 200 || resp.Status == http.StatusNoContent || resp.Status == http.StatusNotModified {
		return 0, false
	}
	n, err := strconv.ParseInt(vs[0], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, n != int64(len(resp.Body))
}

// recorder buffers a handler's response. It flushes nothing (a flush
// sends nothing early: the answer is buffered whole) and cannot be
// hijacked; the read and write deadlines it is given through
// http.ResponseController are the connection's, set on w.
type recorder struct {
	// header is the handler's header map; sent is a copy of it taken
	// when the status is committed (the first final WriteHeader, Write or
	// Flush), the header the answer goes out with, as net/http's writer
	// takes one: what the handler changes after that is read for the
	// trailers alone (answerHeaders).
	header    http.Header
	sent      http.Header
	committed bool
	status    int
	body      bytes.Buffer
	w         http.ResponseWriter
}

// Header returns the handler's header map.
func (r *recorder) Header() http.Header { return r.header }

// commit commits status, the answer's, with the header as it is now.
func (r *recorder) commit(status int) {
	if r.status == 0 {
		r.status = status
	}
	if !r.committed {
		r.committed = true
		r.sent = r.header.Clone()
	}
}

// answerHeaders returns the headers of the recorded answer: those set
// before the status was committed, and its trailers, as net/http sends
// them (RED_TEAM 407): the values, set at any time, of the names the
// "Trailer" header declares, and the keys set under http.TrailerPrefix,
// each kept under http.TrailerPrefix and its name (writeResponse sends
// them after the body). A header set after the status is committed is
// not sent, as net/http does not send it.
func (r *recorder) answerHeaders() http.Header {
	final := r.header // the trailers' values: the map as the handler left it
	sent := r.sent
	if sent == nil { // never committed: the header as the handler left it
		sent = r.header
	}
	var declared []string
	for _, v := range sent["Trailer"] {
		for name := range strings.SplitSeq(v, ",") {
			if name = http.CanonicalHeaderKey(strings.TrimSpace(name)); name != "" {
				declared = append(declared, name)
			}
		}
	}
	prefixed := false
	for k := range final {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			prefixed = true
			break
		}
	}
	if len(declared) == 0 && !prefixed {
		return sent
	}
	h := make(http.Header, len(sent)+len(declared))
	for k, vs := range sent {
		if !strings.HasPrefix(k, http.TrailerPrefix) {
			h[k] = vs
		}
	}
	for k, vs := range final {
		if strings.HasPrefix(k, http.TrailerPrefix) && len(vs) > 0 {
			h[k] = vs
		}
	}
	for _, name := range declared {
		if vs := final[name]; len(vs) > 0 {
			h[http.TrailerPrefix+name] = append(slices.Clip(h[http.TrailerPrefix+name]), vs...)
		}
	}
	return h
}

// Flush sends nothing: the answer is buffered, and goes out whole once
// the handler returns. A handler that flushes as it goes
// (w.(http.Flusher), http.ResponseController, echo's and gin's Flush)
// panicked without it, its work done, and ran again on every retry
// (RED_TEAM 404).
func (r *recorder) Flush() {
	r.commit(http.StatusOK) // a flush commits the status, as net/http's does
}

// SetReadDeadline sets the read deadline of the connection the answer
// goes out on (http.ResponseController), as net/http's writer does.
func (r *recorder) SetReadDeadline(d time.Time) error {
	return http.NewResponseController(r.w).SetReadDeadline(d)
}

// SetWriteDeadline sets the write deadline of the connection the answer
// goes out on (http.ResponseController), as net/http's writer does: the
// Guard writes the buffered answer on it once the handler returns
// (RED_TEAM 405).
func (r *recorder) SetWriteDeadline(d time.Time) error {
	return http.NewResponseController(r.w).SetWriteDeadline(d)
}

// WriteHeader keeps the first final status. An informational one (1xx
// but 101 Switching Protocols, as net/http treats them) is not the
// response: the answer is buffered, so it is dropped, and the status
// written after it is the one recorded and answered.
func (r *recorder) WriteHeader(status int) {
	if status >= 100 && status < 200 && status != http.StatusSwitchingProtocols {
		return
	}
	r.commit(status)
}

func (r *recorder) Write(b []byte) (int, error) {
	r.commit(http.StatusOK)
	return r.body.Write(b)
}

// validRequestID reports whether id is 1..maxRequestIDLen bytes of visible
// ASCII (0x21..0x7E).
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return false
		}
	}
	return true
}
