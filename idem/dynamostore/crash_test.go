package dynamostore_test

import (
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestCrashMatrix runs Layer 1's crash-point matrix (every crash point in
// every phase: first attempt, retry, takeover) on every engine; with
// transactional writes where the engine has transactions.
func TestCrashMatrix(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		table := e.CreateTable(t, "IdempotencyTable")
		c := e.Client()
		h := idemtest.Harness{NewStore: func(t *testing.T) idem.Store { return newStore(t, c, table) }}
		if e.Caps.Transactions {
			biz := e.CreateTable(t, "RunsTable")
			h.TxWrites = &idemtest.TxWrites{
				Put: func(t *testing.T, s idem.Store, name string) any { return businessPut(biz, name) },
				Exists: func(t *testing.T, s idem.Store, name string) bool {
					return businessExists(t, c, biz, name)
				},
			}
		}
		idemtest.RunCrashMatrix(t, h)
	})
}
