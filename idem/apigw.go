package idem

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/textproto"

	"github.com/aws/aws-lambda-go/events"
)

// HTTPAPIHandler is an API Gateway HTTP API (payload format 2.0) handler.
type HTTPAPIHandler func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// RESTHandler is an API Gateway REST API (v1 proxy integration) handler.
type RESTHandler func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)

// base64Marker is a reserved header kept in cached responses of API Gateway
// handlers that returned IsBase64Encoded bodies, so a replay is encoded the
// same way. Adapters strip it from every response they return.
const base64Marker = "Idemkit-Body-Base64"

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
// copies), then from the heap.
func fromLambda(r *Response, vals []string, status int, single map[string]string, multi map[string][]string, body string, b64 bool) (*Response, error) {
	*r = Response{Status: status, Headers: make(map[string][]string, len(single)+len(multi)+1)}
	for k, vs := range multi {
		ck := textproto.CanonicalMIMEHeaderKey(k)
		r.Headers[ck] = append(r.Headers[ck], vs...)
	}
	for k, v := range single {
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if _, dup := multi[k]; dup {
			continue // API Gateway: multiValueHeaders win for the same name
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
			return nil, fmt.Errorf("idem: handler returned an invalid base64 body: %w", err)
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
func (g *Guard) HTTPAPI(h HTTPAPIHandler) HTTPAPIHandler {
	g.requireTenant("HTTPAPI")
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return g.Do(ctx, Request{Event: ev}, func(ctx context.Context) (events.APIGatewayV2HTTPResponse, error) { return h(ctx, ev) })
	}
}

// REST wraps a REST API (v1 proxy integration) handler. The operation is
// httpMethod + " " + resource (the resource template, never the path),
// mapped through Config.Operations. Otherwise as HTTPAPI.
func (g *Guard) REST(h RESTHandler) RESTHandler {
	g.requireTenant("REST")
	return func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		in := fromV1(&ev, &g.cfg.Tenant)
		var text string
		resp := g.serve(ctx, in, func(ctx context.Context) (*Response, error) {
			out, err := h(ctx, ev)
			if err != nil {
				return nil, err
			}
			if !out.IsBase64Encoded {
				text = out.Body
			}
			return fromLambda(&in.handled, in.handledVals[:0], out.StatusCode, out.Headers, out.MultiValueHeaders, out.Body, out.IsBase64Encoded)
		})
		if text == "" {
			text = in.replayText
		}
		return toV1(resp, text), nil
	}
}
