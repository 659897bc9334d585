package idem

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"net/textproto"
	"slices"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// HTTPAPIHandler is an API Gateway HTTP API (payload format 2.0) handler.
type HTTPAPIHandler func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// RESTHandler is an API Gateway REST API (v1 proxy integration) handler.
type RESTHandler func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)

// base64Marker is a reserved header kept in cached responses of API Gateway
// handlers that returned IsBase64Encoded bodies, so a replay is encoded the
// same way. Adapters strip it from every response they return.
const base64Marker = "Idemkit-Body-Base64"

// lambdaPayloadMax is the largest response payload a synchronous Lambda
// invocation returns (6 MB): with a larger one the invocation fails, and
// API Gateway answers 502, whatever the handler answered.
const lambdaPayloadMax = 6 << 20

// lambdaPayloadRoom is kept free below lambdaPayloadMax for what the Guard
// adds to an answer built from a stored response (the policy's replay
// headers, a request id), so that a response the first answer could carry
// is never replayed in a payload over the limit.
const lambdaPayloadRoom = 8 << 10

// byteCount is an io.Writer that counts what is written to it.
type byteCount int

func (n *byteCount) Write(p []byte) (int, error) { *n += byteCount(len(p)); return len(p), nil }

// overLambdaPayload reports whether out, an API Gateway response as an
// adapter returns it, whose body and headers take about size bytes,
// leaves less than lambdaPayloadRoom below lambdaPayloadMax once encoded
// as aws-lambda-go encodes it (encoding/json without HTML escaping). A
// JSON escape takes at most 6 bytes per byte, so a small response is
// never encoded to be measured.
func overLambdaPayload(out any, size int) bool {
	if !mayOverLambda(size) {
		return false
	}
	var n byteCount
	enc := json.NewEncoder(&n)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return false
	}
	return int(n) > lambdaPayloadMax-lambdaPayloadRoom
}

// mayOverLambda reports whether a response of size bytes of body and
// headers (lambdaSize) may be over the limit once JSON-escaped: only then
// is its answer built and measured (overLambdaPayload).
func mayOverLambda(size int) bool { return 6*size+1024 > lambdaPayloadMax-lambdaPayloadRoom }

// lambdaSize is the size overLambdaPayload starts from: the body as the
// handler returned it (text, or base64) and every header name and value.
func lambdaSize(body string, single map[string]string, multi map[string][]string, cookies []string) int {
	n := len(body)
	for k, v := range single {
		n += len(k) + len(v) + 6
	}
	for k, vs := range multi {
		n += len(k) + 6
		for _, v := range vs {
			n += len(v) + 3
		}
	}
	for _, c := range cookies {
		n += len(c) + 3
	}
	return n
}

// inLambda reports whether ctx is a Lambda invocation's (it carries a
// lambdacontext, as `idemkit dev` gives its handlers too): only there is
// an answer's payload bounded (markOverLambda).
func inLambda(ctx context.Context) bool {
	_, ok := lambdacontext.FromContext(ctx)
	return ok
}

// markOverLambda marks r, the response a handler answered through an API
// Gateway adapter whose answer for it is out, as not kept (NotKept) when
// Lambda could not return that answer (overLambdaPayload): the attempt is
// recorded as run, and its duplicates are answered 410, not a replay that
// fails the same way on every retry. A body over MaxResponseBytes is not
// kept for that already.
func markOverLambda(in *request, r *Response, out any, size int) {
	if r.NotKept == 0 && len(r.Body) <= MaxResponseBytes && overLambdaPayload(out, size) {
		r.NotKept = 1
		in.overLambda = true
	}
}

// The response shapes of the API Gateway adapters in a Lambda invocation
// (request.lambdaShape).
const (
	shapeNone  uint8 = iota
	shapeV2          // HTTP API (Do, HTTPAPI)
	shapeV1          // REST
	shapeProxy       // net/http behind aws-lambda-go-api-proxy (Handle, Middleware, the routers)
)

