package ledger_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// A rev shown while an attempt was in flight does not settle the effect
// once that attempt's lease has run out with nothing written since: the
// operator decided on a view in which the attempt was still running (and
// may yet send: its provider check came before the send), so the
// resolution is refused with ErrChanged and the current view, which says
// escaped and carries a rev of its own. Before, the rev of the in-flight
// view matched the stalled record's, and a not-delivered resolution based
// on it granted one more attempt, which fired a second time beside the
// stalled attempt's own send.
func TestResolveRefusesARevShownWhileTheAttemptWasInFlight(t *testing.T) {
	for _, as := range []ledger.Settlement{ledger.NotDelivered, ledger.Delivered} {
		t.Run(string(as), func(t *testing.T) {
			clk := ledgertest.NewClock(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
			l, err := ledger.New(ledger.Config{Store: memstore.New(), Lease: 30 * time.Second, Heartbeat: -1, Wait: -1,
				Test: ledger.TestConfig{Clock: clk}})
			if err != nil {
				t.Fatal(err)
			}
			id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "order-11"})
			if err != nil {
				t.Fatal(err)
			}
			eff := ledger.Effect{Identity: id}
			ctx := context.Background()
			var sends atomic.Int32
			started, proceed, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			go func() {
				_, err := l.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
					close(started)
					<-proceed // a slow send: the operator looks in the meantime
					sends.Add(1)
					return []byte("charged"), nil
				})
				done <- err
			}()
			<-started
			live, err := l.ShowEffect(ctx, id.EffectID)
			if err != nil || live.State != ledger.EffectInFlight {
				t.Fatalf("view while the attempt runs: %s (%v); want in-flight", live.State, err)
			}
			clk.Advance(31 * time.Second) // the lease runs out, nothing written since the view
			_, err = l.Resolve(ctx, id.EffectID, ledger.Resolution{As: as, Operator: "ops", Rev: live.Rev})
			if !errors.Is(err, ledger.ErrChanged) {
				t.Fatalf("resolving %s on the rev of the in-flight view: %v; want ErrChanged", as, err)
			}
			now, err := l.ShowEffect(ctx, id.EffectID)
			if err != nil || now.State != ledger.EffectEscaped || now.Rev == live.Rev {
				t.Fatalf("view after the lease: %s rev %s (%v); want escaped with a rev other than %s", now.State, now.Rev, err, live.Rev)
			}
			for _, a := range now.Attempts {
				if a.Operator != "" {
					t.Fatalf("a refused resolution wrote its row: %+v", a)
				}
			}
			close(proceed)
			// Nothing reclaimed the attempt: its late success is recorded.
			if err := <-done; err != nil {
				t.Fatalf("the stalled attempt's outcome: %v; want its success recorded", err)
			}
			if v, _ := l.ShowEffect(ctx, id.EffectID); v.State != ledger.EffectCompleted {
				t.Fatalf("after the stalled attempt's send: %s; want completed", v.State)
			}
			if n := sends.Load(); n != 1 {
				t.Fatalf("%d sends; want 1", n)
			}
		})
	}
}
