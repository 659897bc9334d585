package idem_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// wrongReplayCase is two requests sent under one key, one after the
// other: same says whether they are one request (the second must be the
// first one's replay) or two (the second must never be answered with the
// first one's answer: it runs, or is refused).
type wrongReplayCase struct {
	name string
	a, b func(*events.APIGatewayV2HTTPRequest)
	same bool
	only string // the one policy the case applies to, "" for all
}

// replayed reports whether out is a replay under policy p.
func replayed(p idem.Policy, h map[string]string) bool {
	switch p.Name {
	case "erp":
		return h[erp.HeaderReplayed] == "true"
	case "commerce":
		return h[commerce.HeaderIdempotentReplay] == "true"
	}
	return h[idem.HeaderOpenWOPReplay] == "true"
}

func withHeader(name, value string) func(*events.APIGatewayV2HTTPRequest) {
	return func(ev *events.APIGatewayV2HTTPRequest) {
		for k := range ev.Headers {
			if strings.EqualFold(k, name) {
				delete(ev.Headers, k)
			}
		}
		if value != "" {
			ev.Headers[strings.ToLower(name)] = value
		}
	}
}

func withBody(body string) func(*events.APIGatewayV2HTTPRequest) {
	return func(ev *events.APIGatewayV2HTTPRequest) { ev.Body = body }
}

func with(fs ...func(*events.APIGatewayV2HTTPRequest)) func(*events.APIGatewayV2HTTPRequest) {
	return func(ev *events.APIGatewayV2HTTPRequest) {
		for _, f := range fs {
			f(ev)
		}
	}
}

