package idem_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// maxRequestIDLen is the longest caller's id taken (idem/http.go).
const maxRequestIDLen = 128

// Behind net/http the current attempt's id is the caller's X-Request-Id
// when it is one: 1..128 visible ASCII characters.
// Anything else (longer, blank, with spaces or control characters) is not
// used: a new id is minted, so a caller's header can never make the record
// too large to store (a 400 KB id made the completion fail and every retry
// after the lease run the handler again) nor put control characters into
// the answer's headers and envelope.
func TestClientRequestIDIsUsedOnlyWhenItIsOne(t *testing.T) {
	g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("acme"), Policy: erp.Policy, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	h := g.Handle("POST /orders", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(201)
		_, _ = io.WriteString(w, `{"order":"o-1"}`)
	}))
	ok := strings.Repeat("r", maxRequestIDLen)
	for _, c := range []struct {
		name, id string
		used     bool
	}{
		{"short", "req-1234", true},
		{"at the limit", ok, true},
		{"one over", ok + "r", false},
		{"400 KB", strings.Repeat("r", 400<<10), false},
		{"inner space", "req 1", false},
		{"control character", "req\x01", false},
		{"non-ASCII", "réq", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/orders", strings.NewReader(`{"a":1}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "key-"+strings.ReplaceAll(c.name, " ", "-")+"-0001")
			req.Header.Set("X-Request-Id", c.id)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			got := w.Header().Get("X-Request-Id")
			if w.Code != 201 || got == "" || len(got) > maxRequestIDLen {
				t.Fatalf("%d, X-Request-Id %.40q (%d bytes)", w.Code, got, len(got))
			}
			if used := got == c.id; used != c.used {
				t.Fatalf("the caller's id used: %t, want %t (answer's id %.40q)", used, c.used, got)
			}
		})
	}
}
