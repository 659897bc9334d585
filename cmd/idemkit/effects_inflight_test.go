package main

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestEffectsResolveRefusesARevShownInFlight: `show` prints (and keeps)
// the rev of an effect whose attempt is still running; once that attempt's
// lease has run out with nothing written, a `resolve` on that rev is
// refused (the operator's provider check came before a slow send), and
// prints the escaped state to decide on. The stalled send then lands and
// is recorded: one send, no resolution.
func TestEffectsResolveRefusesARevShownInFlight(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		t.Setenv("IDEMKIT_STATE_DIR", t.TempDir())
		t.Setenv("IDEMKIT_OPERATOR", "ops@acme")
		table := e.CreateTable(t, "EffectsTable")
		store, err := ledgerdynamo.New(ledgerdynamo.Config{Client: e.Client(), Table: table})
		if err != nil {
			t.Fatal(err)
		}
		// An executor whose one-minute lease ends 2 s from now, with no
		// heartbeat: its send is slow.
		const left = 2 * time.Second
		behind := time.Minute - left
		l0, err := ledger.New(ledger.Config{Store: store, Lease: time.Minute, Heartbeat: -1,
			Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: func() time.Time { return time.Now().Add(-behind) }}}})
		if err != nil {
			t.Fatal(err)
		}
		id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "order-77-" + e.Kind})
		eff := ledger.Effect{Identity: id, RunID: "acme/run-0123456789abcdef", NodeID: "charge"}
		var sends atomic.Int32
		started, proceed, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		leaseEnds := time.Now().Add(left)
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
		cli := func(args ...string) (int, string, string) {
			var out, errb bytes.Buffer
			code := run2(ctx, append(args, "--endpoint", e.Endpoint, "--table", table), &out, &errb)
			return code, out.String(), errb.String()
		}
		if code, out, errb := cli("effects", "show", id.EffectID); code != 0 || !strings.Contains(out, "state:         in-flight") {
			close(proceed)
			t.Fatalf("show while the attempt runs: %d %q %q", code, out, errb)
		}
		time.Sleep(time.Until(leaseEnds) + 300*time.Millisecond)
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
