package dynamostore_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/idem/policy/erp"
	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// A caller's X-Request-Id of hundreds of kilobytes (net/http takes headers
// up to 1 MB) is not stored as the attempt's id. Stored, it made the claim
// too large for an item (a 500 on every try) or, just under that, the
// completion too large (under the ERP policy, which adds the raw body's
// hash), so that the record stayed pending and every retry after the lease
// ran the handler again. Under each policy the request is answered 201,
// recorded, and replayed to a retry with the handler run once.
func TestLongClientRequestIDRunsOnce(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		for _, p := range []idem.Policy{idem.PolicyOpenWOP, erp.Policy} {
			for _, n := range []int{409_180, 430 << 10} {
				var runs atomic.Int32
				clk := clock.NewManual(time.Now())
				g, err := idem.New(idem.Config{Store: v.s, Tenant: idem.SingleTenant("acme"), Policy: p,
					Test:   idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: clk.Now}},
					Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
				if err != nil {
					t.Fatal(err)
				}
				h := g.Handle("POST /orders", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					runs.Add(1)
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(201)
					_, _ = io.WriteString(w, `{"order":"o-1"}`)
				}))
				key := newKey()
				send := func(rid string) *httptest.ResponseRecorder {
					req := httptest.NewRequest("POST", "/orders", strings.NewReader(`{"a":1}`))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Idempotency-Key", key)
					req.Header.Set("X-Request-Id", rid)
					w := httptest.NewRecorder()
					h.ServeHTTP(w, req)
					return w
				}
				first := send(strings.Repeat("r", n))
				clk.Advance(10 * time.Minute) // past any lease
				retry := send("req-short")
				if first.Code != 201 || retry.Code != 201 || retry.Body.String() != first.Body.String() || runs.Load() != 1 {
					t.Fatalf("%s, X-Request-Id of %d bytes: first %d %.80s, retry after the lease %d %.80s, handler ran %d times; want 201, the replay, once",
						p.Name, n, first.Code, first.Body, retry.Code, retry.Body, runs.Load())
				}
			}
		}
	})
}