// overLambdaAnswer reports whether r, an answer the Guard records itself
// (the handler's answer to a conflict, OnConflict), is too large for
// Lambda to return as the request's adapter returns it
// (overLambdaPayload): measured as the handler's own answer is
// (markOverLambda), only in a Lambda invocation, and not for a body over
// MaxResponseBytes, which is not kept for that already.
func (in *request) overLambdaAnswer(r *Response) bool {
	if in.lambdaShape == shapeNone || len(r.Body) > MaxResponseBytes {
		return false
	}
	if in.lambdaShape == shapeProxy {
		out, size, ok := proxyPayload(r)
		return ok && overLambdaPayload(out, size)
	}
	size := len(r.Body)
	if _, ok := r.Headers[base64Marker]; ok {
		size = base64.StdEncoding.EncodedLen(size)
	}
	size += lambdaSize("", nil, r.Headers, nil)
	if !mayOverLambda(size) {
		return false
	}
	if in.lambdaShape == shapeV1 {
		return overLambdaPayload(toV1(r, ""), size)
	}
	return overLambdaPayload(toV2(r, nil, ""), size)
}

// decodeBody returns the bytes of an API Gateway request body: a text
// body's own bytes, viewed in place (bodyView), or a base64 body decoded.
// view reports the former: those bytes are the event's string, so they
// are read and never written (request.body).
func decodeBody(body string, b64 bool) (b []byte, view bool, err error) {
	if !b64 {
		return bodyView(body), true, nil
	}
	b, err = base64.StdEncoding.DecodeString(body)
	return b, false, err
}

// fromLambda converts a handler's API Gateway response to a Response,
// written into r (overwritten; the request's storage) and returned. The
// one-value headers take their value slices from vals' spare capacity
// while it lasts (each a full slice expression, so appending to one
// copies), then from the heap. A body marked base64 that does not decode
// is an *unreadableError, r holding the body as it came.
func fromLambda(r *Response, vals []string, status int, single map[string]string, multi map[string][]string, body string, b64 bool) (*Response, error) {
	*r = Response{Status: status, Headers: make(map[string][]string, len(single)+len(multi)+1)}
	for k, vs := range multi {
		ck := textproto.CanonicalMIMEHeaderKey(k)
		r.Headers[ck] = append(r.Headers[ck], vs...)
	}
	for k, v := range single {
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if vs, dup := multi[k]; dup && slices.Contains(vs, v) {
			// API Gateway merges both maps, a value given in both once
			// ("only the values from multiValueHeaders" appear).
			continue
		}
		if prev, ok := r.Headers[ck]; !ok && len(vals) < cap(vals) {
			vals = append(vals, v)
			n := len(vals)
			r.Headers[ck] = vals[n-1 : n : n]
		} else {
			r.Headers[ck] = append(prev, v)
		}
	}
	if b64 {
		raw, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			// The handler ran: its answer is recorded as not kept
			// (unreadableError), with the body's size as it came.
			r.Body = []byte(body)
			return r, unreadable(r, fmt.Errorf("idem: handler returned an invalid base64 body: %w", err))
		}
		r.Body = raw
		r.Headers[base64Marker] = []string{"1"}
	} else {
		r.Body = []byte(body)
	}
	return r, nil
}

// lambdaBody renders a Response body for an API Gateway response. text
// is the body the handler returned as text, or a replay's stored body
// viewed as a string (request.replayText), "" when none: when the
// response's body still has its bytes, it is that string, not a copy.
func lambdaBody(r *Response, text string) (string, bool) {
	if _, ok := r.Headers[base64Marker]; ok {
		return base64.StdEncoding.EncodeToString(r.Body), true
	}
	if string(r.Body) == text {
		return text, false
	}
	return string(r.Body), false
}

