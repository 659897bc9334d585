package execfn

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/faultrx"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// TestWebhookConflictInFlightIsRetried: a receiver that implements
// Idempotency-Key answers a same-key try that comes while its first request
// is still being processed there (the try after a timeout) 409 "in
// progress". Such a 409 (an in-flight code in the error envelope, or a
// Retry-After) leaves the attempt without an outcome: the run is parked
// until the next try (no earlier than Retry-After), which is sent under the
// same key and completes the run. A 409 saying the key was used with
// another request (a mismatch code, with or without Retry-After), or a
// bare 409, is the delivery's final failure: the run fails and nothing is
// sent again.
func TestWebhookConflictInFlightIsRetried(t *testing.T) {
	envelope := func(code string) string {
		return `{"error":"` + code + `","message":"a request with this key is in progress"}`
	}
	cases := []struct {
		name string
		// first answers the first delivery; later ones are answered 200.
		first faultrx.Fault
		// retried: the run is parked and completes on the next try, sent
		// no earlier than minWait after the first.
		retried bool
		minWait time.Duration
	}{
		{"openwop-in-flight-with-retry-after", faultrx.Fault{Status: http.StatusConflict, RetryAfter: "7", Body: envelope("idempotency_in_flight")}, true, 7 * time.Second},
		{"openwop-in-flight", faultrx.Fault{Status: http.StatusConflict, Body: envelope("idempotency_in_flight")}, true, time.Second},
		{"erp-request-in-progress", faultrx.Fault{Status: http.StatusConflict, Body: `{"error":"IDEMPOTENCY_REQUEST_IN_PROGRESS","message":"busy"}`}, true, time.Second},
		{"nested-code", faultrx.Fault{Status: http.StatusConflict, Body: `{"error":{"code":"idempotency_in_flight"}}`}, true, time.Second},
		{"retry-after-only", faultrx.Fault{Status: http.StatusConflict, RetryAfter: "30"}, true, 30 * time.Second},
		{"retry-after-problem-json", faultrx.Fault{Status: http.StatusConflict, RetryAfter: "3", Body: `{"type":"https://developer.example.com/idempotency","title":"A request is outstanding for this Idempotency-Key"}`}, true, 3 * time.Second},
		{"openwop-mismatch", faultrx.Fault{Status: http.StatusConflict, Body: envelope("idempotency_key_mismatch")}, false, 0},
		{"openwop-mismatch-with-retry-after", faultrx.Fault{Status: http.StatusConflict, RetryAfter: "1", Body: envelope("idempotency_key_mismatch")}, false, 0},
		{"erp-key-conflict", faultrx.Fault{Status: http.StatusConflict, RetryAfter: "1", Body: `{"error":"IDEMPOTENCY_KEY_CONFLICT"}`}, false, 0},
		{"commerce-mismatch", faultrx.Fault{Status: http.StatusConflict, RetryAfter: "1", Body: `{"error":"idempotency-mismatch"}`}, false, 0},
		{"bare-409", faultrx.Fault{Status: http.StatusConflict}, false, 0},
		{"business-conflict", faultrx.Fault{Status: http.StatusConflict, Body: `{"error":"order_already_shipped"}`}, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
			tc := ledgertest.ClockFuncs{NowFunc: clk.Now}
			l, err := ledger.New(ledger.Config{Store: ledgermem.New(), Test: ledger.TestConfig{Clock: tc, Jitter: func(d time.Duration) time.Duration { return d }}})
			if err != nil {
				t.Fatal(err)
			}
			rx := faultrx.New(faultrx.Options{T: t, Plan: faultrx.Sequence(c.first, faultrx.OK)})
			defer rx.Close()
			rs := hostruns.NewMemRuns()
			x := &Executor{Runs: rs, Test: TestConfig{Clock: tc}, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
				Webhook: &webhook.Webhook{Ledger: l, Policy: webhook.WebhookPolicy{AllowLoopback: true}, Test: webhook.TestConfig{Clock: tc}}}
			in, _ := json.Marshal(map[string]any{"url": rx.URL(), "payload": map[string]any{"order": 42}})
			run := hostruns.NewRun("acme", webhook.WorkflowWebhook, in, clk.Now())
			ctx := context.Background()
			if err := rs.Create(ctx, run); err != nil {
				t.Fatal(err)
			}
			start := clk.Now()
			if err := x.Execute(ctx, run.ID); err != nil {
				t.Fatal(err)
			}
			r, _ := rs.Get(ctx, run.ID)
			if !c.retried {
				if r.Status != hostruns.StatusFailed || !strings.Contains(r.Error, "409") || rx.Count() != 1 {
					t.Fatalf("run %s (%q), %d deliveries; want failed on the 409, one delivery", r.Status, r.Error, rx.Count())
				}
				clk.Set(start.Add(time.Hour))
				if _, err := x.ResumeDue(ctx); err != nil || rx.Count() != 1 {
					t.Fatalf("after the failure: %v, %d deliveries; want nothing sent again", err, rx.Count())
				}
				return
			}
			if r.Status != hostruns.StatusRunning || r.Wake.IsZero() || r.Wake.At.Sub(start) < c.minWait || rx.Count() != 1 {
				t.Fatalf("after the 409: run %s (%q), wake %v (in %s), %d deliveries; want parked at least %s, one delivery",
					r.Status, r.Error, r.Wake.At, r.Wake.At.Sub(start), rx.Count(), c.minWait)
			}
			clk.Set(r.Wake.At.Add(-time.Millisecond))
			if _, err := x.ResumeDue(ctx); err != nil || rx.Count() != 1 {
				t.Fatalf("before the wake: %v, %d deliveries", err, rx.Count())
			}
			clk.Set(r.Wake.At)
			if _, err := x.ResumeDue(ctx); err != nil {
				t.Fatal(err)
			}
			r, _ = rs.Get(ctx, run.ID)
			d := rx.Deliveries()
			if r.Status != hostruns.StatusCompleted || len(d) != 2 || d[0].Key == "" || d[0].Key != d[1].Key {
				t.Fatalf("run %s (%q), %d deliveries; want completed after a second delivery under the same key", r.Status, r.Error, len(d))
			}
			w, err := l.Witness(ctx, run.ID)
			if err != nil || len(w.Effects) != 2 {
				t.Fatalf("witness %+v (%v); want two attempts", w, err)
			}
			if a := w.Effects; a[0].State != ledger.AttemptEscaped || a[1].State != ledger.AttemptCompleted || a[0].ProviderKey != a[1].ProviderKey {
				t.Fatalf("attempts %s, %s; want escaped (the 409 says nothing of the first request), then completed, one provider key", a[0].State, a[1].State)
			}
		})
	}
}
