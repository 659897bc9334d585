package idem_test

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
)

// TestSameGuardWiredTwiceRunsUnderOneClaim: one Guard wired twice on a
// route (around the ServeMux and on the route's handler; an engine's and a
// group's middleware) sees the request's one claim twice. The inner wiring
// runs the handler under the outer one's claim, which records the answer:
// the handler runs once and its retry is a replay. Before, the inner
// wiring waited on the outer's claim, answered 409 idempotency_in_flight
// when its wait ended, and the outer recorded that 409 as the handler's
// answer: the handler never ran, and every retry of the key was that 409.
func TestSameGuardWiredTwiceRunsUnderOneClaim(t *testing.T) {
	g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("acme"), Logger: discardLogger(),
		Wait: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	mux := http.NewServeMux()
	mux.Handle("POST /orders", g.Handle("POST /orders", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, claimed := idem.FromContext(r.Context())
		n := runs.Add(1)
		w.WriteHeader(201)
		_, _ = w.Write([]byte(`{"run":` + strconv.Itoa(int(n)) + `,"claimed":` + strconv.FormatBool(claimed) + `}`))
	})))
	h := g.Middleware(mux)
	first := post(h, "/orders", testKey, `{"a":1}`)
	if first.Code != 201 || first.Body.String() != `{"run":1,"claimed":true}` {
		t.Fatalf("first: %d %s", first.Code, first.Body)
	}
	retry := post(h, "/orders", testKey, `{"a":1}`)
	if retry.Code != 201 || retry.Body.String() != first.Body.String() || retry.Header().Get("OpenWOP-Idempotent-Replay") != "true" || runs.Load() != 1 {
		t.Fatalf("retry: %d %v %s (runs %d)", retry.Code, retry.Header(), retry.Body, runs.Load())
	}
}

// TestTwoGuardsWiredAroundOneHandlerRunUnderOneClaim: two Guards (one on
// the server, another on the route or a group), each built from the same
// configuration, see one request under the same scope. The inner one runs
// the handler under the outer one's claim, whichever Guard made it, as one
// Guard wired twice does: the handler runs once, with a claim, and its
// retry is a replay. Before, on one store (one table), the inner Guard
// found the outer's claim pending, answered 409 idempotency_in_flight, and
// the outer recorded that 409 as the handler's answer: the handler never
// ran, and every retry of the key was that 409. Guards on two stores were
// not burned, and are not now.
func TestTwoGuardsWiredAroundOneHandlerRunUnderOneClaim(t *testing.T) {
	shared := memstore.New()
	for _, c := range []struct {
		name         string
		outer, inner idem.Store
	}{
		{"one store", shared, shared},
		{"two stores", memstore.New(), memstore.New()},
	} {
		t.Run(c.name, func(t *testing.T) {
			guard := func(s idem.Store) *idem.Guard {
				g, err := idem.New(idem.Config{Store: s, Tenant: idem.SingleTenant("acme"), Logger: discardLogger(),
					Wait: 200 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				return g
			}
			outer, inner := guard(c.outer), guard(c.inner)
			var runs atomic.Int32
			mux := http.NewServeMux()
			mux.Handle("POST /orders", inner.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, claimed := idem.FromContext(r.Context())
				n := runs.Add(1)
				w.WriteHeader(201)
				_, _ = w.Write([]byte(`{"run":` + strconv.Itoa(int(n)) + `,"claimed":` + strconv.FormatBool(claimed) + `}`))
			})))
			h := outer.Middleware(mux)
			first := post(h, "/orders", testKey+"x", `{"a":1}`)
			if first.Code != 201 || first.Body.String() != `{"run":1,"claimed":true}` {
				t.Fatalf("first: %d %s", first.Code, first.Body)
			}
			retry := post(h, "/orders", testKey+"x", `{"a":1}`)
			if retry.Code != 201 || retry.Body.String() != first.Body.String() || retry.Header().Get("OpenWOP-Idempotent-Replay") != "true" || runs.Load() != 1 {
				t.Fatalf("retry: %d %v %s (runs %d)", retry.Code, retry.Header(), retry.Body, runs.Load())
			}
		})
	}
}
