package ledger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// countingFencer fails its first fail tokens as a fence table out of reach
// does, then issues increasing ones, counting every ask.
type countingFencer struct {
	flakyFencer
	asked int
}

func (f *countingFencer) Token(ctx context.Context, id string) (uint64, error) {
	f.asked++
	return f.flakyFencer.Token(ctx, id)
}

// An effect with a retry schedule whose token cannot be had (the fence
// table out of reach) is given back on the schedule's backoff, as one
// whose call did not leave (NotSent): Do returns *RetryLaterError carrying
// the fencer's error, and a Do before the next attempt's time asks the
// fence nothing and spends no attempt. Before (open O), each such Do
// released the attempt with no next-attempt time and returned the fencer's
// error, so the next Do took another attempt at once: a fence outage spent
// every attempt as fast as the caller retried and exhausted the effect
// within a few seconds of stream retries. An effect without a schedule is
// unchanged: the fencer's error, and the next Do tries again at once (as
// after a NotSent call).
func TestFenceOutageBacksOffLikeACallThatDidNotLeave(t *testing.T) {
	t.Run("with a retry schedule", func(t *testing.T) {
		clk := ledgertest.NewClock(time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC))
		fencer := &countingFencer{flakyFencer: flakyFencer{fail: 1}}
		l, err := ledger.New(ledger.Config{Store: memstore.New(), Lease: 30 * time.Second, Wait: -1, Fencer: fencer,
			Test: ledger.TestConfig{Clock: clk, Jitter: func(d time.Duration) time.Duration { return d }}})
		if err != nil {
			t.Fatal(err)
		}
		id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "order-fence-outage"})
		if err != nil {
			t.Fatal(err)
		}
		eff := ledger.Effect{Identity: id, Retry: &ledger.Retry{MaxAttempts: 3, Base: 10 * time.Second}}
		fired := 0
		fn := func(context.Context, ledger.Call) ([]byte, error) { fired++; return []byte("charged"), nil }
		ctx := context.Background()
		start := clk.Now()

		_, err = l.Do(ctx, eff, fn)
		var later *ledger.RetryLaterError
		if !errors.As(err, &later) || !later.At.Equal(start.Add(10*time.Second)) || later.Cause == nil ||
			!strings.Contains(err.Error(), "fence table unreachable") || later.Attempt != 1 {
			t.Fatalf("a token the fence could not give: %v; want *RetryLaterError at +10s naming the fencer's error", err)
		}
		// Every Do before the next attempt's time: nothing asked, nothing spent.
		for i := 0; i < 5; i++ {
			_, err = l.Do(ctx, eff, fn)
			if !errors.As(err, &later) || later.Cause != nil || later.Attempt != 1 {
				t.Fatalf("Do %d before the next attempt's time: %v; want *RetryLaterError, nothing fired", i+2, err)
			}
		}
		if fencer.asked != 1 || fired != 0 {
			t.Fatalf("fence asked %d times, fired %d; want 1 and 0", fencer.asked, fired)
		}
		rec, err := l.Lookup(ctx, id.EffectID)
		if err != nil || rec.Attempt != 1 || !rec.NotBefore.Equal(start.Add(10*time.Second)) {
			t.Fatalf("record %+v (%v); want attempt 1, next at +10s", rec, err)
		}
		clk.Advance(10 * time.Second)
		r, err := l.Do(ctx, eff, fn)
		if err != nil || r.Replayed || fired != 1 || r.Attempt != 2 {
			t.Fatalf("once due: %+v %v, fired %d; want attempt 2 fired once", r, err, fired)
		}
	})
	t.Run("without a retry schedule", func(t *testing.T) {
		clk := ledgertest.NewClock(time.Date(2026, 12, 7, 2, 0, 0, 0, time.UTC))
		fencer := &countingFencer{flakyFencer: flakyFencer{fail: 2}}
		l, err := ledger.New(ledger.Config{Store: memstore.New(), Lease: 30 * time.Second, Wait: -1, Fencer: fencer,
			Test: ledger.TestConfig{Clock: clk}})
		if err != nil {
			t.Fatal(err)
		}
		id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "order-fence-outage-plain"})
		if err != nil {
			t.Fatal(err)
		}
		eff := ledger.Effect{Identity: id}
		fired := 0
		fn := func(context.Context, ledger.Call) ([]byte, error) { fired++; return []byte("charged"), nil }
		ctx := context.Background()
		for i := 0; i < 2; i++ {
			_, err := l.Do(ctx, eff, fn)
			if err == nil || errors.Is(err, ledger.ErrRetryLater) || !strings.Contains(err.Error(), "fence table unreachable") {
				t.Fatalf("Do %d: %v; want the fencer's error, no schedule", i+1, err)
			}
		}
		r, err := l.Do(ctx, eff, fn)
		if err != nil || fired != 1 || r.Attempt != 3 || fencer.asked != 3 {
			t.Fatalf("third Do: %+v %v, fired %d, asked %d; want attempt 3 fired once at once", r, err, fired, fencer.asked)
		}
	})
}
