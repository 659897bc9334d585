package idem

import (
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/internal/header"
)

// The front door: each adapter translates what it receives into the
// neutral request (fromV2, fromV1, fromHTTP), hands it to the one core
// verb (Guard.serve) and translates the answer back (toV2, toV1,
// writeResponse). The translators are pure: they read their input and
// the Guard's tenant source, and run nothing.

// fromV2 reads an HTTP API (payload 2.0) request into in. The event is
// read, never rewritten, and not copied: in keeps its strings, its header
// map and its authorizer, which is all it reads later (credentialValue,
// headerValues). req.Operation and req.Params, when set, replace the
// event's routeKey and path parameters.
func fromV2(in *request, req *Request, tenant *TenantSource) {
	ev := &req.Event
	routeKey := ev.RouteKey
	if req.Operation != "" {
		routeKey = req.Operation
	}
	in.method = ev.RequestContext.HTTP.Method
	in.operation = routeKey
	// A route key names its method ("POST /runs") unless the route serves
	// every method ("ANY /runs", "$default"); Request.Operation is the
	// host's own.
	in.scopeMethod = req.Operation == "" && !namesMethod(routeKey, in.method)
	in.tenant = tenant.TenantV2(&ev.RequestContext)
	in.v2Tenant, in.v2Headers, in.v2Auth = tenant, ev.Headers, ev.RequestContext.Authorizer
	in.contentType, in.accept, in.keyValues, in.v2Absent = v2Headers(ev.Headers, in.keyBuf[:0])
	in.requestID = ev.RequestContext.RequestID
	in.object = req.Object
	in.parts.params = paramPairs(ev.PathParameters)
	if req.Params != nil {
		in.parts.params = paramPairs(req.Params)
	}
	if routeKey == "$default" || (ev.RouteKey == "$default" && len(req.Params) == 0 && templated(routeKey)) ||
		(req.Params != nil && templated(routeKey) && !coversTemplate(routeKey, req.Params)) {
		// The catch-all route does not determine the path; nor does a
		// route template its handler matched behind it ("POST
		// /orders/{id}/refund", "POST /orders/:id"), unless Params gives
		// the values the path carried (an empty Params gives none), every
		// one of them: Params replaces the event's own, so a Params
		// without some value of the template (behind $default, or
		// behind a greedy route whose own value it drops) keeps the path
		// too (RED_TEAM 315).
		if in.parts.path = ev.RawPath; in.parts.path == "" {
			in.parts.path = ev.RequestContext.HTTP.Path
		}
	}
	if ev.RawQueryString != "" {
		in.parts.query = parseQuery(ev.RawQueryString)
	} else {
		in.parts.query = singleQuery(ev.QueryStringParameters)
	}
	in.body, in.bodyView, in.bodyErr = decodeBody(ev.Body, ev.IsBase64Encoded)
}

// v2Headers reads the headers every request needs in one pass over an
// HTTP API event's headers (names in any case): Content-Type and Accept,
// each under the least of its spellings in byte order, as header.First
// (never the one Go's random map order meets first), and every
// Idempotency-Key value,
// appended to keys, as header.Values. In the same pass it finds which of
// the headers that requests seldom send, and that a request's fingerprint
// and body checks look for (Content-Encoding, the method-override
// headers), h has none of under any name (absent, rareHeader): those
// checks then skip their own pass over h.
func v2Headers(h map[string]string, keys []string) (contentType, accept string, _ []string, absent uint8) {
	var typeName, acceptName string
	var haveType, haveAccept bool
	absent = rareAll
	for k, v := range h {
		switch {
		case strings.EqualFold(k, HeaderKey):
			keys = append(keys, v)
		case strings.EqualFold(k, "Content-Type"):
			if !haveType || k < typeName {
				contentType, typeName, haveType = v, k, true
			}
		case strings.EqualFold(k, "Accept"):
			if !haveAccept || k < acceptName {
				accept, acceptName, haveAccept = v, k, true
			}
		case len(k) >= minRareName:
			absent &^= rareHeader(k)
		}
	}
	return contentType, accept, keys, absent
}

