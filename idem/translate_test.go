package idem

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// neutral is the part of a neutral request a translator fills in, in a
// form that compares with ==: the header and credential readers are
// asked for one name each.
type neutral struct {
	method, operation, tenant string
	keys                      []string
	contentType, accept       string
	requestID                 string
	params, query             []pair
	path                      string
	body                      string
	bodyErr                   bool
	header                    []string // values of X-Extra
	credential                string   // the credential named "org"
}

func view(in *request) neutral {
	n := neutral{
		method: in.method, operation: in.operation, tenant: in.tenant,
		keys: in.keyValues, contentType: in.contentType, accept: in.accept,
		requestID: in.requestID, params: in.parts.params, query: in.parts.query,
		path: in.parts.path, body: string(in.body), bodyErr: in.bodyErr != nil,
		credential: in.credentialValue("org"),
	}
	if in.hasHeaders() {
		n.header = in.headerValues("X-Extra")
	}
	// Absent and empty are the same to the fingerprint.
	if len(n.keys) == 0 {
		n.keys = nil
	}
	if len(n.params) == 0 {
		n.params = nil
	}
	if len(n.query) == 0 {
		n.query = nil
	}
	if len(n.header) == 0 {
		n.header = nil
	}
	return n
}

func TestFromV2(t *testing.T) {
	tenant := AuthorizerKey("tenantId")
	rc := events.APIGatewayV2HTTPRequestContext{
		RequestID:  "req-1",
		HTTP:       events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/ctx/path"},
		Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": "t1", "org": "o1"}},
	}
	cases := []struct {
		name string
		req  Request
		want neutral
	}{
		{"routed event",
			Request{Event: events.APIGatewayV2HTTPRequest{
				RouteKey: "POST /runs/{id}", RawPath: "/runs/7", RawQueryString: "b=2&a=1&a=0",
				Headers:        map[string]string{"idempotency-key": "k1", "content-type": "application/json", "accept": "application/xml", "x-extra": "e"},
				PathParameters: map[string]string{"id": "7"}, Body: `{"a":1}`, RequestContext: rc}},
			neutral{method: "POST", operation: "POST /runs/{id}", tenant: "t1", keys: []string{"k1"},
				contentType: "application/json", accept: "application/xml", requestID: "req-1",
				params: []pair{{name: "id", value: "7"}}, query: []pair{{name: "a", value: "1"}, {name: "a", value: "0"}, {name: "b", value: "2"}},
				body: `{"a":1}`, header: []string{"e"}, credential: "o1"}},
		{"catch-all route: the path is part of the request",
			Request{Event: events.APIGatewayV2HTTPRequest{RouteKey: "$default", RawPath: "/any/where",
				QueryStringParameters: map[string]string{"q": "1"}, RequestContext: rc}},
			neutral{method: "POST", operation: "$default", tenant: "t1", requestID: "req-1",
				path: "/any/where", query: []pair{{name: "q", value: "1"}}, credential: "o1"}},
		{"catch-all route without a raw path: the context's path",
			Request{Event: events.APIGatewayV2HTTPRequest{RouteKey: "$default", RequestContext: rc}},
			neutral{method: "POST", operation: "$default", tenant: "t1", requestID: "req-1", path: "/ctx/path", credential: "o1"}},
		{"operation and params given: they replace the routeKey and the event's parameters",
			Request{Event: events.APIGatewayV2HTTPRequest{RouteKey: "$default", RawPath: "/runs/7/cancel",
				PathParameters: map[string]string{"proxy": "runs/7/cancel"}, RequestContext: rc},
				Operation: "POST /runs/{runId}/cancel", Params: map[string]string{"runId": "7"}},
			neutral{method: "POST", operation: "POST /runs/{runId}/cancel", tenant: "t1", requestID: "req-1",
				params: []pair{{name: "runId", value: "7"}}, credential: "o1"}},
		{"base64 body decoded",
			Request{Event: events.APIGatewayV2HTTPRequest{RouteKey: "POST /x", Body: "aGk=", IsBase64Encoded: true, RequestContext: rc}},
			neutral{method: "POST", operation: "POST /x", tenant: "t1", requestID: "req-1", body: "hi", credential: "o1"}},
		{"invalid base64 body",
			Request{Event: events.APIGatewayV2HTTPRequest{RouteKey: "POST /x", Body: "!!", IsBase64Encoded: true, RequestContext: rc}},
			neutral{method: "POST", operation: "POST /x", tenant: "t1", requestID: "req-1", body: "", bodyErr: true, credential: "o1"}},
		{"no authorizer: no tenant, no credential",
			Request{Event: events.APIGatewayV2HTTPRequest{RouteKey: "POST /x", RequestContext: events.APIGatewayV2HTTPRequestContext{
				HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST"}}}},
			neutral{method: "POST", operation: "POST /x"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var in request
			before := c.req.Event.RouteKey
			fromV2(&in, &c.req, &tenant)
			if got := view(&in); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
			if c.req.Event.RouteKey != before {
				t.Error("fromV2 rewrote the event")
			}
		})
	}
}

func TestFromV1(t *testing.T) {
	tenant := AuthorizerKey("tenantId")
	rc := events.APIGatewayProxyRequestContext{RequestID: "req-1", Authorizer: map[string]any{"tenantId": "t1", "org": "o1"}}
	cases := []struct {
		name string
		ev   events.APIGatewayProxyRequest
		want neutral
	}{
		{"single-value headers and query",
			events.APIGatewayProxyRequest{HTTPMethod: "POST", Resource: "/runs/{id}", Path: "/runs/7",
				Headers:               map[string]string{"Idempotency-Key": "k1", "Content-Type": "application/json", "Accept": "text/plain", "X-Extra": "e"},
				QueryStringParameters: map[string]string{"b": "2", "a": "1"}, PathParameters: map[string]string{"id": "7"},
				Body: "{}", RequestContext: rc},
			neutral{method: "POST", operation: "POST /runs/{id}", tenant: "t1", keys: []string{"k1"},
				contentType: "application/json", accept: "text/plain", requestID: "req-1",
				params: []pair{{name: "id", value: "7"}}, query: []pair{{name: "a", value: "1"}, {name: "b", value: "2"}},
				body: "{}", header: []string{"e"}, credential: "o1"}},
		{"multi-value headers and query are authoritative: every value, in order",
			events.APIGatewayProxyRequest{HTTPMethod: "POST", Resource: "/runs",
				Headers:                         map[string]string{"Idempotency-Key": "k2", "Accept": "a/b", "X-Extra": "last"},
				MultiValueHeaders:               map[string][]string{"idempotency-key": {"k1", "k2"}, "accept": {"a/a", "a/b"}, "content-type": {"text/xml"}, "x-extra": {"first", "last"}},
				QueryStringParameters:           map[string]string{"a": "2"},
				MultiValueQueryStringParameters: map[string][]string{"a": {"1", "2"}},
				RequestContext:                  rc},
			neutral{method: "POST", operation: "POST /runs", tenant: "t1", keys: []string{"k1", "k2"},
				contentType: "text/xml", accept: "a/a,a/b", requestID: "req-1",
				query: []pair{{name: "a", value: "1"}, {name: "a", value: "2"}}, header: []string{"first", "last"}, credential: "o1"}},
		{"an empty multi-value content type falls back to the single one",
			events.APIGatewayProxyRequest{HTTPMethod: "PUT", Resource: "/x",
				Headers:           map[string]string{"Content-Type": "application/json"},
				MultiValueHeaders: map[string][]string{"Content-Type": {""}}, RequestContext: rc},
			neutral{method: "PUT", operation: "PUT /x", tenant: "t1", contentType: "application/json", requestID: "req-1", credential: "o1"}},
		{"no resource: no operation; a bad base64 body marked",
			events.APIGatewayProxyRequest{HTTPMethod: "POST", Body: "!!", IsBase64Encoded: true, RequestContext: rc},
			neutral{method: "POST", tenant: "t1", requestID: "req-1", bodyErr: true, credential: "o1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := view(fromV1(&c.ev, &tenant)); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestFromHTTP(t *testing.T) {
	tenant := func(r *http.Request) (string, bool) { return r.Header.Get("X-Tenant"), true }
	credential := func(r *http.Request, name string) string { return r.Header.Get("X-Cred-" + name) }
	req := func(method, target string, h map[string][]string) *http.Request {
		r := httptest.NewRequest(method, target, nil)
		for k, vs := range h {
			for _, v := range vs {
				r.Header.Add(k, v)
			}
		}
		return r
	}
	values := func(m map[string]string) func(string) string { return func(n string) string { return m[n] } }
	cases := []struct {
		name       string
		r          *http.Request
		rt         httpRoute
		noCallback bool
		want       neutral
	}{
		{"ServeMux pattern with path values",
			req("POST", "/runs/7?b=2&a=1", map[string][]string{"Idempotency-Key": {"k1"}, "Content-Type": {"application/json"},
				"Accept": {"a/a", "a/b"}, "X-Request-Id": {"req-1"}, "X-Extra": {"e1", "e2"}, "X-Tenant": {"t1"}, "X-Cred-Org": {"o1"}}),
			httpRoute{operation: "POST /runs/{id}", pattern: "POST /runs/{id}", pathValue: values(map[string]string{"id": "7"})},
			false,
			neutral{method: "POST", operation: "POST /runs/{id}", tenant: "t1", keys: []string{"k1"},
				contentType: "application/json", accept: "a/a,a/b", requestID: "req-1",
				params: []pair{{name: "id", value: "7"}}, query: []pair{{name: "a", value: "1"}, {name: "b", value: "2"}},
				header: []string{"e1", "e2"}, credential: "o1"}},
		{"a pattern that does not determine the path (a trailing-slash subtree)",
			req("POST", "/files/a/b", map[string][]string{"X-Request-Id": {"req-1"}, "X-Tenant": {"t1"}}),
			httpRoute{operation: "POST /files/", pattern: "POST /files/", pathValue: values(nil)},
			false,
			neutral{method: "POST", operation: "POST /files/", tenant: "t1", requestID: "req-1", path: "/files/a/b"}},
		{"a router's own route: its parameters as given, never the path",
			req("POST", "/orders/9/x", map[string][]string{"X-Request-Id": {"req-1"}, "X-Tenant": {"t1"}}),
			httpRoute{operation: "POST /orders/:id/*", pattern: "POST /orders/:id/*", routed: true, params: map[string]string{"id": "9", "*": "x"}},
			false,
			neutral{method: "POST", operation: "POST /orders/:id/*", tenant: "t1", requestID: "req-1",
				params: []pair{{name: "*", value: "x"}, {name: "id", value: "9"}}}},
		{"no tenant or credential source",
			req("DELETE", "/runs/7", map[string][]string{"X-Request-Id": {"req-1"}, "X-Tenant": {"t1"}, "X-Cred-Org": {"o1"}}),
			httpRoute{operation: "DELETE /runs/7", pattern: "DELETE /runs/7", pathValue: values(nil)},
			true,
			neutral{method: "DELETE", operation: "DELETE /runs/7", requestID: "req-1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tn, cr := tenant, credential
			if c.noCallback {
				tn, cr = nil, nil
			}
			if got := view(fromHTTP(c.r, c.rt, tn, cr)); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
}

func TestToV2AndToV1(t *testing.T) {
	resp := &Response{Status: 201, Body: []byte("hi"), Headers: map[string][]string{
		"Content-Type": {"text/plain"}, "Vary": {"A", "B"}, "Set-Cookie": {"c=2"}, base64Marker: {"1"}}}
	v2 := toV2(resp, []string{"c=1"}, "hi")
	want2 := events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: "aGk=", IsBase64Encoded: true, Cookies: []string{"c=1", "c=2"},
		Headers: map[string]string{"Content-Type": "text/plain", "Vary": "A,B"}}
	if !reflect.DeepEqual(v2, want2) {
		t.Errorf("toV2: got %+v, want %+v", v2, want2)
	}
	v1 := toV1(resp, "hi")
	want1 := events.APIGatewayProxyResponse{StatusCode: 201, Body: "aGk=", IsBase64Encoded: true,
		Headers:           map[string]string{"Content-Type": "text/plain"},
		MultiValueHeaders: map[string][]string{"Vary": {"A", "B"}, "Set-Cookie": {"c=2"}}}
	// Set-Cookie has one value: it goes to Headers.
	want1.Headers["Set-Cookie"] = "c=2"
	delete(want1.MultiValueHeaders, "Set-Cookie")
	if !reflect.DeepEqual(v1, want1) {
		t.Errorf("toV1: got %+v, want %+v", v1, want1)
	}
	if got := toV1(&Response{Status: 204}, ""); got.Headers != nil || got.MultiValueHeaders != nil {
		t.Errorf("toV1 of a response without headers: %+v", got)
	}
	// The handler's text body is the answer's when the response still has
	// its bytes, and never when they changed (a body stamped afterwards).
	for _, c := range []struct{ body, text string }{{"same", "same"}, {`{"requestId":"r2"}`, `{"requestId":"r1"}`}, {"", "gone"}, {"new", ""}} {
		r := &Response{Status: 200, Body: []byte(c.body)}
		if v2 := toV2(r, nil, c.text); v2.Body != c.body || v2.IsBase64Encoded {
			t.Errorf("toV2 of body %q with the handler's %q: %q", c.body, c.text, v2.Body)
		}
		if v1 := toV1(r, c.text); v1.Body != c.body || v1.IsBase64Encoded {
			t.Errorf("toV1 of body %q with the handler's %q: %q", c.body, c.text, v1.Body)
		}
	}
}
