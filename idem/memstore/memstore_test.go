package memstore_test

import (
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/idem/memstore"
)

// harness is the memory store with its transactional writes.
func harness() idemtest.Harness {
	return idemtest.Harness{
		NewStore: func(t *testing.T) idem.Store { return memstore.New() },
		TxWrites: &idemtest.TxWrites{
			Put: func(t *testing.T, s idem.Store, name string) any {
				return memstore.Write{Key: name, Value: []byte("v"), IfAbsent: true}
			},
			Exists: func(t *testing.T, s idem.Store, name string) bool {
				_, ok := s.(*memstore.Store).Item(name)
				return ok
			},
		}}
}

func TestConformance(t *testing.T) { idemtest.Run(t, harness()) }

// TestCrashMatrix: Layer 1's crash-point matrix on the memory store, with
// and without transactional writes.
func TestCrashMatrix(t *testing.T) {
	idemtest.RunCrashMatrix(t, harness())
	t.Run("without-transactions", func(t *testing.T) {
		h := harness()
		h.TxWrites = nil
		idemtest.RunCrashMatrix(t, h)
	})
}
