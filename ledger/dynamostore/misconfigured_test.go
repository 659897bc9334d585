package dynamostore_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
)

// TestMisconfiguredEffectsTable: on every engine, a ledger whose effects
// table does not exist, or was created with another key schema (keyed on
// id, where the store writes pk and sk), fires nothing and
// returns ErrStoreMisconfigured on every Do and FireOnce, counts each one
// and logs the problem and its fix once.
func TestMisconfiguredEffectsTable(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := e.Client(dynamotest.FastRetries)
		for _, tc := range e.Misconfigured() {
			t.Run(tc.Name, func(t *testing.T) {
				var logs testutil.SyncBuffer
				m := &testutil.Counts{}
				l, err := ledger.New(ledger.Config{Store: newStore(t, c, tc.Table(t)), Wait: -1,
					Metrics: m, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
				if err != nil {
					t.Fatal(err)
				}
				calls := 0
				for i := 0; i < 3; i++ {
					_, err := l.Do(context.Background(), business(t, "misconf-"+tc.Name), func(context.Context, ledger.Call) ([]byte, error) {
						calls++
						return nil, nil
					})
					if !errors.Is(err, ledger.ErrStoreMisconfigured) {
						t.Fatalf("Do %d: %v; want ErrStoreMisconfigured", i, err)
					}
				}
				_, err = l.FireOnce(context.Background(), identity.Slot{Job: "nightly", Slot: "2026-12-03"}, func(context.Context) error {
					calls++
					return nil
				})
				if !errors.Is(err, ledger.ErrStoreMisconfigured) {
					t.Fatalf("FireOnce: %v; want ErrStoreMisconfigured", err)
				}
				if calls != 0 {
					t.Fatalf("the effect fired %d times", calls)
				}
				if got := m.Get(ledger.MetricStoreMisconfigured); got != 4 {
					t.Errorf("%s = %v, want 4", ledger.MetricStoreMisconfigured, got)
				}
				if n := strings.Count(logs.String(), "idemkit doctor"); n != 1 || !strings.Contains(logs.String(), "EffectsTable") {
					t.Errorf("the fix is logged %d times (want once, naming EffectsTable):\n%s", n, logs.String())
				}
			})
		}
	})
}
