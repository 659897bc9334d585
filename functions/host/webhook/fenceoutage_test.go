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

// outageFencer fails its first fail tokens, as a fence table out of reach
// does, then issues increasing ones.
type outageFencer struct {
	fail int
	n    uint64
}

func (f *outageFencer) Token(context.Context, string) (uint64, error) {
	if f.fail > 0 {
		f.fail--
		return 0, errors.New("fence table unreachable")
	}
	f.n++
	return f.n, nil
}

// A delivery under fenced-effects whose token the fence could not give
// (its table out of reach) is parked on the webhook's backoff, as a try
// whose request did not leave: Deliver returns *ledger.RetryLaterError,
// and a Deliver before its time sends nothing and spends no try. Before
// (open O), Deliver returned the fencer's error with no next-try time, the
// executor retried the run at once, and every such retry spent one of the
// delivery's tries.
func TestWebhookFenceOutageIsParkedOnTheBackoff(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	clk := ledgertest.NewClock(time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC))
	l, err := ledger.New(ledger.Config{Store: ledgermem.New(), Fencer: &outageFencer{fail: 1}, Wait: -1,
		Test: ledger.TestConfig{Clock: clk, Jitter: func(d time.Duration) time.Duration { return d }}})
	if err != nil {
		t.Fatal(err)
	}
	w := &Webhook{Ledger: l, Policy: WebhookPolicy{AllowLoopback: true}, MaxTries: 3, Backoff: 5 * time.Second,
		Test: TestConfig{Clock: clk}}
	run := webhookRun(t, srv.URL)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		_, err := w.Deliver(ctx, run)
		var later *ledger.RetryLaterError
		if !errors.As(err, &later) || !later.At.Equal(clk.Now().Add(5*time.Second)) || later.Attempt != 1 {
			t.Fatalf("Deliver %d during the fence outage: %v; want the try parked 5 s, one try spent", i+1, err)
		}
	}
	clk.Advance(5 * time.Second)
	res, err := w.Deliver(ctx, run)
	if err != nil || res.Attempt != 2 || hits.Load() != 1 {
		t.Fatalf("once due: %+v %v, %d requests; want try 2 delivered once", res, err, hits.Load())
	}
}
