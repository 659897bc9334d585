package webhook

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// A receiver's Retry-After on a 429 or 503, in seconds or as an HTTP-date,
// decides the next try's time and nothing else: a sane value parks the
// delivery until then, a past date, zero, a negative or malformed value
// leaves the backoff, and a value past the delivery's time budget (a day,
// a number beyond any duration, a date years ahead) ends the delivery at
// once, exhausted with its try escaped, instead of a try after the budget.
// In every case the receiver got exactly one request, and a Deliver
// before the next try's time sends nothing.
func TestWebhookRetryAfterDecidesOnlyTheNextTry(t *testing.T) {
	start := time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name   string
		status int
		header string
		wait   time.Duration // the next try's delay; 0: exhausted
	}{
		{"seconds", http.StatusServiceUnavailable, "120", 120 * time.Second},
		{"date", http.StatusTooManyRequests, start.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{"past date", http.StatusServiceUnavailable, start.Add(-time.Hour).Format(http.TimeFormat), 5 * time.Second},
		{"zero", http.StatusTooManyRequests, "0", 5 * time.Second},
		{"negative", http.StatusServiceUnavailable, "-30", 5 * time.Second},
		{"fraction", http.StatusTooManyRequests, "1.5", 5 * time.Second},
		{"a day", http.StatusServiceUnavailable, "86400", 0},
		{"beyond a duration", http.StatusTooManyRequests, "99999999999999999999999", 0},
		{"years ahead", http.StatusServiceUnavailable, start.AddDate(5, 0, 0).Format(http.TimeFormat), 0},
	} {
		t.Run(slug(c.name), func(t *testing.T) {
			var hits atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				hits.Add(1)
				w.Header().Set("Retry-After", c.header)
				w.WriteHeader(c.status)
			}))
			defer srv.Close()
			clk := ledgertest.NewClock(start)
			l, err := ledger.New(ledger.Config{Store: ledgermem.New(), Wait: -1,
				Test: ledger.TestConfig{Clock: clk, Jitter: func(d time.Duration) time.Duration { return d }}})
			if err != nil {
				t.Fatal(err)
			}
			w := &Webhook{Ledger: l, Policy: WebhookPolicy{AllowLoopback: true}, MaxTries: 5, Budget: time.Hour,
				Backoff: 5 * time.Second, Test: TestConfig{Clock: clk}}
			run := webhookRun(t, srv.URL)
			ctx := context.Background()
			_, err = w.Deliver(ctx, run)
			if c.wait == 0 {
				var ex *ledger.AttemptsExhaustedError
				if !errors.Is(err, ErrRetriesExhausted) || !errors.As(err, &ex) || !ex.Budget || !ex.Escaped || ex.Attempts != 1 {
					t.Fatalf("Retry-After %q: %v; want the delivery exhausted by its budget after one escaped try", c.header, err)
				}
				clk.Advance(2 * time.Hour)
				if _, err := w.Deliver(ctx, run); !errors.Is(err, ErrRetriesExhausted) {
					t.Fatalf("a later Deliver: %v; want exhausted", err)
				}
			} else {
				var later *ledger.RetryLaterError
				if !errors.As(err, &later) || !later.At.Equal(start.Add(c.wait)) || !errors.Is(err, ledger.ErrUncertain) {
					t.Fatalf("Retry-After %q: %v; want the next try at +%s", c.header, err, c.wait)
				}
				clk.Advance(c.wait - time.Millisecond)
				if _, err := w.Deliver(ctx, run); !errors.As(err, &later) || later.Cause != nil {
					t.Fatalf("a Deliver before the next try's time: %v; want it parked, nothing sent", err)
				}
			}
			if n := hits.Load(); n != 1 {
				t.Fatalf("the receiver got %d requests; want 1", n)
			}
		})
	}
}

func slug(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c == ' ' {
			b[i] = '-'
		}
	}
	return string(b)
}
