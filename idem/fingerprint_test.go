package idem_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem"
)

// refundReq is one request to the refund route: POST /orders/{id}/refund
// with a query string, a JSON body and extra headers.
type refundReq struct {
	id      string // concrete path parameter
	query   string // raw query string, still percent-encoded
	body    string
	headers map[string]string
}

// refundAdapter sends refund requests through one adapter and counts
// handler executions.
type refundAdapter struct {
	name string
	send func(t *testing.T, e *env, r refundReq) answer
}

func (a refundAdapter) Calls(e *env) int { return refundCalls.get(e) }

// refundCalls counts handler runs per env.
var refundCalls = &callCounter{m: map[*env]int{}}

type callCounter struct {
	mu sync.Mutex
	m  map[*env]int
}

func (c *callCounter) inc(e *env) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[e]++
	return c.m[e]
}

func (c *callCounter) get(e *env) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[e]
}

// v1Query decodes a raw query string the way API Gateway fills the REST
// event: decoded names and values, repeated names in order.
func v1Query(raw string) (single map[string]string, multi map[string][]string) {
	if raw == "" {
		return nil, nil
	}
	single, multi = map[string]string{}, map[string][]string{}
	for _, p := range strings.Split(raw, "&") {
		if p == "" {
			continue
		}
		k, v, _ := strings.Cut(p, "=")
		k, _ = url.QueryUnescape(k)
		v, _ = url.QueryUnescape(v)
		single[k] = v
		multi[k] = append(multi[k], v)
	}
	return single, multi
}

func v2Query(raw string) map[string]string {
	_, multi := v1Query(raw)
	if multi == nil {
		return nil
	}
	out := map[string]string{}
	for k, vs := range multi {
		out[k] = strings.Join(vs, ",")
	}
	return out
}

