package client_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/idemkit/client"
)

// A checkout: the first attempt meets a 503, the client retries with the same
// key and body, and the server creates one order. A second process retrying
// the same cart sends the same derived key and gets the order replayed.
func Example() {
	srv := httptest.NewServer(orders())
	defer srv.Close()

	c, err := client.New(client.Config{BaseDelay: time.Millisecond})
	if err != nil {
		panic(err)
	}
	// The key is derived from the business event, so every process that
	// retries this checkout sends the same one.
	ctx := client.WithKey(context.Background(), client.DeriveKey("checkout", "cart_8813"))
	for range 2 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/orders", strings.NewReader(`{"cart":"cart_8813"}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := c.Do(req)
		if err != nil {
			panic(err) // errors.As(err, new(*client.Error)) gives the key and attempts
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %s attempts=%d replayed=%v\n", resp.StatusCode, body, resp.Attempts, resp.Replayed)
	}
	// Output:
	// 201 {"orderId":"ord-1"} attempts=2 replayed=false
	// 201 {"orderId":"ord-1"} attempts=1 replayed=true
}

// orders is a toy Layer-1 server: it is unavailable once, then creates an
// order per idempotency key and replays it to any repeat of that key.
func orders() http.Handler {
	var (
		mu      sync.Mutex
		failed  bool
		created = map[string]string{}
	)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if !failed {
			failed = true
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		body, ok := created[key]
		if ok {
			w.Header().Set("OpenWOP-Idempotent-Replay", "true")
		} else {
			body = fmt.Sprintf(`{"orderId":"ord-%d"}`, len(created)+1)
			created[key] = body
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, body)
	})
}

// A plain *http.Client can use the Transport directly; WithResult collects
// the outcome of a call.
func ExampleTransport() {
	srv := httptest.NewServer(orders())
	defer srv.Close()

	hc := &http.Client{Transport: &client.Transport{Config: client.Config{BaseDelay: time.Millisecond}}}
	var res client.Result
	req, _ := http.NewRequestWithContext(client.WithResult(context.Background(), &res),
		http.MethodPost, srv.URL+"/orders", strings.NewReader(`{"cart":"cart_1"}`))
	resp, err := hc.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, res.Attempts, res.Replayed, len(res.Key))
	// Output:
	// 201 2 false 36
}
