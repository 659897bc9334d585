package idem_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// A handler's own 499 ("client closed request": the answer grpc-gateway
// writes for a call cancelled because its client hung up, and the status
// the Guard answers a hang-up with) says the request was cut short, its
// outcome unknown: it is never a final answer. It was kept and replayed,
// under every policy, to every retry of the key, and the work never ran
// again (RED_TEAM 430). It is released as a 5xx is: the next request with
// the key runs. The policies decide it (Policy.Cache): each preset
// releases it.
func TestHandlersOwn499IsNeverReplayed(t *testing.T) {
	for _, p := range []idem.Policy{idem.PolicyOpenWOP, commerce.Policy, erp.Policy} {
		t.Run(p.Name, func(t *testing.T) {
			if d := p.Cache(idem.StatusClientClosed, ""); d != idem.Retry {
				t.Errorf("Cache(499) = %v, want Retry", d)
			}
			if d := p.Cache(idem.StatusClientClosed, idem.CodeClientClosed); d != idem.Retry {
				t.Errorf("Cache(499 %s) = %v, want Retry", idem.CodeClientClosed, d)
			}
			e := newEnv(t, func(c *idem.Config) {
				c.Policy = p
				c.Tenant = idem.SingleTenant(testTenant)
				c.HTTPTenant = func(*http.Request) (string, bool) { return testTenant, true }
				c.HTTPCredential = func(_ *http.Request, name string) string { return name + "-a" }
			})
			calls := 0
			h := e.guard.Handle("POST /runs", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls++
				if calls == 1 {
					// As grpc-gateway's error handler answers codes.Canceled.
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(499)
					_, _ = w.Write([]byte(`{"code":1,"message":"context canceled"}`))
					return
				}
				w.WriteHeader(201)
				_, _ = w.Write([]byte(`{"id":"r-1"}`))
			}))
			checkFirstAnswerNotKept(t, h, "/runs", 499, &calls)
		})
	}
}

// checkFirstAnswerNotKept sends three keyed POSTs of one body to path
// through h, whose handler counts its runs in calls: the first must be
// the handler's own first answer, status first; the second, the handler
// run again answering 201; the third, that 201 replayed without a run.
func checkFirstAnswerNotKept(t *testing.T, h http.Handler, path string, first int, calls *int) {
	t.Helper()
	send := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, strings.NewReader(`{"a":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", testKey)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	if w := send(); w.Code != first {
		t.Fatalf("first: %d %s, want the handler's %d", w.Code, w.Body, first)
	}
	if w := send(); w.Code != 201 || *calls != 2 {
		t.Fatalf("retry: %d %s, handler ran %d times; want a second run answering 201", w.Code, w.Body, *calls)
	}
	if w := send(); w.Code != 201 || *calls != 2 {
		t.Fatalf("second retry: %d %s, handler ran %d times; want the 201 replayed", w.Code, w.Body, *calls)
	}
}