// TestOneKeyTwoRequestsNeverShareAnAnswer sends pairs of requests under one
// key through the HTTP API adapter, under each policy, on a route that
// reads its body by its Content-Type: two requests the handler reads
// differently are never answered with one another's answer, and one
// request sent twice (respaced, reordered, base64-encoded by API Gateway,
// its media type spelt in another case or with a charset) is a replay.
// The same bytes sent with and without a content coding (or under two)
// failed before RED_TEAM 463: the second was replayed the first's answer.
// The second case of each pair that differ failed before RED_TEAM 313:
// the same bytes sent as a JSON Patch and as a JSON merge patch (or as
// text/plain and as a form) were one request, the second answered the
// first one's answer, marked a replay, and never ran.
func TestOneKeyTwoRequestsNeverShareAnAnswer(t *testing.T) {
	const patch = `[{"op":"remove","path":"/a"}]`
	gzipped := string(encodeBody(t, "gzip", "a=1&b=2"))
	cases := []wrongReplayCase{
		{name: "JSON Patch then JSON merge patch of the same bytes",
			a: with(withHeader("Content-Type", "application/json-patch+json"), withBody(patch)),
			b: with(withHeader("Content-Type", "application/merge-patch+json"), withBody(patch))},
		{name: "application/json then a +json type of the same bytes",
			a: with(withHeader("Content-Type", "application/json"), withBody(patch)),
			b: with(withHeader("Content-Type", "application/merge-patch+json"), withBody(patch))},
		{name: "a form then text of the same bytes",
			a: with(withHeader("Content-Type", "application/x-www-form-urlencoded"), withBody("a=1&b=2")),
			b: with(withHeader("Content-Type", "text/plain"), withBody("a=1&b=2"))},
		{name: "text in UTF-8 then in Latin-1 of the same bytes",
			a: with(withHeader("Content-Type", "text/plain; charset=utf-8"), withBody("caf\u00e9")),
			b: with(withHeader("Content-Type", "text/plain; charset=iso-8859-1"), withBody("caf\u00e9"))},
		{name: "multipart bodies of the same bytes under two boundaries",
			a: with(withHeader("Content-Type", "multipart/form-data; boundary=x"), withBody("--x\r\n\r\n--y\r\n\r\n--x--")),
			b: with(withHeader("Content-Type", "multipart/form-data; boundary=y"), withBody("--x\r\n\r\n--y\r\n\r\n--x--"))},

		{name: "the same bytes sent gzip-coded then uncoded",
			a: with(withHeader("Content-Type", "application/octet-stream"), withHeader("Content-Encoding", "gzip"), withBody(gzipped)),
			b: with(withHeader("Content-Type", "application/octet-stream"), withBody(gzipped))},
		{name: "the same bytes sent uncoded then gzip-coded",
			a: with(withHeader("Content-Type", "application/octet-stream"), withBody(gzipped)),
			b: with(withHeader("Content-Type", "application/octet-stream"), withHeader("Content-Encoding", "gzip"), withBody(gzipped))},
		{name: "the same bytes sent gzip-coded then deflate-coded",
			a: with(withHeader("Content-Type", "text/plain"), withHeader("Content-Encoding", "gzip"), withBody(gzipped)),
			b: with(withHeader("Content-Type", "text/plain"), withHeader("Content-Encoding", "deflate"), withBody(gzipped))},

		{name: "JSON in UTF-8 then labelled Latin-1 of the same bytes",
			a: with(withHeader("Content-Type", "application/json; charset=utf-8"), withBody("{\"a\":\"caf\u00e9\"}")),
			b: with(withHeader("Content-Type", "application/json; charset=iso-8859-1"), withBody("{\"a\":\"caf\u00e9\"}"))},
		{name: "a +json type labelled Latin-1 then without a charset, of the same bytes",
			a: with(withHeader("Content-Type", "application/merge-patch+json; charset=ISO-8859-1"), withBody("{\"a\":\"caf\u00e9\"}")),
			b: with(withHeader("Content-Type", "application/merge-patch+json"), withBody("{\"a\":\"caf\u00e9\"}"))},
		{name: "JSON in UTF-8 then labelled with two charsets",
			a: with(withHeader("Content-Type", "application/json"), withBody("{\"a\":\"caf\u00e9\"}")),
			b: with(withHeader("Content-Type", "application/json; charset=utf-8; charset=latin1"), withBody("{\"a\":\"caf\u00e9\"}"))},
		{name: "JSON labelled Latin-1, its charset spelt otherwise", same: true,
			a: with(withHeader("Content-Type", "application/json; charset=iso-8859-1"), withBody("{\"a\":\"caf\u00e9\"}")),
			b: with(withHeader("Content-Type", "Application/JSON;Charset=\"ISO-8859-1\""), withBody("{\"a\":\"caf\u00e9\"}"))},
		{name: "JSON with its UTF-8 charset quoted", same: true,
			a: with(withHeader("Content-Type", "application/json"), withBody("{\"a\":\"caf\u00e9\"}")),
			b: with(withHeader("Content-Type", "application/json; charset=\"utf-8\""), withBody("{\"a\":\"caf\u00e9\"}"))},
		{name: "a gzip-coded body with its coding spelt otherwise", same: true,
			a: with(withHeader("Content-Type", "application/octet-stream"), withHeader("Content-Encoding", "gzip"), withBody(gzipped)),
			b: with(withHeader("Content-Type", "application/octet-stream"), withHeader("Content-Encoding", "identity, GZip "), withBody(gzipped))},
		{name: "application/json with and without a charset", same: true,
			a: with(withHeader("Content-Type", "application/json"), withBody(`{"a":1}`)),
			b: with(withHeader("Content-Type", "Application/JSON; charset=UTF-8"), withBody(`{"a":1}`))},
		{name: "a +json type respaced, its members reordered, spelt in another case", same: true,
			a: with(withHeader("Content-Type", "application/merge-patch+json"), withBody(`{"a":1,"b":null}`)),
			b: with(withHeader("Content-Type", "Application/Merge-Patch+JSON; charset=utf-8"), withBody(" {\"b\": null, \"a\": 1}\n"))},
		{name: "text with its parameters spelt otherwise", same: true,
			a: with(withHeader("Content-Type", "text/plain; charset=utf-8"), withBody("caf\u00e9")),
			b: with(withHeader("Content-Type", "TEXT/Plain;Charset=\"UTF-8\""), withBody("caf\u00e9"))},
		{name: "a body API Gateway passed base64-encoded", same: true,
			a: with(withHeader("Content-Type", "application/octet-stream"), withBody("\x00\x01raw")),
			b: func(ev *events.APIGatewayV2HTTPRequest) {
				withHeader("Content-Type", "application/octet-stream")(ev)
				ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte("\x00\x01raw")), true
			}},
		{name: "an empty body with and without a Content-Type", same: true,
			a: with(withHeader("Content-Type", ""), withBody("")),
			b: with(withHeader("Content-Type", "text/plain"), withBody(""))},
		{name: "a body without a Content-Type, twice", same: true,
			a: with(withHeader("Content-Type", ""), withBody("a=1")),
			b: with(withHeader("Content-Type", ""), withBody("a=1"))},
	}
	policies := []idem.Policy{idem.PolicyOpenWOP, commerce.Policy, erp.Policy}
	for _, p := range policies {
		for _, c := range cases {
			t.Run(p.Name+"/"+c.name, func(t *testing.T) {
				e := newEnv(t, func(cfg *idem.Config) { cfg.Policy = p })
				h := &handler{}
				send := func(mod func(*events.APIGatewayV2HTTPRequest)) events.APIGatewayV2HTTPResponse {
					ev := commerceEvent(http.MethodPatch, "PATCH /docs/{id}", testKey, "")
					ev.PathParameters = map[string]string{"id": "d1"}
					mod(&ev)
					return e.call(h, ev)
				}
				first := send(c.a)
				if first.StatusCode != 201 || replayed(p, first.Headers) {
					t.Fatalf("first request: %d %v %s", first.StatusCode, first.Headers, first.Body)
				}
				second := send(c.b)
				switch {
				case c.same && (!replayed(p, second.Headers) || second.Body != first.Body || h.Calls() != 1):
					t.Fatalf("the same request again: %d %v %s (handler ran %d times); want the first answer replayed", second.StatusCode, second.Headers, second.Body, h.Calls())
				case !c.same && (replayed(p, second.Headers) || second.Body == first.Body):
					t.Fatalf("another request under the same key: %d %v %s (handler ran %d times); want it run or refused, never the first answer", second.StatusCode, second.Headers, second.Body, h.Calls())
				}
			})
		}
	}
}

