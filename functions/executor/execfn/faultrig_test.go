package execfn

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// faultRig is a webhook executor on one emulator's runs table whose
// runs-store calls pass through faults, beside a store on the same table
// whose calls do not (the test's own reads and writes), the executor, its
// webhook and its ledger reading one settable clock.
type faultRig struct {
	x      *Executor
	faults *dynamotest.Faults
	store  *runs.DynamoRuns
	clk    *clock
}

// newFaultRig builds a faultRig on e. wrap, when not nil, wraps the
// executor's faulty runs store (to observe its calls).
func newFaultRig(t *testing.T, e *dynamotest.Emulator, wrap func(*runs.DynamoRuns) runs.RunStore) faultRig {
	t.Helper()
	faults := dynamotest.NewFaults()
	table := e.CreateTable(t, "RunsTable")
	faulty := &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries, faults.Middleware()), Table: table}
	var xruns runs.RunStore = faulty
	if wrap != nil {
		xruns = wrap(faulty)
	}
	clk := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
	now := ledgertest.ClockFuncs{NowFunc: clk.Now}
	l, err := ledger.New(ledger.Config{Store: ledgermem.New(), Test: ledger.TestConfig{Clock: now}, Wait: -1})
	if err != nil {
		t.Fatal(err)
	}
	x := &Executor{Runs: xruns, StaleAfter: 5 * time.Second, Test: TestConfig{Clock: now},
		Logger:  slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Webhook: &webhook.Webhook{Ledger: l, Policy: webhook.WebhookPolicy{AllowLoopback: true}, Backoff: time.Millisecond, Test: webhook.TestConfig{Clock: now}}}
	return faultRig{x: x, faults: faults, store: &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries), Table: table}, clk: clk}
}