var refundAdapters = []refundAdapter{
	{"HTTPAPI", func(t *testing.T, e *env, r refundReq) answer {
		ev := v2event("POST", "POST /orders/{id}/refund", testKey, r.body)
		ev.RawPath = "/orders/" + url.PathEscape(r.id) + "/refund"
		ev.RequestContext.HTTP.Path = "/orders/" + r.id + "/refund"
		ev.PathParameters = map[string]string{"id": r.id}
		ev.RawQueryString = r.query
		ev.QueryStringParameters = v2Query(r.query)
		for k, v := range r.headers {
			ev.Headers[strings.ToLower(k)] = v
		}
		h := func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			n := refundCalls.inc(e)
			return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"},
				Body: `{"refund":` + itoa(n) + `,"order":"` + ev.PathParameters["id"] + `"}`}, nil
		}
		resp, err := e.guard.HTTPAPI(h)(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		return fromV2(resp)
	}},
	{"REST", func(t *testing.T, e *env, r refundReq) answer {
		single, multi := v1Query(r.query)
		ev := events.APIGatewayProxyRequest{
			HTTPMethod: "POST", Resource: "/orders/{id}/refund", Path: "/orders/" + r.id + "/refund",
			PathParameters:                  map[string]string{"id": r.id},
			QueryStringParameters:           single,
			MultiValueQueryStringParameters: multi,
			Headers:                         map[string]string{"Idempotency-Key": testKey, "Content-Type": "application/json"},
			MultiValueHeaders:               map[string][]string{"Idempotency-Key": {testKey}, "Content-Type": {"application/json"}},
			Body:                            r.body,
			RequestContext:                  events.APIGatewayProxyRequestContext{RequestID: "req-" + randID(), Authorizer: map[string]any{"tenantId": testTenant}},
		}
		for k, v := range r.headers {
			ev.Headers[k] = v
			ev.MultiValueHeaders[k] = []string{v}
		}
		h := func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			n := refundCalls.inc(e)
			return events.APIGatewayProxyResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"},
				Body: `{"refund":` + itoa(n) + `,"order":"` + ev.PathParameters["id"] + `"}`}, nil
		}
		resp, err := e.guard.REST(h)(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		return fromV1(resp)
	}},
	{"net/http", func(t *testing.T, e *env, r refundReq) answer {
		mux := http.NewServeMux()
		mux.Handle("POST /orders/{id}/refund", e.guard.Middleware(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			n := refundCalls.inc(e)
			_, _ = io.ReadAll(req.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(201)
			_, _ = io.WriteString(w, `{"refund":`+itoa(n)+`,"order":"`+req.PathValue("id")+`"}`)
		})))
		target := "/orders/" + url.PathEscape(r.id) + "/refund"
		if r.query != "" {
			target += "?" + r.query
		}
		req := httptest.NewRequest("POST", target, strings.NewReader(r.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", testKey)
		req.Header.Set("X-Tenant", testTenant)
		for k, v := range r.headers {
			req.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		return fromRecorder(w)
	}},
}

func refundEnv(t *testing.T, mod func(*idem.Config)) *env {
	return newEnv(t, func(c *idem.Config) {
		c.HTTPTenant = func(r *http.Request) (string, bool) { return r.Header.Get("X-Tenant"), r.Header.Get("X-Tenant") != "" }
		if mod != nil {
			mod(c)
		}
	})
}

// The same key on a different order (different path parameter, different
// query) is 409 idempotency_key_mismatch on every adapter, never the first
// order's response.
func TestDifferentOrderSameKeyIsMismatch(t *testing.T) {
	reg := registry(t)
	for _, a := range refundAdapters {
		t.Run(a.name, func(t *testing.T) {
			e := refundEnv(t, nil)
			first := a.send(t, e, refundReq{id: "1", query: "amount=5", body: `{"reason":"damaged"}`})
			if first.status != 201 || !strings.Contains(first.body, `"order":"1"`) {
				t.Fatalf("first: %+v", first)
			}
			second := a.send(t, e, refundReq{id: "2", query: "amount=500", body: `{"reason":"damaged"}`})
			checkEnvelope(t, reg, second, 409, "idempotency_key_mismatch")
			for name, r := range map[string]refundReq{
				"other order only":   {id: "2", query: "amount=5", body: `{"reason":"damaged"}`},
				"other query only":   {id: "1", query: "amount=500", body: `{"reason":"damaged"}`},
				"query added":        {id: "1", query: "amount=5&notify=true", body: `{"reason":"damaged"}`},
				"query removed":      {id: "1", body: `{"reason":"damaged"}`},
				"query key repeated": {id: "1", query: "amount=5&amount=5", body: `{"reason":"damaged"}`},
			} {
				got := a.send(t, e, r)
				if got.status != 409 || got.headers.Get("Openwop-Idempotent-Replay") != "" {
					t.Fatalf("%s: answered %d %s (replay=%q), want 409 idempotency_key_mismatch",
						name, got.status, got.body, got.headers.Get("Openwop-Idempotent-Replay"))
				}
			}
			if n := a.Calls(e); n != 1 {
				t.Fatalf("handler ran %d times, want 1", n)
			}
			again := a.send(t, e, refundReq{id: "1", query: "amount=5", body: `{"reason":"damaged"}`})
			if again.status != 201 || again.body != first.body || again.headers.Get("Openwop-Idempotent-Replay") != "true" {
				t.Fatalf("identical retry: %+v", again)
			}
		})
	}
}

// The query string is canonicalised: decoded, sorted by name, repeated names
// kept in order. Equivalent spellings replay; a different order of the
// values of one repeated name is a different request.
func TestQueryCanonicalisation(t *testing.T) {
	for _, a := range refundAdapters {
		t.Run(a.name, func(t *testing.T) {
			e := refundEnv(t, nil)
			base := refundReq{id: "7", query: "b=2&a=x%20y&tag=1&tag=2", body: `{}`}
			if r := a.send(t, e, base); r.status != 201 {
				t.Fatalf("first: %+v", r)
			}
			for _, q := range []string{"a=x%20y&b=2&tag=1&tag=2", "tag=1&a=x+y&tag=2&b=2", "tag=1&tag=2&b=%32&a=x%20y"} {
				r := a.send(t, e, refundReq{id: "7", query: q, body: `{}`})
				if r.status != 201 || r.headers.Get("Openwop-Idempotent-Replay") != "true" {
					t.Fatalf("equivalent query %q: %+v", q, r)
				}
			}
			for _, q := range []string{"b=2&a=x%20y&tag=2&tag=1", "b=2&a=x%2520y&tag=1&tag=2", "b=2&a=x%20y&tag=1", "b=2&a=x%20y&tag=1,2"} {
				r := a.send(t, e, refundReq{id: "7", query: q, body: `{}`})
				if r.status != 409 {
					t.Fatalf("different query %q: %+v", q, r)
				}
			}
			if n := a.Calls(e); n != 1 {
				t.Fatalf("handler ran %d times", n)
			}
		})
	}
}

// Headers stay out of the fingerprint unless the route declares them.
func TestDeclaredHeadersInFingerprint(t *testing.T) {
	for _, a := range refundAdapters {
		t.Run(a.name, func(t *testing.T) {
			e := refundEnv(t, nil)
			a.send(t, e, refundReq{id: "1", body: `{}`, headers: map[string]string{"X-Currency": "EUR"}})
			if r := a.send(t, e, refundReq{id: "1", body: `{}`, headers: map[string]string{"X-Currency": "USD"}}); r.status != 201 ||
				r.headers.Get("Openwop-Idempotent-Replay") != "true" {
				t.Fatalf("undeclared header changed the fingerprint: %+v", r)
			}
			op := "POST /orders/{id}/refund" // routeKey, REST method + resource and mux pattern alike
			d := refundEnv(t, func(c *idem.Config) {
				c.Routes = map[string]idem.Route{op: {Headers: []string{"x-currency"}}}
			})
			a.send(t, d, refundReq{id: "1", body: `{}`, headers: map[string]string{"X-Currency": "EUR"}})
			if r := a.send(t, d, refundReq{id: "1", body: `{}`, headers: map[string]string{"X-Currency": "USD"}}); r.status != 409 {
				t.Fatalf("declared header ignored: %+v", r)
			}
			if r := a.send(t, d, refundReq{id: "1", body: `{}`}); r.status != 409 {
				t.Fatalf("declared header missing on the retry: %+v", r)
			}
			if r := a.send(t, d, refundReq{id: "1", body: `{}`, headers: map[string]string{"X-Currency": "EUR", "X-Other": "z"}}); r.status != 201 ||
				r.headers.Get("Openwop-Idempotent-Replay") != "true" {
				t.Fatalf("identical declared header did not replay: %+v", r)
			}
		})
	}
}

func TestRouteHeadersValidated(t *testing.T) {
	for _, bad := range [][]string{{""}, {"Idempotency-Key"}, {"bad header"}} {
		_, err := idem.New(idem.Config{Store: newEnv(t, nil).store, Routes: map[string]idem.Route{"POST /x": {Headers: bad}}})
		if err == nil || !strings.Contains(err.Error(), "Headers") {
			t.Fatalf("Route.Headers %q accepted: %v", bad, err)
		}
	}
}

// Where the route does not determine the path (the HTTP API $default route,
// a ServeMux subtree pattern, no pattern at all), the path is part of the
// fingerprint; where it does, the path adds nothing.
func TestPathWhereRouteDoesNotDetermineIt(t *testing.T) {
	t.Run("HTTPAPI $default", func(t *testing.T) {
		e := newEnv(t, nil)
		h := &handler{}
		ev := v2event("POST", "$default", testKey, `{}`)
		ev.RawPath = "/orders/1/refund"
		e.call(h, ev)
		ev.RawPath = "/orders/2/refund"
		if r := e.call(h, ev); r.StatusCode != 409 {
			t.Fatalf("$default with another path: %+v", r)
		}
		ev.RawPath = "/orders/1/refund"
		if r := e.call(h, ev); r.Headers[idem.HeaderOpenWOPReplay] != "true" {
			t.Fatalf("identical retry: %+v", r)
		}
	})
	for _, c := range []struct{ name, pattern, op string }{
		{"subtree pattern", "POST /orders/", ""},
		{"no pattern", "", "refund"},
	} {
		t.Run("net/http "+c.name, func(t *testing.T) {
			e := refundEnv(t, func(cfg *idem.Config) {
				if c.op != "" {
					cfg.HTTPOperation = func(*http.Request) string { return c.op }
				}
			})
			calls := 0
			var h http.Handler = e.guard.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls++
				w.WriteHeader(201)
			}))
			if c.pattern != "" {
				mux := http.NewServeMux()
				mux.Handle(c.pattern, h)
				h = mux
			}
			do := func(path string) int {
				r := httptest.NewRequest("POST", path, strings.NewReader(`{}`))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Idempotency-Key", testKey)
				r.Header.Set("X-Tenant", testTenant)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w.Code
			}
			if do("/orders/1/refund") != 201 || do("/orders/2/refund") != 409 || do("/orders/1/refund") != 201 || calls != 1 {
				t.Fatalf("calls=%d", calls)
			}
		})
	}
}

// A query pair with invalid escapes is kept raw and never equals a decoded
// pair ("%zz" raw vs "%25zz" decoding to "%zz").
func TestUndecodableQueryNeverEqualsDecoded(t *testing.T) {
	for _, a := range []refundAdapter{refundAdapters[0], refundAdapters[2]} {
		t.Run(a.name, func(t *testing.T) {
			e := refundEnv(t, nil)
			if r := a.send(t, e, refundReq{id: "1", query: "a=%25zz", body: `{}`}); r.status != 201 {
				t.Fatalf("first: %+v", r)
			}
			if r := a.send(t, e, refundReq{id: "1", query: "a=%zz", body: `{}`}); r.status != 409 {
				t.Fatalf("undecodable query replayed a decoded one: %+v", r)
			}
		})
	}
}