// TestOneKeyTwoResourcesNeverShareAnAnswer: the parts of a request that
// name its resource, as the adapters read them (a path spelt with an
// encoded slash or an encoded unreserved character behind the catch-all
// route, a query string, a REST resource's path parameters and repeated
// query values, a credential's parts and a tenant spelt in another case),
// keep two resources apart under one key; only a query reordered across
// names is the same request. These held before RED_TEAM 313.
func TestOneKeyTwoResourcesNeverShareAnAnswer(t *testing.T) {
	path := func(p string) func(*events.APIGatewayV2HTTPRequest) {
		return func(ev *events.APIGatewayV2HTTPRequest) {
			ev.RouteKey, ev.PathParameters = "$default", nil
			ev.RawPath, ev.RequestContext.HTTP.Path = p, p
		}
	}
	query := func(q string) func(*events.APIGatewayV2HTTPRequest) {
		return func(ev *events.APIGatewayV2HTTPRequest) { ev.RawQueryString = q }
	}
	auth := func(k, v string) func(*events.APIGatewayV2HTTPRequest) {
		return func(ev *events.APIGatewayV2HTTPRequest) { ev.RequestContext.Authorizer.Lambda[k] = v }
	}
	cases := []wrongReplayCase{
		{name: "an encoded slash and a slash", a: path("/docs/a%2Fb"), b: path("/docs/a/b")},
		{name: "an encoded slash in upper and lower case hex", a: path("/docs/a%2Fb"), b: path("/docs/a%2fb")},
		{name: "an encoded tilde and a tilde", a: path("/docs/%7E"), b: path("/docs/~")},
		{name: "a double slash", a: path("/docs/a/b"), b: path("/docs/a//b")},
		{name: "a dot segment", a: path("/docs/a/b"), b: path("/docs/a/./b")},
		{name: "a query naming the resource", a: query("id=1"), b: query("id=2")},
		{name: "a repeated query value reordered", a: query("id=1&id=2"), b: query("id=2&id=1")},
		{name: "a joined and a repeated query value", a: query("id=1,2"), b: query("id=1&id=2")},
		{name: "a query reordered across names", same: true, a: query("a=1&b=2"), b: query("b=2&a=1")},
		{name: "tenants told apart by case", a: auth("tenantId", "acme"), b: auth("tenantId", "Acme")},
		{name: "tenants told apart by surrounding space", a: auth("tenantId", "acme"), b: auth("tenantId", "acme ")},
		{name: "tenants told apart by Unicode normalisation", a: auth("tenantId", "caf\u00e9"), b: auth("tenantId", "cafe\u0301")},
		{name: "credential parts whose concatenation is one", only: "commerce", a: with(auth("namespace", "a"), auth("worker", "bc")), b: with(auth("namespace", "ab"), auth("worker", "c"))},
		{name: "credential parts whose concatenation is one", only: "erp", a: with(auth("clientId", "a"), auth("companyId", "bc")), b: with(auth("clientId", "ab"), auth("companyId", "c"))},
		{name: "credential parts holding the separator", a: with(auth("tenantId", "a/b"), auth("namespace", "c")), b: with(auth("tenantId", "a"), auth("namespace", "b/c"))},
	}
	for _, p := range []idem.Policy{idem.PolicyOpenWOP, commerce.Policy, erp.Policy} {
		for _, c := range cases {
			if c.only != "" && c.only != p.Name {
				continue
			}
			t.Run(p.Name+"/"+c.name, func(t *testing.T) {
				e := newEnv(t, func(cfg *idem.Config) { cfg.Policy = p })
				h := &handler{}
				send := func(mod func(*events.APIGatewayV2HTTPRequest)) events.APIGatewayV2HTTPResponse {
					ev := commerceEvent(http.MethodPost, "POST /docs", testKey, `{"a":1}`)
					ev.RawPath, ev.RequestContext.HTTP.Path = "/docs", "/docs"
					mod(&ev)
					return e.call(h, ev)
				}
				first := send(c.a)
				if first.StatusCode != 201 {
					t.Fatalf("first request: %d %s", first.StatusCode, first.Body)
				}
				second := send(c.b)
				if c.same != replayed(p, second.Headers) || (!c.same && second.Body == first.Body) {
					t.Fatalf("same=%v: second %d %v %s (handler ran %d times)", c.same, second.StatusCode, second.Headers, second.Body, h.Calls())
				}
			})
		}
	}

	// REST (payload 1.0): the resource's path parameters and every value
	// of a repeated query name, in order.
	rest := []struct {
		name string
		a, b func(*events.APIGatewayProxyRequest)
	}{
		{"path parameters", func(ev *events.APIGatewayProxyRequest) { ev.PathParameters = map[string]string{"id": "1"} },
			func(ev *events.APIGatewayProxyRequest) { ev.PathParameters = map[string]string{"id": "2"} }},
		{"repeated query values reordered", func(ev *events.APIGatewayProxyRequest) {
			ev.MultiValueQueryStringParameters = map[string][]string{"id": {"1", "2"}}
			ev.QueryStringParameters = map[string]string{"id": "2"}
		}, func(ev *events.APIGatewayProxyRequest) {
			ev.MultiValueQueryStringParameters = map[string][]string{"id": {"2", "1"}}
			ev.QueryStringParameters = map[string]string{"id": "1"}
		}},
		{"a JSON Patch then a JSON merge patch", func(ev *events.APIGatewayProxyRequest) {
			ev.Headers["Content-Type"] = "application/json-patch+json"
		}, func(ev *events.APIGatewayProxyRequest) {
			ev.MultiValueHeaders = map[string][]string{"Content-Type": {"application/merge-patch+json"}}
			ev.Headers["Content-Type"] = "application/merge-patch+json"
		}},
	}
	for _, c := range rest {
		t.Run("REST/"+c.name, func(t *testing.T) {
			e := newEnv(t, nil)
			runs := 0
			w := e.guard.REST(func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
				runs++
				return events.APIGatewayProxyResponse{StatusCode: 201, Body: fmt.Sprintf(`{"run":%d}`, runs)}, nil
			})
			send := func(mod func(*events.APIGatewayProxyRequest)) events.APIGatewayProxyResponse {
				ev := events.APIGatewayProxyRequest{HTTPMethod: "PATCH", Resource: "/docs/{id}", Path: "/docs/x",
					Headers: map[string]string{"Idempotency-Key": testKey, "Content-Type": "application/json"},
					Body:    `[{"op":"remove","path":"/a"}]`,
					RequestContext: events.APIGatewayProxyRequestContext{RequestID: randID(),
						Authorizer: map[string]any{"tenantId": testTenant}}}
				mod(&ev)
				out, err := w(context.Background(), ev)
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			first := send(c.a)
			second := send(c.b)
			if first.StatusCode != 201 || second.Headers[idem.HeaderOpenWOPReplay] == "true" || second.Body == first.Body {
				t.Fatalf("first %d %s; second %d %v %s (handler ran %d times); want the second run or refused", first.StatusCode, first.Body, second.StatusCode, second.Headers, second.Body, runs)
			}
		})
	}
}