// The headers v2Headers reports absent (request.v2Absent), as bits.
const (
	rareEncoding = 1 << iota // Content-Encoding (codedBody)
	rareOverride             // a method-override header (methodOverride)
	rareAll      = rareEncoding | rareOverride
	// minRareName is the length of the shortest name among them.
	minRareName = len("X-Http-Method")
)

// rareHeader returns the bits of the headers of v2Headers' absent that a
// header named k may be (names in any case, as strings.EqualFold matches
// them): none for a name of ASCII bytes that is none of them. A name with
// bytes outside ASCII longer than the shortest of them may fold to one of
// them (the Kelvin sign folds to 'k', the long s to 's', each longer than
// the byte it folds to), so it may be any.
func rareHeader(k string) uint8 {
	switch len(k) {
	case len("Content-Encoding"):
		if strings.EqualFold(k, "Content-Encoding") {
			return rareEncoding
		}
	case len("X-Http-Method"), len("X-Method-Override"), len("X-Http-Method-Override"):
		for _, name := range methodOverrideHeaders {
			if strings.EqualFold(k, name) {
				return rareOverride
			}
		}
	}
	if len(k) > minRareName {
		for i := 0; i < len(k); i++ {
			if k[i] >= utf8.RuneSelf {
				return rareAll
			}
		}
	}
	return 0
}

