package memstore_test

import (
	"testing"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/ledger/memstore"
)

func TestConformance(t *testing.T) {
	ledgertest.Run(t, ledgertest.Harness{
		NewStore: func(*testing.T) ledger.Store { return memstore.New() },
	})
}

// TestCrashMatrix: the ledger's crash-point matrix on the memory store.
func TestCrashMatrix(t *testing.T) {
	ledgertest.RunCrashMatrix(t, ledgertest.Harness{
		NewStore: func(*testing.T) ledger.Store { return memstore.New() },
	})
}