// digestRecorder records the digest of every claim.
type digestRecorder struct {
	idem.Store
	digests []string
}

func (d *digestRecorder) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	d.digests = append(d.digests, rec.Digest)
	return d.Store.Claim(ctx, rec, now)
}

// TestBodyMediaTypeLeavesEveryOtherFingerprintAsItWas pins, to the values
// computed on the code before RED_TEAM 313, the fingerprints of the
// requests whose body's media type the fingerprint still does not carry:
// a JSON body sent as application/json (any case, any parameters), a body
// without a Content-Type, an empty body whatever its Content-Type, and any
// body on a route whose handler reads it as JSON whatever its type
// (Route.JSON). Their records, written before the change, replay after it.
func TestBodyMediaTypeLeavesEveryOtherFingerprintAsItWas(t *testing.T) {
	cases := []struct {
		name, contentType, body string
		json                    bool
		want                    string
	}{
		{"application/json", "application/json", `{"a":1}`, false, pinJSON},
		{"application/json in another case with a charset", "Application/JSON; charset=UTF-8", `{"a":1}`, false, pinJSON},
		{"no Content-Type", "", `a=1`, false, pinRaw},
		{"an empty body as text", "text/plain", ``, false, pinEmpty},
		{"an empty body without a Content-Type", "", ``, false, pinEmpty},
		{"text on a Route.JSON route", "text/plain", `{"a":1}`, true, pinJSON},
		{"a +json type on a Route.JSON route", "application/merge-patch+json", `{"a":1}`, true, pinJSON},
		// RED_TEAM 463 and 464 left these as they were.
		{"application/json with a quoted UTF-8 charset", `application/json; charset="utf-8"`, `{"a":1}`, false, pinJSON},
		{"no Content-Type, coded identity", "identity", `a=1`, false, pinRaw},
		{"no Content-Type, coded identity in another case", " Identity ,", `a=1`, false, pinRaw},
	}
	for _, c := range cases {
		coding := ""
		if c.contentType == "identity" || strings.HasPrefix(c.contentType, " Identity") {
			coding, c.contentType = c.contentType, "" // the case's Content-Encoding, sent without a Content-Type
		}
		t.Run(c.name, func(t *testing.T) {
			rec := &digestRecorder{}
			e := newEnv(t, func(cfg *idem.Config) {
				rec.Store = cfg.Store
				cfg.Store = rec
				cfg.Routes = map[string]idem.Route{"PATCH /docs/{id}": {JSON: c.json}}
			})
			ev := v2event(http.MethodPatch, "PATCH /docs/{id}", testKey, c.body)
			ev.PathParameters = map[string]string{"id": "d1"}
			withHeader("Content-Type", c.contentType)(&ev)
			withHeader("Content-Encoding", coding)(&ev)
			if r := e.call(&handler{}, ev); r.StatusCode != 201 {
				t.Fatalf("%d %s", r.StatusCode, r.Body)
			}
			if len(rec.digests) != 1 || rec.digests[0] != c.want {
				t.Fatalf("digests %q, want [%s]", rec.digests, c.want)
			}
		})
	}
}

