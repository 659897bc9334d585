package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/idemkit/idemkit/idem"
)

// newMux serves POST /orders with net/http. guard.Middleware wraps the whole mux: the
// pattern a request is routed to ("POST /orders") is the operation that scopes its key.
func newMux(guard *idem.Guard) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Item string `json:"item"`
			Qty  int    `json:"qty"`
		}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Item == "" || in.Qty < 1 {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"validation_error","message":"item and qty >= 1 are required"}`)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"orderId": fmt.Sprintf("ord_%d", time.Now().UnixNano()), "item": in.Item, "qty": in.Qty})
	})
	guarded := guard.Middleware(mux)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" { // no route: unguarded, its 404 or 405 an envelope
			w = envelope{w}
		}
		guarded.ServeHTTP(w, r)
	})
}

// envelope writes the ServeMux's own 404 or 405 (its Allow header kept) as the error envelope.
type envelope struct{ http.ResponseWriter }

func (e envelope) WriteHeader(status int) {
	code, message := "not_found", "no route serves this path"
	if status == http.StatusMethodNotAllowed { // a vendor code: the error registry has no 405 row
		code, message = "idemkit.method_not_allowed", "method not allowed; allowed: "+e.Header().Get("Allow")
	}
	e.Header().Set("Content-Type", "application/json")
	e.ResponseWriter.WriteHeader(status)
	fmt.Fprintf(e.ResponseWriter, `{"error":%q,"message":%q}`, code, message)
}

func (envelope) Write(p []byte) (int, error) { return len(p), nil } // net/http's text, dropped
