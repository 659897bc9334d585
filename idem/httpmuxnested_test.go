package idem_test

import (
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
)

// A ServeMux wrapped by the middleware and mounted on an outer ServeMux
// under a subtree ("/api/", with or without http.StripPrefix) routes each
// request to its own pattern: the operation is that pattern, as with the
// middleware around the top mux, not the outer mount's "/api/" (which the
// request carries as its Request.Pattern). The same key on another of the
// inner mux's patterns is a request of its own, and Config.Routes keyed by
// the inner patterns applies.
func TestMiddlewareAroundAMountedServeMuxResolvesItsPattern(t *testing.T) {
	for _, strip := range []bool{false, true} {
		var orders, refunds, audits atomic.Int32
		prefix := "/api"
		if strip {
			prefix = ""
		}
		sub := http.NewServeMux()
		sub.HandleFunc("POST "+prefix+"/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
			orders.Add(1)
			w.WriteHeader(201)
			_, _ = w.Write([]byte(`{"order":"` + r.PathValue("id") + `"}`))
		})
		sub.HandleFunc("POST "+prefix+"/refunds", func(w http.ResponseWriter, r *http.Request) {
			refunds.Add(1)
			w.WriteHeader(202)
		})
		sub.HandleFunc("POST "+prefix+"/audit/{id}", func(w http.ResponseWriter, r *http.Request) {
			audits.Add(1)
			w.WriteHeader(200)
		})
		g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("acme"), Logger: discardLogger(),
			Routes: map[string]idem.Route{"POST " + prefix + "/audit/{id}": {Skip: true}}})
		if err != nil {
			t.Fatal(err)
		}
		var inner http.Handler = g.Middleware(sub)
		if strip {
			inner = http.StripPrefix("/api", inner)
		}
		root := http.NewServeMux()
		root.Handle("/api/", inner)

		first := post(root, "/api/orders/7", testKey, `{"amount":5}`)
		retry := post(root, "/api/orders/7", testKey, `{"amount":5}`)
		if first.Code != 201 || retry.Code != 201 || retry.Body.String() != first.Body.String() || orders.Load() != 1 {
			t.Fatalf("strip=%v: %d %s then %d %s, runs %d: want one run and its replay", strip, first.Code, first.Body, retry.Code, retry.Body, orders.Load())
		}
		if refund := post(root, "/api/refunds", testKey, `{"amount":5}`); refund.Code != 202 || refunds.Load() != 1 {
			t.Fatalf("strip=%v: the same key on another operation: %d %s, want its own run", strip, refund.Code, refund.Body)
		}
		post(root, "/api/audit/1", testKey+"a", `{}`)
		post(root, "/api/audit/1", testKey+"a", `{}`)
		if n := audits.Load(); n != 2 {
			t.Fatalf("strip=%v: the route Config.Routes skips ran %d times, want 2", strip, n)
		}
	}
}

// A route of the mounted mux whose key Config.Routes derives from the body
// is guarded by it: a webhook delivered twice runs once.
func TestMountedServeMuxDerivedRouteRunsOnce(t *testing.T) {
	var runs atomic.Int32
	sub := http.NewServeMux()
	sub.HandleFunc("POST /hooks/orders", func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(201)
	})
	g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("acme"), Logger: discardLogger(),
		Policy: derivedPolicy(), Routes: map[string]idem.Route{"POST /hooks/orders": {DeriveKey: orderIDKey}}})
	if err != nil {
		t.Fatal(err)
	}
	root := http.NewServeMux()
	root.Handle("/hooks/", g.Middleware(sub))
	a, b := post(root, "/hooks/orders", "", `{"orderId":"ord-1"}`), post(root, "/hooks/orders", "", `{"orderId":"ord-1"}`)
	if a.Code != 201 || b.Code != 201 || runs.Load() != 1 {
		t.Fatalf("%d then %d, runs %d: the delivery was run twice", a.Code, b.Code, runs.Load())
	}
}

// TestMiddlewareAroundStripPrefixNeverSharesAnAnswer: wrapped around
// http.StripPrefix (the order the docs advise against), the middleware has
// no mux to ask and every route's operation is the mount's ("/api/", or
// the name Handle gives it): two paths under the mount are still two
// requests, since a subtree pattern (or none) leaves the whole path in the
// fingerprint. The same key on the second path is 409, never the first
// one's answer.
func TestMiddlewareAroundStripPrefixNeverSharesAnAnswer(t *testing.T) {
	for _, mount := range []string{"/api/", "POST /api/", "/api/{rest...}", "Handle"} {
		var runs atomic.Int32
		sub := http.NewServeMux()
		sub.HandleFunc("POST /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			w.WriteHeader(201)
			_, _ = w.Write([]byte(`{"order":"` + r.PathValue("id") + `"}`))
		})
		g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("acme"), Logger: discardLogger()})
		if err != nil {
			t.Fatal(err)
		}
		root := http.NewServeMux()
		if mount == "Handle" {
			root.Handle("/api/", g.Handle("POST /api", http.StripPrefix("/api", sub)))
		} else {
			root.Handle(mount, g.Middleware(http.StripPrefix("/api", sub)))
		}
		if first := post(root, "/api/orders/1", testKey, `{"amount":5}`); first.Code != 201 {
			t.Fatalf("%s: first %d %s", mount, first.Code, first.Body)
		}
		if other := post(root, "/api/orders/2", testKey, `{"amount":5}`); other.Code != 409 || runs.Load() != 1 {
			t.Fatalf("%s: /api/orders/2 under /api/orders/1's key: %d %s (runs %d), want 409", mount, other.Code, other.Body, runs.Load())
		}
	}
}