// The fingerprints TestBodyMediaTypeLeavesEveryOtherFingerprintAsItWas pins.
const (
	pinJSON  = "request-sha256-v1:P_oGi8_1XPy3S4gxo8elf0Fy0OOCkEBMbgKF3srTswo"
	pinRaw   = "request-sha256-v1:6HkEflyn6untOY_TEMY8MkoDeJo45KTsCxtsWc1ZgO8"
	pinEmpty = "request-sha256-v1:k3pgJEtbWLaTvrd8wjyqQcBEh3aTu6XVuXKDhyaTz7k"
)

// TestOneKeyTwoMediaTypesNetHTTP is TestOneKeyTwoRequestsNeverShareAnAnswer's
// first case through the net/http middleware (RED_TEAM 313).
func TestOneKeyTwoMediaTypesNetHTTP(t *testing.T) {
	e := newEnv(t, func(cfg *idem.Config) {
		cfg.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true }
	})
	runs := 0
	mux := http.NewServeMux()
	mux.HandleFunc("PATCH /docs/{id}", func(w http.ResponseWriter, r *http.Request) {
		runs++
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"run":%d,"as":%q}`, runs, r.Header.Get("Content-Type"))
	})
	h := e.guard.Middleware(mux)
	send := func(ct string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("PATCH", "/docs/d1", strings.NewReader(`[{"op":"remove","path":"/a"}]`))
		r.Header.Set("Content-Type", ct)
		r.Header.Set(idem.HeaderKey, testKey)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	first := send("application/json-patch+json")
	second := send("application/merge-patch+json")
	if first.Code != 201 || second.Header().Get(idem.HeaderOpenWOPReplay) == "true" || second.Body.String() == first.Body.String() {
		t.Fatalf("first %d %s; second %d %v %s (handler ran %d times); want the second run or refused", first.Code, first.Body, second.Code, second.Header(), second.Body, runs)
	}
	if again := send("application/merge-patch+json; charset=utf-8"); again.Header().Get(idem.HeaderOpenWOPReplay) != "true" && again.Code != 409 {
		t.Fatalf("the merge patch again: %d %v %s", again.Code, again.Header(), again.Body)
	}
}

// TestMethodOverrideNeverSharesAnAnswer: a method-override middleware
// inside the Guard serves a POST as the method its X-HTTP-Method-Override
// (X-HTTP-Method, X-Method-Override) names. One key on a POST tunnelling
// DELETE and then on one tunnelling PUT, or on none, with the same body,
// is never answered the first one's answer; the same tunnelled request
// again is its replay. Failed before RED_TEAM 314: the PUT was answered
// the DELETE's 200, marked a replay, and never ran. The fingerprint of a
// request without such a header is unchanged (pinned), and a route that
// declares one among its fingerprint headers keeps it there once.
func TestMethodOverrideNeverSharesAnAnswer(t *testing.T) {
	for _, name := range []string{"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"} {
		t.Run(name, func(t *testing.T) {
			e, rec := httpDigestEnv(t, nil)
			runs := 0
			mux := http.NewServeMux()
			mux.HandleFunc("POST /docs/{id}", func(w http.ResponseWriter, r *http.Request) {
				runs++
				method := r.Method
				if m := r.Header.Get(name); m != "" {
					method = m
				}
				fmt.Fprintf(w, `{"run":%d,"served":%q}`, runs, method)
			})
			h := e.guard.Middleware(mux)
			send := func(override string) *httptest.ResponseRecorder {
				r := httptest.NewRequest("POST", "/docs/d1", strings.NewReader(`{"a":1}`))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set(idem.HeaderKey, testKey)
				if override != "" {
					r.Header.Set(name, override)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w
			}
			first := send("DELETE")
			if first.Code != 200 {
				t.Fatalf("first: %d %s", first.Code, first.Body)
			}
			if again := send("DELETE"); again.Header().Get(idem.HeaderOpenWOPReplay) != "true" || again.Body.String() != first.Body.String() {
				t.Fatalf("the same DELETE again: %d %v %s; want the replay", again.Code, again.Header(), again.Body)
			}
			for _, other := range []string{"PUT", ""} {
				if r := send(other); r.Header().Get(idem.HeaderOpenWOPReplay) == "true" || r.Body.String() == first.Body.String() {
					t.Fatalf("a POST tunnelling %q after one tunnelling DELETE: %d %v %s (handler ran %d times); want it run or refused", other, r.Code, r.Header(), r.Body, runs)
				}
			}
			if rec.digests[3] != pinOverrideNone {
				t.Fatalf("without an override header: digest %s, want %s (unchanged)", rec.digests[3], pinOverrideNone)
			}
		})
	}
}

// pinOverrideNone is the fingerprint of TestMethodOverrideNeverSharesAnAnswer's
// request without an override header, computed before RED_TEAM 314.
const pinOverrideNone = "request-sha256-v1:6rBA5Y9ippAen3nVfEAjWwHOImtLHeUieweA1InN9IM"

// TestDeclaredMethodOverrideKeepsItsFingerprint: a route that declares a
// method-override header among its fingerprint headers (Route.Headers)
// has it there once, as before RED_TEAM 314 (pinned).
func TestDeclaredMethodOverrideKeepsItsFingerprint(t *testing.T) {
	e, rec := httpDigestEnv(t, map[string]idem.Route{"POST /docs/{id}": {Headers: []string{"x-http-method-override"}}})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /docs/{id}", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "x") })
	r := httptest.NewRequest("POST", "/docs/d1", strings.NewReader(`{"a":1}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(idem.HeaderKey, testKey)
	r.Header.Set("X-HTTP-Method-Override", "DELETE")
	e.guard.Middleware(mux).ServeHTTP(httptest.NewRecorder(), r)
	if len(rec.digests) != 1 || rec.digests[0] != pinDeclaredOverride {
		t.Fatalf("digests %q, want [%s]", rec.digests, pinDeclaredOverride)
	}
}

