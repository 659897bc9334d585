package idemchi_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/idemkit/idemkit/idem/internal/routertest"
	"github.com/idemkit/idemkit/idem/router/idemchi"
)

// TestRewrittenPathIsInTheFingerprint: behind chi's URLFormat, which
// routes /orders/1.json and /orders/1.xml by /orders/{id} and hands the
// handler the format, one key on the two is two requests (409
// idempotency_key_mismatch, the handler run once), never the JSON answer
// replayed to the XML request; the same URL again is the replay. Given
// to the top router or to a mounted sub-router, before or after the
// mount's own rewrite. Before, the fingerprint held the route's
// parameters alone, and the XML request was answered the JSON.
func TestRewrittenPathIsInTheFingerprint(t *testing.T) {
	var runs atomic.Int32
	handler := func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		format, _ := r.Context().Value(middleware.URLFormatCtxKey).(string)
		w.WriteHeader(201)
		if format == "xml" {
			fmt.Fprintf(w, `<order id=%q/>`, chi.URLParam(r, "id"))
			return
		}
		fmt.Fprintf(w, `{"order":%q}`, chi.URLParam(r, "id"))
	}
	for _, wiring := range []string{"Top", "Sub", "TopRewriteSubGuard"} {
		t.Run(wiring, func(t *testing.T) {
			runs.Store(0)
			g := routertest.Guard(t, nil)
			r := chi.NewRouter()
			base := "/orders/"
			switch wiring {
			case "Top":
				r.Use(middleware.URLFormat, idemchi.Middleware(g, r))
				r.Post("/orders/{id}", handler)
			case "Sub":
				base = "/api/orders/"
				r.Route("/api", func(sr chi.Router) {
					sr.Use(middleware.URLFormat, idemchi.Middleware(g, sr))
					sr.Post("/orders/{id}", handler)
				})
			default:
				base = "/api/orders/"
				r.Use(middleware.URLFormat)
				r.Route("/api", func(sr chi.Router) {
					sr.Use(idemchi.Middleware(g, sr))
					sr.Post("/orders/{id}", handler)
				})
			}
			json := routertest.Post(r, base+"1.json", key, `{"qty":1}`)
			if json.Code != 201 || json.Body.String() != `{"order":"1"}` {
				t.Fatalf("first: %d %s", json.Code, json.Body)
			}
			if again := routertest.Post(r, base+"1.json", key, `{"qty":1}`); again.Body.String() != json.Body.String() || runs.Load() != 1 {
				t.Fatalf("same URL again: %d %s, runs %d; want the replay", again.Code, again.Body, runs.Load())
			}
			xml := routertest.Post(r, base+"1.xml", key, `{"qty":1}`)
			if xml.Code != 409 || !strings.Contains(xml.Body.String(), "idempotency_key_mismatch") || runs.Load() != 1 {
				t.Fatalf("the XML request under the JSON one's key: %d %s, runs %d; want 409 idempotency_key_mismatch", xml.Code, xml.Body, runs.Load())
			}
		})
	}
}
