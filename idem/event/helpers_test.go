package event_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/internal/testutil"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// env is a Guard on an in-memory store with a manual clock and a captured
// log.
type env struct {
	store *memstore.Store
	clock *ledgertest.Clock
	logs  *testutil.SyncBuffer
	guard *idem.Guard
}

func newEnv(t *testing.T, mod func(*idem.Config)) *env {
	t.Helper()
	e := &env{store: memstore.New(), clock: ledgertest.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)), logs: &testutil.SyncBuffer{}}
	cfg := idem.Config{
		Store:  e.store,
		Tenant: idem.AuthorizerKey("tenantId"),
		Test:   idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: e.clock.Now}},
		Logger: slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Wait:   -1,
	}
	if mod != nil {
		mod(&cfg)
	}
	g, err := idem.New(cfg)
	if err != nil {
		t.Fatalf("idem.New: %v", err)
	}
	e.guard = g
	return e
}