const pinDeclaredOverride = "request-sha256-v1:ipFarbjnGKf02mf20Fvgb2fE7Rrkq0uYK0EuT4X_6hg"

// TestTemplateWithSomeOfItsValuesNeverSharesAnAnswer: a handler behind a
// catch-all route ($default, or a greedy "ANY /{proxy+}") that names its
// operation by a template and gives Params without every value the
// template names (or an empty Params, which replaces the greedy route's
// own) keeps the raw path in the fingerprint: shop 2's order 7 under the
// key of shop 1's order 7 is never answered shop 1's answer. With every
// value given, the values stand for the path, as before (the same order
// again is the replay). Failed before RED_TEAM 315: each case answered
// shop 1's 201 to shop 2, marked a replay.
func TestTemplateWithSomeOfItsValuesNeverSharesAnAnswer(t *testing.T) {
	const op = "POST /shops/{shop}/orders/{id:[0-9]{1,9}}"
	for _, c := range []struct {
		name, routeKey string
		params         func(shop string) map[string]string
	}{
		{"$default, one value of two", "$default", func(string) map[string]string { return map[string]string{"id": "7"} }},
		{"a greedy route, one value of two", "ANY /{proxy+}", func(string) map[string]string { return map[string]string{"id": "7"} }},
		{"a greedy route, an empty Params", "ANY /{proxy+}", func(string) map[string]string { return map[string]string{} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, nil)
			runs := 0
			call := func(shop string) events.APIGatewayV2HTTPResponse {
				path := "/shops/" + shop + "/orders/7"
				ev := v2event(http.MethodPost, c.routeKey, testKey, `{"qty":1}`)
				ev.RawPath, ev.RequestContext.HTTP.Path = path, path
				if c.routeKey != "$default" {
					ev.PathParameters = map[string]string{"proxy": path[1:]}
				}
				out, err := e.guard.Do(context.Background(), idem.Request{Event: ev, Operation: op, Params: c.params(shop)},
					func(context.Context) (events.APIGatewayV2HTTPResponse, error) {
						runs++
						return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: fmt.Sprintf(`{"shop":%q,"run":%d}`, shop, runs)}, nil
					})
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			first := call("1")
			if again := call("1"); first.StatusCode != 201 || again.Headers[idem.HeaderOpenWOPReplay] != "true" || again.Body != first.Body {
				t.Fatalf("the same order again: %d %v %s; want the replay of %d %s", again.StatusCode, again.Headers, again.Body, first.StatusCode, first.Body)
			}
			if other := call("2"); other.Headers[idem.HeaderOpenWOPReplay] == "true" || other.Body == first.Body {
				t.Fatalf("shop 2's order under shop 1's key: %d %v %s (handler ran %d times); want it run or refused", other.StatusCode, other.Headers, other.Body, runs)
			}
		})
	}
	// Every value given: the values stand for the path.
	e := newEnv(t, nil)
	for i, path := range []string{"/shops/1/orders/7", "/v2/shops/1/orders/7"} {
		ev := v2event(http.MethodPost, "$default", testKey, `{"qty":1}`)
		ev.RawPath, ev.RequestContext.HTTP.Path = path, path
		out, _ := e.guard.Do(context.Background(), idem.Request{Event: ev, Operation: op, Params: map[string]string{"shop": "1", "id": "7"}},
			func(context.Context) (events.APIGatewayV2HTTPResponse, error) {
				return events.APIGatewayV2HTTPResponse{StatusCode: 201, Body: path}, nil
			})
		if i == 1 && (out.Headers[idem.HeaderOpenWOPReplay] != "true" || out.Body != "/shops/1/orders/7") {
			t.Fatalf("every value given, another path: %d %v %s; want the replay (the values stand for the path)", out.StatusCode, out.Headers, out.Body)
		}
	}
}

