package idem_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// TestERPOriginalRequestIDAfterATakeover: under the ERP policy every
// answer of a key names one Idempotency-Original-Request-Id, the request
// that first claimed it: the first request's own (its current id), and,
// once a retry took over after a retryable failure, the takeover's answer
// (not a replay: Idempotency-Replayed false) and every replay of it name
// the first claim, from which the claim's run id derives
// (idem.ClaimInfo.OriginalRequestID); X-Request-Id is always the current
// attempt's.
func TestERPOriginalRequestIDAfterATakeover(t *testing.T) {
	e := newEnv(t, func(cfg *idem.Config) { cfg.Policy = erp.Policy; cfg.Tenant = idem.SingleTenant("t") })
	var runs atomic.Int32
	var origs []string
	h := e.guard.Handle("POST /runs", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := idem.FromContext(r.Context())
		origs = append(origs, c.OriginalRequestID)
		if runs.Add(1) == 1 {
			w.WriteHeader(503)
			return
		}
		w.WriteHeader(201)
		_, _ = io.WriteString(w, `{"id":"r-1"}`)
	}))
	send := func(id string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/runs", strings.NewReader(`{"a":1}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", testKey)
		req.Header.Set("X-Request-Id", id)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	for _, c := range []struct {
		id     string
		status int
		replay string
	}{{"req-1", 503, "false"}, {"req-2", 201, "false"}, {"req-3", 201, "true"}} {
		w := send(c.id)
		if w.Code != c.status || w.Header().Get(erp.HeaderReplayed) != c.replay || w.Header().Get(erp.HeaderRequestID) != c.id ||
			w.Header().Get(erp.HeaderOriginalRequestID) != "req-1" {
			t.Fatalf("%s: %d %v, want %d, replayed %s, original req-1", c.id, w.Code, w.Header(), c.status, c.replay)
		}
	}
	if len(origs) != 2 || origs[0] != "req-1" || origs[1] != "req-1" {
		t.Fatalf("the handler's claims named %v, want req-1 both times", origs)
	}
}
