package idem_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
)

// TestDeclaredHostHeaderBehindNetHTTP: Route.Headers naming Host puts the
// host the request was sent to in the fingerprint behind the net/http
// middleware too, where Go's server moves the Host header out of
// Request.Header into Request.Host. It is the wiring for two applications
// one Guard serves behind a host switch of the program's own (a ServeMux
// or chi router for each host, chi's RouteHeaders on Host): their routes
// of one pattern have one operation, and the declaration tells them
// apart. Before, the declared Host read as absent, and the same key and
// body sent to b after a was answered with a's recorded response.
func TestDeclaredHostHeaderBehindNetHTTP(t *testing.T) {
	g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("acme"), Logger: discardLogger(),
		Routes: map[string]idem.Route{"POST /orders": {Headers: []string{"Host"}}}})
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	apps := map[string]http.Handler{}
	for _, host := range []string{"a.example.com", "b.example.com"} {
		mux := http.NewServeMux()
		mux.HandleFunc("POST /orders", func(w http.ResponseWriter, _ *http.Request) {
			runs[host]++
			w.WriteHeader(201)
			_, _ = w.Write([]byte(`{"host":"` + host + `"}`))
		})
		apps[host] = g.Middleware(mux)
	}
	hostSwitch := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { apps[r.Host].ServeHTTP(w, r) })
	send := func(host string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "http://"+host+"/orders", strings.NewReader(`{"qty":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(idem.HeaderKey, testKey)
		w := httptest.NewRecorder()
		hostSwitch.ServeHTTP(w, req)
		return w
	}
	for range 2 {
		if a := send("a.example.com"); a.Code != 201 || a.Body.String() != `{"host":"a.example.com"}` || runs["a.example.com"] != 1 {
			t.Fatalf("a: %d %s (runs %v)", a.Code, a.Body, runs)
		}
	}
	if b := send("b.example.com"); b.Code != 409 || runs["b.example.com"] != 0 {
		t.Fatalf("b under a's key: %d %s (runs %v), want 409", b.Code, b.Body, runs)
	}
}
