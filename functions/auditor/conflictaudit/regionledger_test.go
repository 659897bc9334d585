package conflictaudit_test

import (
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// regionLedger is one region's executor in the cross-region reclaim tests:
// a ledger on a replica of its own (a memstore) under the region's clock c,
// with a 30-second lease, no heartbeat and no wait.
func regionLedger(t *testing.T, c *ledgertest.Clock) (*memstore.Store, *ledger.Ledger) {
	t.Helper()
	st := memstore.New()
	l, err := ledger.New(ledger.Config{Store: st, Lease: 30 * time.Second, Heartbeat: -1, Wait: -1,
		Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: c.Now}}})
	if err != nil {
		t.Fatal(err)
	}
	return st, l
}