// TestRoutedTemplateWithSomeOfItsValuesNeverSharesAnAnswer is
// TestTemplateWithSomeOfItsValuesNeverSharesAnAnswer for a Guard.Routed
// hook that returns some of its template's values (RED_TEAM 315).
func TestRoutedTemplateWithSomeOfItsValuesNeverSharesAnAnswer(t *testing.T) {
	e := newEnv(t, func(cfg *idem.Config) {
		cfg.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true }
	})
	runs := 0
	h := e.guard.Routed(func(r *http.Request) (string, map[string]string, bool) {
		return "POST /shops/:shop/orders/:id", map[string]string{"id": "7"}, true
	}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		fmt.Fprintf(w, `{"path":%q,"run":%d}`, r.URL.Path, runs)
	}))
	send := func(path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", path, strings.NewReader(`{"qty":1}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(idem.HeaderKey, testKey)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	first := send("/shops/1/orders/7")
	if again := send("/shops/1/orders/7"); again.Header().Get(idem.HeaderOpenWOPReplay) != "true" || again.Body.String() != first.Body.String() {
		t.Fatalf("the same order again: %d %v %s", again.Code, again.Header(), again.Body)
	}
	if other := send("/shops/2/orders/7"); other.Header().Get(idem.HeaderOpenWOPReplay) == "true" || other.Body.String() == first.Body.String() {
		t.Fatalf("shop 2's order under shop 1's key: %d %v %s (handler ran %d times); want it run or refused", other.Code, other.Header(), other.Body, runs)
	}
}

// TestOverrideNamingTheRequestsOwnMethodKeepsItsFingerprint: a POST whose
// method-override header names POST (in any case) is served as the POST it
// is, so its fingerprint is the one it had before RED_TEAM 314 (pinned):
// a client that always sends the header, its first try recorded before
// the upgrade, is replayed after it, not answered 409
// idempotency_key_mismatch (RED_TEAM 335).
func TestOverrideNamingTheRequestsOwnMethodKeepsItsFingerprint(t *testing.T) {
	for _, name := range []string{"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"} {
		for _, value := range []string{"POST", "post"} {
			t.Run(name+" "+value, func(t *testing.T) {
				e, rec := httpDigestEnv(t, nil)
				mux := http.NewServeMux()
				mux.HandleFunc("POST /docs/{id}", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "x") })
				r := httptest.NewRequest("POST", "/docs/d1", strings.NewReader(`{"a":1}`))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set(idem.HeaderKey, testKey)
				r.Header.Set(name, value)
				e.guard.Middleware(mux).ServeHTTP(httptest.NewRecorder(), r)
				if len(rec.digests) != 1 || rec.digests[0] != pinOverrideNone {
					t.Fatalf("digests %q, want [%s] (the POST's without the header)", rec.digests, pinOverrideNone)
				}
			})
		}
	}
}

