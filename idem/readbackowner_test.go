package idem_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
	iclock "github.com/idemkit/idemkit/internal/clock"
)

// unsentCompletion fails every completion as an outage without writing it
// (throttled past the retries), as for a process cut off from the store.
type unsentCompletion struct{ idem.Store }

func (s unsentCompletion) Complete(context.Context, idem.Record, idem.Outcome, time.Time) error {
	return fmt.Errorf("%w: throttled past the retries", idem.ErrStoreUnavailable)
}

// TestLostCompletionReadBackIsTheClaimsOwn: a process whose completion
// with Transact writes fails as an outage, never written, after its lease
// ran out and another process took the claim over and completed, reads
// the record back to learn whether its completion landed: it finds a
// final record, but the other process's (another owner token). It must
// not take that for its own: its writes never committed, so it fails with
// ErrNotCommitted, and the record keeps the other's answer. (A read-back
// that did not compare the owner passed every other test; RED_TEAM 582.)
func TestLostCompletionReadBackIsTheClaimsOwn(t *testing.T) {
	store := memstore.New()
	clk := iclock.NewManual(time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC))
	guard := func(s idem.Store) *idem.Guard {
		g, err := idem.New(idem.Config{Store: s, Tenant: idem.SingleTenant("t"), Lease: idem.MinLease, Wait: -1,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Test: idem.TestConfig{Clock: clk.SleepAdvances()}})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	work := func(n int, during func()) idem.Work {
		return idem.Work{Operation: "charge", Key: "k-read-back", Payload: []byte(`{}`), Run: func(ctx context.Context) ([]byte, error) {
			if err := idem.Transact(ctx, memstore.Write{Key: fmt.Sprintf("exec-%d", n), Value: []byte("v"), IfAbsent: true}); err != nil {
				return nil, err
			}
			if during != nil {
				during()
			}
			return fmt.Appendf(nil, `{"execution":%d}`, n), nil
		}}
	}
	var second []byte
	var secondErr error
	v, ran, err := guard(unsentCompletion{store}).Once(context.Background(), work(1, func() {
		// The first process stalls past its lease; another takes the
		// claim over and completes.
		clk.Advance(idem.MinLease + time.Minute)
		second, _, secondErr = guard(store).Once(context.Background(), work(2, nil))
	}))
	if secondErr != nil || string(second) != `{"execution":2}` {
		t.Fatalf("the takeover: %s %v", second, secondErr)
	}
	if !errors.Is(err, idem.ErrNotCommitted) || !ran {
		t.Fatalf("the first process, its completion never written: %s ran=%t err=%v; want ErrNotCommitted", v, ran, err)
	}
	if _, ok := store.Item("exec-1"); ok {
		t.Fatal("the first process's write committed")
	}
	r, ran, err := guard(store).Once(context.Background(), work(3, nil))
	if err != nil || ran || string(r) != `{"execution":2}` {
		t.Fatalf("the replay: %s ran=%t err=%v; want the takeover's answer", r, ran, err)
	}
}
