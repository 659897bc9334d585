package idem_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
)

// Middleware around a whole ServeMux: each request's operation is the
// pattern the mux routes it to, so one wrap guards every route.
func ExampleGuard_Middleware() {
	guard, err := idem.New(idem.Config{
		Store:  memstore.New(), // dynamostore.New(...) in production
		Tenant: idem.SingleTenant("orders-service"),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	payments := 0
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders/{id}/pay", func(w http.ResponseWriter, r *http.Request) {
		payments++
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":%q,"payment":%d}`, r.PathValue("id"), payments)
	})
	srv := httptest.NewServer(guard.Middleware(mux)) // http.ListenAndServe(addr, guard.Middleware(mux))
	defer srv.Close()

	pay := func() {
		req, _ := http.NewRequest("POST", srv.URL+"/orders/42/pay", strings.NewReader(`{"amount":5}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "0b7c3f6e-5a1d-4c2e-9f8a-1d2e3f4a5b6c")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.StatusCode, string(body), "replay:", resp.Header.Get("OpenWOP-Idempotent-Replay") == "true")
	}
	pay()
	pay() // a retry: replayed, the handler does not run again
	fmt.Println("payments:", payments)
	// Output:
	// 201 {"order":"42","payment":1} replay: false
	// 201 {"order":"42","payment":1} replay: true
	// payments: 1
}