// fromV1 reads a REST API (v1 proxy integration) request. The operation
// is httpMethod + " " + resource (the resource template, never the path).
// multiValueHeaders and multiValueQueryStringParameters carry every value
// of a repeated name, in order (headers and queryStringParameters only
// the last one), so they are authoritative where they have the name.
func fromV1(ev *events.APIGatewayProxyRequest, tenant *TenantSource) *request {
	values := func(name string) []string {
		if vs := header.ValuesMulti(ev.MultiValueHeaders, name); len(vs) > 0 {
			return vs
		}
		return header.Values(ev.Headers, name)
	}
	in := &request{
		method:     ev.HTTPMethod,
		tenant:     tenant.TenantV1(&ev.RequestContext),
		credential: func(name string) string { return tenant.credentialV1(&ev.RequestContext, name) },
		requestID:  ev.RequestContext.RequestID,
		keyValues:  values(HeaderKey),
		parts:      requestParts{params: paramPairs(ev.PathParameters), header: values},
	}
	if len(ev.MultiValueQueryStringParameters) > 0 {
		in.parts.query = multiQuery(ev.MultiValueQueryStringParameters)
	} else {
		in.parts.query = singleQuery(ev.QueryStringParameters)
	}
	if ev.Resource != "" {
		in.operation = ev.HTTPMethod + " " + ev.Resource
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
	in.body, in.bodyView, in.bodyErr = decodeBody(ev.Body, ev.IsBase64Encoded)
	return in
}

// templated reports whether the operation op names a route template
// rather than one resource: a "{name}" segment (API Gateway's, a
// ServeMux's, chi's, gorilla/mux's) or a segment starting with ':' or '*'
// (gin's, echo's, httprouter's "/orders/:id", "/files/*path"). Such an
// operation without the values its request gave it has the raw path in
// the fingerprint in their place. A ':' inside a segment
// ("/orders:batchCreate") names no parameter.
func templated(op string) bool {
	for i := 0; i < len(op); i++ { // one pass: the net/http middleware asks it of every routed request without parameters
		switch op[i] {
		case '{':
			return true
		case ':', '*':
			if i == 0 || op[i-1] == '/' {
				return true
			}
		}
	}
	return false
}

// coversTemplate reports whether params has a value for every parameter
// the template op names (templateNames). Only a Params a host gives is
// asked: the event's and the router adapters' own carry every value.
func coversTemplate(op string, params map[string]string) bool {
	ok := true
	templateNames(op, func(name string) {
		if _, has := params[name]; !has {
			ok = false
		}
	})
	return ok
}

// templateNames calls f with the name of each parameter the template op
// names, in every syntax templated reads: "{id}", "{id:[0-9]{3}}",
// "{rest...}", "{proxy+}" (the name before ':', "..." or "+"; "{$}", a
// ServeMux's end of path, names none), ":id", and "*path" ("*" alone is
// named "*", as chi and echo name it).
func templateNames(op string, f func(string)) {
	for seg := range strings.SplitSeq(op, "/") {
		switch {
		case strings.HasPrefix(seg, ":"):
			f(seg[1:])
			continue
		case strings.HasPrefix(seg, "*"):
			if seg == "*" {
				f("*")
			} else {
				f(seg[1:])
			}
			continue
		}
		for i := 0; i < len(seg); i++ {
			if seg[i] != '{' {
				continue
			}
			depth, end := 0, len(seg)
			for j := i; j < len(seg); j++ {
				if seg[j] == '{' {
					depth++
				} else if seg[j] == '}' {
					if depth--; depth == 0 {
						end = j
						break
					}
				}
			}
			name := seg[i+1 : end]
			if k := strings.IndexByte(name, ':'); k >= 0 {
				name = name[:k]
			}
			name = strings.TrimSuffix(strings.TrimSuffix(name, "..."), "+")
			if name != "$" && name != "" {
				f(name)
			}
			i = end
		}
	}
}

// namesMethod reports whether the routed operation op names the method
// of its request: it starts with that method and a space ("POST /runs",
// a ServeMux pattern "POST /runs/{id}").
func namesMethod(op, method string) bool {
	return len(op) > len(method) && op[len(method)] == ' ' && op[:len(method)] == method
}

// httpRoute is what the net/http adapter found out about the route of a
// request: the routed operation, and the path parameters either as the
// router gave them (routed, from Guard.Routed) or as the ServeMux pattern
// names them, read through pathValue.
type httpRoute struct {
	operation string
	pattern   string
	pathValue func(string) string
	routed    bool
	params    map[string]string
	// wholePath says the pattern's path values cannot be read (a
	// router's pattern a ServeMux would not route the request by): the
	// whole path is in the fingerprint in their place.
	wholePath bool
	// fromRequest says the pattern is the request's Pattern, which the
	// router that routed it set: a ServeMux's, or another router's.
	fromRequest bool
	// fromPattern says the operation is the pattern (the mux's, the
	// request's or the router's), not one Handle or Config.HTTPOperation
	// named.
	fromPattern bool
}

// fromHTTP reads a net/http request, all but its body, into a neutral
// request for the route rt. tenant and credential are
// Config.HTTPTenant and Config.HTTPCredential (either may be nil).
func fromHTTP(r *http.Request, rt httpRoute, tenant func(*http.Request) (string, bool), credential func(*http.Request, string) string) *request {
	in := &request{
		method:      r.Method,
		operation:   rt.operation,
		keyValues:   r.Header.Values(HeaderKey),
		contentType: r.Header.Get("Content-Type"),
		accept:      strings.Join(r.Header.Values("Accept"), ","),
		requestID:   httpRequestID(r),
		parts:       requestParts{query: parseQuery(r.URL.RawQuery), header: r.Header.Values},
	}
	if rt.fromRequest && rt.pattern != "" {
		// Another router's pattern (chi's "/files/*" or
		// "/orders/{id:[0-9]+}") may not determine the path values a
		// ServeMux's would: they are read only where a ServeMux would
		// route the request by it, else the whole path is fingerprinted.
		values, ok := pathValues(rt.pattern, r)
		rt.pathValue, rt.wholePath = values, !ok
	}
	switch names := patternParams(rt.pattern); {
	case rt.wholePath:
		in.parts.path = r.URL.EscapedPath()
	case rt.routed:
		// The router's own pattern syntax: its parameters as it gave
		// them, a wildcard's rest among them.
		in.parts.params = paramPairs(rt.params)
	case len(names) > 0:
		m := make(map[string]string, len(names))
		for _, n := range names {
			m[n] = rt.pathValue(n)
		}
		in.parts.params = paramPairs(m)
	}
	// A ServeMux pattern (or a router's operation) without the method
	// serves every method; an operation Handle or Config.HTTPOperation
	// names is the host's own.
	in.scopeMethod = rt.fromPattern && !namesMethod(rt.operation, r.Method)
	if !rt.routed && patternPath(rt.pattern) {
		in.parts.path = r.URL.EscapedPath()
	}
	if sent, ok := sentPath(r); ok {
		// A handler before the Guard rewrote the path (http.StripPrefix
		// mounting one of several applications, a trailing slash
		// removed): the path the client sent is in the fingerprint
		// too, so that two applications' routes of one pattern under
		// two prefixes never share an answer (RED_TEAM 533). A retry
		// is sent to the same path, so it is still the replay.
		in.parts.path = sentPathTag + sent + " " + in.parts.path
	}
	if tenant != nil {
		// A tenant only when the source says ok: one that declines
		// may still return the string it read (an unverified token's
		// claim), which is no tenant (RED_TEAM 527).
		if t, ok := tenant(r); ok {
			in.tenant = t
		}
	}
	if credential != nil {
		in.credential = func(name string) string { return credential(r, name) }
	}
	return in
}

// sentPathTag begins the fingerprint's path part of a request whose path
// was rewritten before the Guard: an escaped path begins with '/' (or is
// empty), so no request's path part without it equals one with it.
const sentPathTag = "sent "

// sentPath returns the path of r's request target as its client sent it
// (Request.RequestURI, set by the server; a request made in the process
// has none), when it is not the path r.URL now has: a handler before the
// Guard rewrote it. A target in authority form (CONNECT) or "*" has no
// path to compare.
func sentPath(r *http.Request) (string, bool) {
	uri := r.RequestURI
	if uri == "" {
		return "", false
	}
	var sent string
	if uri[0] == '/' {
		sent, _, _ = strings.Cut(uri, "?")
	} else {
		u, err := url.ParseRequestURI(uri)
		if err != nil || u.Host == "" {
			return "", false
		}
		sent = u.EscapedPath()
	}
	if sent == r.URL.EscapedPath() || sent == r.URL.RawPath && spells(sent, r.URL.Path) {
		// Not rewritten. A target holding bytes net/url escapes when it
		// spells the path again (raw UTF-8, '|', braces) is kept as sent
		// in RawPath, which EscapedPath does not return: it is compared
		// as sent, and only while it still spells the path (a handler
		// that set Path alone left it behind). Such a request keeps the
		// fingerprint it had before the sent path joined it (RED_TEAM
		// 556).
		return "", false
	}
	return sent, true
}

// spells reports whether raw, a path as sent, decodes to path.
func spells(raw, path string) bool {
	p, err := url.PathUnescape(raw)
	return err == nil && p == path
}

// toV2 renders an answer as an HTTP API (payload 2.0) response: repeated
// headers joined with commas, Set-Cookie as cookies after the handler's
// own (cookies). text is the handler's text body, if any (lambdaBody).
func toV2(resp *Response, cookies []string, text string) events.APIGatewayV2HTTPResponse {
	out := events.APIGatewayV2HTTPResponse{StatusCode: resp.Status, Cookies: cookies}
	out.Body, out.IsBase64Encoded = lambdaBody(resp, text)
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
	return out
}

// toV1 renders an answer as a REST API (v1 proxy) response: a header of
// one value in Headers, a repeated one in MultiValueHeaders. text is the
// handler's text body, if any (lambdaBody).
func toV1(resp *Response, text string) events.APIGatewayProxyResponse {
	out := events.APIGatewayProxyResponse{StatusCode: resp.Status}
	out.Body, out.IsBase64Encoded = lambdaBody(resp, text)
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
	return out
}
