package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// TestEffectsResolvePastTheRecordsAttemptsSaysWhatToDo: a not-delivered
// resolution of an effect whose record holds as many attempts as it keeps
// is refused (exit 1) with one line in the CLI's words that says why and
// what is left (resolve it as delivered once it is performed by hand, or
// wait for its retention): never the library's error text with its
// package prefix. Before: "refused: ledger: effect attempts exhausted:
// effect ... holds ..." (RED_TEAM 322).
func TestEffectsResolvePastTheRecordsAttemptsSaysWhatToDo(t *testing.T) {
	rec := exhaustedRecord(t)
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		store, _, cli := effectsCLI(t, e)
		if won, _, err := store.Create(ctx, rec, time.Now()); err != nil || !won {
			t.Fatalf("storing the record: won %v, %v", won, err)
		}
		if code, out, errb := cli("effects", "show", rec.EffectID); code != 0 || !strings.Contains(out, "escaped") {
			t.Fatalf("show: exit %d %q %q; want the effect escaped", code, out, errb)
		}
		code, out, errb := cli("effects", "resolve", rec.EffectID, "--as", "not-delivered")
		if code != 1 || out != "" || strings.Count(errb, "\n") != 1 || strings.Contains(errb, "ledger:") ||
			!strings.Contains(errb, "refused: effect "+rec.EffectID+" holds") || !strings.Contains(errb, "--as delivered") {
			t.Fatalf("resolve --as not-delivered: exit %d, stdout %q, stderr %q; want 1 and one line naming the effect, why, and --as delivered, without the library's prefix", code, out, errb)
		}
	})
}

// exhaustedRecord is the record of an escaped effect whose not-delivered
// resolutions have granted every attempt its record keeps, built on an
// in-memory ledger whose clock ended an hour ago (its leases long over).
func exhaustedRecord(t *testing.T) *ledger.Record {
	t.Helper()
	ctx := context.Background()
	clk := ledgertest.NewClock(time.Now().Add(-48 * time.Hour).Truncate(time.Second))
	ms := memstore.New()
	l, err := ledger.New(ledger.Config{Store: ms, Lease: 30 * time.Second, Wait: -1, MaxAttempts: ledger.MaxMaxAttempts,
		Test: ledger.TestConfig{Clock: clk}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "refund", Key: "order-exhausted"})
	if err != nil {
		t.Fatal(err)
	}
	eff := ledger.Effect{Identity: id, RunID: "acme/run-0123456789abcdef", NodeID: "refund"}
	uncertain := func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.Uncertain(errors.New("timeout after the request was sent"))
	}
	for n := 1; n <= ledger.MaxMaxAttempts; n++ {
		_, _ = l.Do(ctx, eff, uncertain)
		clk.Advance(time.Second)
	}
	for grants := 0; ; grants++ {
		if grants > 1000 {
			t.Fatal("not-delivered resolutions never stopped granting attempts")
		}
		clk.Advance(time.Second)
		v, err := l.ShowEffect(ctx, id.EffectID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Resolve(ctx, id.EffectID, ledger.Resolution{As: ledger.NotDelivered, Operator: "ops", Rev: v.Rev}); errors.Is(err, ledger.ErrAttemptsExhausted) {
			break
		} else if err != nil {
			t.Fatalf("resolution %d: %v", grants+1, err)
		}
		_, _ = l.Do(ctx, eff, uncertain)
	}
	if clk.Now().After(time.Now().Add(-time.Hour)) {
		t.Fatalf("the ledger's clock ended at %v, within the hour", clk.Now())
	}
	var rec *ledger.Record
	if err := ms.Scan(ctx, func(r *ledger.Record) bool {
		if r.EffectID == id.EffectID {
			rec = r
		}
		return true
	}); err != nil || rec == nil {
		t.Fatalf("the record: %v, %v", rec, err)
	}
	return rec
}
