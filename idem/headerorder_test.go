package idem_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem"
)

// TestReplayKeepsTheOrderOfValuesUnderNamesOfTwoCases: a net/http handler
// that sets one header under two spellings of its name (the map's
// canonical key and a lower-case one, as code writing to the map directly
// does) sends both on the wire, in the order net/http writes a header map:
// by name, byte-wise. The recorded answer keeps them under the canonical
// name, so its replay must carry the values in that same order, every
// time: the first answer's, byte for byte. Forty such headers, each
// with its values in two orders a replay could take, make a replay that
// orders them by chance fail all but once in 2^40.
func TestReplayKeepsTheOrderOfValuesUnderNamesOfTwoCases(t *testing.T) {
	e := newEnv(t, func(c *idem.Config) {
		c.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true }
	})
	calls := 0
	mux := http.NewServeMux()
	mux.Handle("POST /orders", e.guard.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		_, _ = io.ReadAll(r.Body)
		for i := range 40 {
			name := fmt.Sprintf("X-Part-%02d", i)
			w.Header()[name] = []string{"canonical"}
			w.Header()[strings.ToLower(name)] = []string{"lower"}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		_, _ = io.WriteString(w, `{"ok":true}`)
	})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	post := func() http.Header {
		req, _ := http.NewRequest("POST", srv.URL+"/orders", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 201 {
			t.Fatalf("status %d: %s\n%s", resp.StatusCode, b, e.logs.String())
		}
		return resp.Header
	}
	first := post()
	for range 3 {
		again := post()
		if again.Get(idem.HeaderOpenWOPReplay) != "true" {
			t.Fatalf("no replay: %v", again)
		}
		for i := range 40 {
			name := fmt.Sprintf("X-Part-%02d", i)
			if got, want := strings.Join(again.Values(name), ","), strings.Join(first.Values(name), ","); got != want {
				t.Fatalf("%s: replayed %q, first answer %q", name, got, want)
			}
		}
	}
	if calls != 1 {
		t.Fatalf("the handler ran %d times", calls)
	}
}
