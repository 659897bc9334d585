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
	return guard.Middleware(mux)
}
