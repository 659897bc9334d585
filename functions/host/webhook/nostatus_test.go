package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// TestWebhookAnswerWithNoHTTPStatusIsUncertain (RED_TEAM 445): net/http
// reads any three digits as a status, so an answer of "000" or "099" (a
// broken proxy, a receiver writing garbage after taking the request) came
// back as a response and was recorded as the delivery's final failure:
// the run failed, never tried again, though the receiver may have acted
// on the request. An HTTP status is 100..599 (RFC 9110 §15); an answer
// with another is no answer, and the try is uncertain, as a malformed
// response is: tried again under the same key.
func TestWebhookAnswerWithNoHTTPStatusIsUncertain(t *testing.T) {
	for _, status := range []string{"000", "099", "600", "999"} {
		t.Run(status, func(t *testing.T) {
			var mu sync.Mutex
			var keys []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				mu.Lock()
				keys = append(keys, r.Header.Get("Idempotency-Key"))
				n := len(keys)
				mu.Unlock()
				if n > 1 {
					return // 200
				}
				c, buf, err := w.(http.Hijacker).Hijack()
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = buf.WriteString("HTTP/1.1 " + status + " X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
				_ = buf.Flush()
				_ = c.Close()
			}))
			defer srv.Close()
			clk := ledgertest.NewClock(time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC))
			l, err := ledger.New(ledger.Config{Store: ledgermem.New(), Wait: -1, Test: ledger.TestConfig{Clock: clk}})
			if err != nil {
				t.Fatal(err)
			}
			w := &Webhook{Ledger: l, Policy: WebhookPolicy{AllowLoopback: true}, Test: TestConfig{Clock: clk}}
			in, _ := json.Marshal(map[string]any{"url": srv.URL, "payload": map[string]any{"a": 1}})
			run := runs.NewRun("acme", WorkflowWebhook, in, clk.Now())
			_, err = w.Deliver(context.Background(), run)
			var later *ledger.RetryLaterError
			if !errors.As(err, &later) || !errors.Is(err, ledger.ErrUncertain) {
				t.Fatalf("an answer %s: %v; want the try uncertain and retried", status, err)
			}
			clk.Advance(later.At.Sub(clk.Now()) + time.Millisecond) // the ledger keeps milliseconds
			if _, err := w.Deliver(context.Background(), run); err != nil {
				t.Fatalf("the retry: %v", err)
			}
			if len(keys) != 2 || keys[0] != keys[1] {
				t.Fatalf("keys %v: want two tries under one key", keys)
			}
		})
	}
}
