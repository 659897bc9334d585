package main

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestEffectsResolveRefusesARevShownInFlight: `show` prints (and keeps)
// the rev of an effect whose attempt is still running; once that attempt's
// lease has run out with nothing written, a `resolve` on that rev is
// refused (the operator's provider check came before a slow send), and
// prints the escaped state to decide on. The stalled send then lands and
// is recorded: one send, no resolution. The executor and the commands
// share one clock, moved by hand, so the lease runs out between the show
// and the resolve however long either takes.
func TestEffectsResolveRefusesARevShownInFlight(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		store, _, cli := effectsCLI(t, e)
		clk := ledgertest.NewClock(time.Now())
		defer func(c ledger.Clock) { effectsClock = c }(effectsClock)
		effectsClock = clk
		// An executor with a one-minute lease and no heartbeat: its send
		// is slow.
		l0, err := ledger.New(ledger.Config{Store: store, Lease: time.Minute, Heartbeat: -1, Wait: -1,
			Test: ledger.TestConfig{Clock: clk}})
		if err != nil {
			t.Fatal(err)
		}
		id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "order-77-" + e.Kind})
		eff := ledger.Effect{Identity: id, RunID: "acme/run-0123456789abcdef", NodeID: "charge"}
		var sends atomic.Int32
		started, proceed, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			_, err := l0.Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
				close(started)
				<-proceed
				sends.Add(1)
				return []byte("charged"), nil
			})
			done <- err
		}()
		<-started
		if code, out, errb := cli("effects", "show", id.EffectID); code != 0 || !strings.Contains(out, "state:         in-flight") {
			close(proceed)
			t.Fatalf("show while the attempt runs: %d %q %q", code, out, errb)
		}
		clk.Advance(time.Minute + time.Second) // the lease runs out, nothing written since the show
		code, out, errb := cli("effects", "resolve", id.EffectID, "--as", "not-delivered")
		close(proceed)
		if code != 1 || out != "" || !strings.Contains(errb, "changed since it was shown") || !strings.Contains(errb, "it is now escaped") {
			t.Fatalf("resolve on the in-flight rev: exit %d %q %q; want 1, refused, naming the escaped state", code, out, errb)
		}
		if err := <-done; err != nil {
			t.Fatalf("the stalled send: %v", err)
		}
		if code, out, _ := cli("effects", "show", id.EffectID); code != 0 || !strings.Contains(out, "state:         completed") {
			t.Fatalf("after the stalled send: %d %q", code, out)
		}
		if n := sends.Load(); n != 1 {
			t.Fatalf("%d sends; want 1", n)
		}
	})
}