// TestFingerprintsWithAMediaTypeOrAnOverrideArePinned pins, to the values
// the code of RED_TEAM 313 and 314 wrote, the fingerprints that carry a
// body's media type or a method-override header (a text body under two
// overrides of one header, and a form tunnelling PUT through the HTTP
// API), so that records written since replay whatever form the code that
// builds them takes (RED_TEAM 334, 495 rewrote it).
func TestFingerprintsWithAMediaTypeOrAnOverrideArePinned(t *testing.T) {
	e, rec := httpDigestEnv(t, nil)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /docs/{id}", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "x") })
	for i, hs := range [][]string{{"X-HTTP-Method-Override", "DELETE"}, {"X-Method-Override", "PUT", "X-HTTP-Method", "patch"}} {
		r := httptest.NewRequest("POST", "/docs/d1", strings.NewReader(`{"a":1}`))
		r.Header.Set("Content-Type", "text/plain; charset=UTF-8")
		r.Header.Set(idem.HeaderKey, testKey+fmt.Sprint(i))
		for j := 0; j < len(hs); j += 2 {
			r.Header.Add(hs[j], hs[j+1])
		}
		r.Header.Add("X-Method-Override", "GET")
		e.guard.Middleware(mux).ServeHTTP(httptest.NewRecorder(), r)
	}
	ev := v2event("POST", "POST /runs", testKey, `a=1`)
	ev.Headers["content-type"] = "application/x-www-form-urlencoded"
	ev.Headers["x-http-method-override"] = "PUT"
	if r := e.call(&handler{}, ev); r.StatusCode != 201 {
		t.Fatalf("the form: %d %s", r.StatusCode, r.Body)
	}
	want := []string{
		"request-sha256-v1:-qDknfv0aD76OL46B8LPYy-xYcEUGs_07QeSbpc4ua0",
		"request-sha256-v1:YEo4RIegCOddH7dp_lcFgtrER-HC34Yzl1Sl90Z_jA0",
		"request-sha256-v1:onf3okIW2SDffvR5GxMpwekUl-SWxBL5oh6ZPqBw4kQ",
	}
	if !slices.Equal(rec.digests, want) {
		t.Fatalf("digests %q, want %q", rec.digests, want)
	}
}

// httpDigestEnv is an environment for the net/http middleware (the tenant
// testTenant) with routes, recording the digest of every claim.
func httpDigestEnv(t *testing.T, routes map[string]idem.Route) (*env, *digestRecorder) {
	t.Helper()
	rec := &digestRecorder{}
	e := newEnv(t, func(cfg *idem.Config) {
		cfg.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true }
		cfg.Routes = routes
		rec.Store = cfg.Store
		cfg.Store = rec
	})
	return e, rec
}

// TestOneKeyCodingsAndCharsetsNetHTTP is RED_TEAM 463 and 464 through the
// net/http middleware: the same bytes sent gzip-coded and then uncoded,
// and the same JSON bytes labelled UTF-8 and then Latin-1, are two
// requests; each sent again is its replay.
func TestOneKeyCodingsAndCharsetsNetHTTP(t *testing.T) {
	e := newEnv(t, func(cfg *idem.Config) {
		cfg.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true }
	})
	runs := 0
	mux := http.NewServeMux()
	mux.HandleFunc("PATCH /docs/{id}", func(w http.ResponseWriter, r *http.Request) {
		runs++
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"run":%d}`, runs)
	})
	h := e.guard.Middleware(mux)
	send := func(key, ct, coding, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("PATCH", "/docs/d1", strings.NewReader(body))
		r.Header.Set("Content-Type", ct)
		if coding != "" {
			r.Header.Set("Content-Encoding", coding)
		}
		r.Header.Set(idem.HeaderKey, key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	gz := string(encodeBody(t, "gzip", "a=1"))
	for _, c := range []struct{ name, key, ct1, c1, ct2, c2, body string }{
		{"gzip-coded then uncoded", testKey + "gz", "application/octet-stream", "gzip", "application/octet-stream", "", gz},
		{"JSON labelled UTF-8 then Latin-1", testKey + "cs", "application/json; charset=utf-8", "", "application/json; charset=iso-8859-1", "", "{\"a\":\"caf\u00e9\"}"},
	} {
		first := send(c.key, c.ct1, c.c1, c.body)
		second := send(c.key, c.ct2, c.c2, c.body)
		if first.Code != 201 || second.Header().Get(idem.HeaderOpenWOPReplay) == "true" || second.Body.String() == first.Body.String() {
			t.Fatalf("%s: first %d %s; second %d %v %s; want the second run or refused", c.name, first.Code, first.Body, second.Code, second.Header(), second.Body)
		}
		if again := send(c.key, c.ct1, c.c1, c.body); again.Header().Get(idem.HeaderOpenWOPReplay) != "true" || again.Body.String() != first.Body.String() {
			t.Fatalf("%s: the first request again: %d %v %s, want its replay", c.name, again.Code, again.Header(), again.Body)
		}
	}
}
