package idem

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/textproto"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/internal/header"
)

// HTTPAPIHandler is an API Gateway HTTP API (payload format 2.0) handler.
type HTTPAPIHandler func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// RESTHandler is an API Gateway REST API (v1 proxy integration) handler.
type RESTHandler func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)

// base64Marker is a reserved header kept in cached responses of API Gateway
// handlers that returned IsBase64Encoded bodies, so a replay is encoded the
// same way. Adapters strip it from every response they return.
const base64Marker = "Idemkit-Body-Base64"

func decodeBody(body string, b64 bool) ([]byte, error) {
	if !b64 {
		return []byte(body), nil
	}
	return base64.StdEncoding.DecodeString(body)
}

// fromLambda converts a handler's API Gateway response to a Response.
func fromLambda(status int, single map[string]string, multi map[string][]string, body string, b64 bool) (*Response, error) {
	r := &Response{Status: status, Headers: make(map[string][]string, len(single)+len(multi)+1)}
	for k, vs := range multi {
		ck := textproto.CanonicalMIMEHeaderKey(k)
		r.Headers[ck] = append(r.Headers[ck], vs...)
	}
	for k, v := range single {
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if _, dup := multi[k]; dup {
			continue // API Gateway: multiValueHeaders win for the same name
		}
		r.Headers[ck] = append(r.Headers[ck], v)
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

// lambdaBody renders a Response body for an API Gateway response.
func lambdaBody(r *Response) (string, bool) {
	if _, ok := r.Headers[base64Marker]; ok {
		return base64.StdEncoding.EncodeToString(r.Body), true
	}
	return string(r.Body), false
}

// HTTPAPIOption configures one HTTPAPI adapter.
type HTTPAPIOption func(*httpAPIOptions)

type httpAPIOptions struct {
	operation func(context.Context, events.APIGatewayV2HTTPRequest) string
}

// WithOperation names each request's operation explicitly: op's answer
// replaces the event's routeKey as the routed operation (mapped through
// Config.Operations, then part of the record scope). Use it when the
// handler routes by itself behind a catch-all ($default) route: op sees the
// context the adapter is called with, so a router can pass the operation it
// matched there. The operation then determines the route, so the raw path is
// not part of the request fingerprint (as for any routeKey but $default).
// An empty answer falls back to the routeKey.
func WithOperation(op func(context.Context, events.APIGatewayV2HTTPRequest) string) HTTPAPIOption {
	return func(o *httpAPIOptions) { o.operation = op }
}

// HTTPAPI wraps an HTTP API (payload 2.0) handler. The operation is the
// event's routeKey, or WithOperation's answer (mapped through
// Config.Operations); the tenant comes from
// Config.Tenant (HTTPAPI panics when it is unset: a wiring error reported
// at start-up). The wrapped handler never returns an error: handler errors
// and panics become a 500 envelope and leave the record retryable.
// Response cookies (the Cookies field) are passed through on the first
// response and never cached.
func (g *Guard) HTTPAPI(h HTTPAPIHandler, opts ...HTTPAPIOption) HTTPAPIHandler {
	g.requireTenant("HTTPAPI")
	var o httpAPIOptions
	for _, opt := range opts {
		opt(&o)
	}
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		routeKey := ev.RouteKey
		if o.operation != nil {
			if op := o.operation(ctx, ev); op != "" {
				routeKey = op
			}
		}
		in := request{
			method:      ev.RequestContext.HTTP.Method,
			operation:   routeKey,
			tenant:      g.cfg.Tenant.TenantV2(&ev.RequestContext),
			credential:  func(name string) string { return g.cfg.Tenant.credentialV2(&ev.RequestContext, name) },
			keyValues:   header.Values(ev.Headers, HeaderKey),
			contentType: header.First(ev.Headers, "Content-Type"),
			accept:      header.First(ev.Headers, "Accept"),
			requestID:   ev.RequestContext.RequestID,
			parts: requestParts{
				params: paramPairs(ev.PathParameters),
				header: func(name string) []string { return header.Values(ev.Headers, name) },
			},
		}
		if routeKey == "$default" {
			// The catch-all route does not determine the path.
			if in.parts.path = ev.RawPath; in.parts.path == "" {
				in.parts.path = ev.RequestContext.HTTP.Path
			}
		}
		if ev.RawQueryString != "" {
			in.parts.query = parseQuery(ev.RawQueryString)
		} else {
			in.parts.query = singleQuery(ev.QueryStringParameters)
		}
		in.body, in.bodyErr = decodeBody(ev.Body, ev.IsBase64Encoded)
		var cookies []string
		resp := g.serve(ctx, &in, func(ctx context.Context) (*Response, error) {
			out, err := h(ctx, ev)
			if err != nil {
				return nil, err
			}
			cookies = out.Cookies
			return fromLambda(out.StatusCode, out.Headers, out.MultiValueHeaders, out.Body, out.IsBase64Encoded)
		})
		out := events.APIGatewayV2HTTPResponse{StatusCode: resp.Status, Cookies: cookies}
		out.Body, out.IsBase64Encoded = lambdaBody(resp)
		out.Headers = make(map[string]string, len(resp.Headers))
		for k, vs := range resp.Headers {
			if k == base64Marker {
				continue
			}
			if k == "Set-Cookie" {
				out.Cookies = append(out.Cookies, vs...)
				continue
			}
			out.Headers[k] = strings.Join(vs, ",")
		}
		return out, nil
	}
}

// REST wraps a REST API (v1 proxy integration) handler. The operation is
// httpMethod + " " + resource (the resource template, never the path),
// mapped through Config.Operations. Otherwise as HTTPAPI.
func (g *Guard) REST(h RESTHandler) RESTHandler {
	g.requireTenant("REST")
	return func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		in := request{
			method: ev.HTTPMethod,
			tenant: g.cfg.Tenant.TenantV1(&ev.RequestContext),
			credential: func(name string) string {
				return g.cfg.Tenant.credentialV1(&ev.RequestContext, name)
			},
			requestID: ev.RequestContext.RequestID,
			parts: requestParts{
				params: paramPairs(ev.PathParameters),
				header: func(name string) []string {
					if vs := header.ValuesMulti(ev.MultiValueHeaders, name); len(vs) > 0 {
						return vs
					}
					return header.Values(ev.Headers, name)
				},
			},
		}
		// multiValueQueryStringParameters carries every value of a repeated
		// name, in order (queryStringParameters only the last one).
		if len(ev.MultiValueQueryStringParameters) > 0 {
			in.parts.query = multiQuery(ev.MultiValueQueryStringParameters)
		} else {
			in.parts.query = singleQuery(ev.QueryStringParameters)
		}
		if ev.Resource != "" {
			in.operation = ev.HTTPMethod + " " + ev.Resource
		}
		// multiValueHeaders carries every value of a repeated header (headers
		// only the last one), so it is authoritative when it has the header.
		in.keyValues = header.ValuesMulti(ev.MultiValueHeaders, HeaderKey)
		if len(in.keyValues) == 0 {
			in.keyValues = header.Values(ev.Headers, HeaderKey)
		}
		if ct := header.ValuesMulti(ev.MultiValueHeaders, "Content-Type"); len(ct) > 0 {
			in.contentType = ct[0]
		}
		if in.contentType == "" {
			in.contentType = header.First(ev.Headers, "Content-Type")
		}
		if a := header.ValuesMulti(ev.MultiValueHeaders, "Accept"); len(a) > 0 {
			in.accept = strings.Join(a, ",")
		} else {
			in.accept = header.First(ev.Headers, "Accept")
		}
		in.body, in.bodyErr = decodeBody(ev.Body, ev.IsBase64Encoded)
		resp := g.serve(ctx, &in, func(ctx context.Context) (*Response, error) {
			out, err := h(ctx, ev)
			if err != nil {
				return nil, err
			}
			return fromLambda(out.StatusCode, out.Headers, out.MultiValueHeaders, out.Body, out.IsBase64Encoded)
		})
		out := events.APIGatewayProxyResponse{StatusCode: resp.Status}
		out.Body, out.IsBase64Encoded = lambdaBody(resp)
		for k, vs := range resp.Headers {
			if k == base64Marker {
				continue
			}
			if len(vs) == 1 {
				if out.Headers == nil {
					out.Headers = make(map[string]string, len(resp.Headers))
				}
				out.Headers[k] = vs[0]
				continue
			}
			if out.MultiValueHeaders == nil {
				out.MultiValueHeaders = make(map[string][]string)
			}
			out.MultiValueHeaders[k] = vs
		}
		return out, nil
	}
}
