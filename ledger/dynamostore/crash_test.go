package dynamostore_test

import (
	"testing"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestCrashMatrix runs the ledger's crash-point matrix (every crash point
// in every phase, with a provider that honours keys and one that does not)
// on every engine.
func TestCrashMatrix(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		table := e.CreateTable(t, "EffectsTable")
		client := e.Client()
		ledgertest.RunCrashMatrix(t, ledgertest.Harness{
			NewStore: func(t *testing.T) ledger.Store { return newStore(t, client, table) },
		})
	})
}