// HTTPAPI wraps an HTTP API (payload 2.0) handler: every request runs
// through Do with the event's routeKey as its operation. HTTPAPI panics
// when Config.Tenant is unset (a wiring error reported at start-up).
//
// The answer's header names are canonical (http.CanonicalHeaderKey), the
// handler's and the Guard's alike: the replay marker is the key
// "Openwop-Idempotent-Replay" (HeaderOpenWOPReplay) of Headers, and a
// handler's "x-order-id" comes back as "X-Order-Id". HTTP header names are
// case-insensitive, so nothing changes on the wire; a test that looks a
// header up in the map uses the canonical name.
//
// The handler sees the request's Accept-Encoding without the codings the
// Guard cannot undo (br, zstd, compress; an accepting "*" as gzip and
// deflate; "identity" when the request accepted only codings the Guard
// cannot undo, never a header refusing everything), as behind net/http:
// an answer it compresses for the request is
// in gzip or deflate, whose error code the Guard reads and which a retry
// that does not accept it gets decoded. The Guard's own view of the
// request (its fingerprint) is the event as it came.
func (g *Guard) HTTPAPI(h HTTPAPIHandler) HTTPAPIHandler {
	g.requireTenant("HTTPAPI")
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return g.Do(ctx, Request{Event: ev}, func(ctx context.Context) (events.APIGatewayV2HTTPResponse, error) {
			return h(ctx, offeredV2(ev))
		})
	}
}

// offeredV2 is ev as the HTTPAPI adapter hands it to its handler: its
// Accept-Encoding without the codings the Guard cannot undo
// (offeredCodings), under every spelling the event holds it, in a copy of
// its headers; ev itself when that changes nothing. A handler that
// compresses its answer for the request then encodes it in a coding the
// Guard reads, as behind net/http.
func offeredV2(ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPRequest {
	ev.Headers = offeredIn(ev.Headers)
	return ev
}

// offeredV1 is offeredV2 for a REST event, whose Accept-Encoding may be in
// Headers, MultiValueHeaders or both (each rewritten in a copy).
func offeredV1(ev events.APIGatewayProxyRequest) events.APIGatewayProxyRequest {
	ev.Headers = offeredIn(ev.Headers)
	cloned := false
	for k, vs := range ev.MultiValueHeaders {
		if !strings.EqualFold(k, "Accept-Encoding") {
			continue
		}
		if offered, changed := offeredCodings(strings.Join(vs, ",")); changed {
			if !cloned {
				ev.MultiValueHeaders, cloned = maps.Clone(ev.MultiValueHeaders), true
			}
			ev.MultiValueHeaders[k] = []string{offered}
		}
	}
	return ev
}

// offeredIn is h with offeredCodings applied to Accept-Encoding under each
// spelling h holds it (RED_TEAM 383), in a copy; h itself when that
// changes nothing.
func offeredIn(h map[string]string) map[string]string {
	out, cloned := h, false
	for k, v := range h {
		if !strings.EqualFold(k, "Accept-Encoding") {
			continue
		}
		if offered, changed := offeredCodings(v); changed {
			if !cloned {
				out, cloned = maps.Clone(h), true
			}
			out[k] = offered
		}
	}
	return out
}

// REST wraps a REST API (v1 proxy integration) handler. The operation is
// httpMethod + " " + resource (the resource template, never the path),
// mapped through Config.Operations. A header the handler's response names
// in both Headers and MultiValueHeaders is answered, and kept, with both
// merged as API Gateway merges them (the multi-value list, then the
// one-value header's value unless the list holds it). Otherwise as
// HTTPAPI.
func (g *Guard) REST(h RESTHandler) RESTHandler {
	g.requireTenant("REST")
	return func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		in := fromV1(&ev, &g.cfg.Tenant)
		var text string
		lambda := inLambda(ctx) // the request's context, as in Do
		if lambda {
			in.lambdaShape = shapeV1
		}
		resp := g.serve(ctx, in, func(ctx context.Context) (*Response, error) {
			out, err := h(ctx, offeredV1(ev))
			if err != nil {
				return nil, err
			}
			if !out.IsBase64Encoded {
				text = out.Body
			}
			r, err := fromLambda(&in.handled, in.handledVals[:0], out.StatusCode, out.Headers, out.MultiValueHeaders, out.Body, out.IsBase64Encoded)
			if err == nil && lambda {
				size := lambdaSize(out.Body, out.Headers, out.MultiValueHeaders, nil)
				if mayOverLambda(size) {
					markOverLambda(in, r, toV1(r, text), size)
				}
			}
			return r, err
		})
		if text == "" {
			text = in.replayText
		}
		return toV1(resp, text), nil
	}
}
