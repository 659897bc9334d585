package memstore_test

import (
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/idem/memstore"
)

func TestConformance(t *testing.T) {
	idemtest.Run(t, idemtest.Harness{
		NewStore: func(t *testing.T) idem.Store { return memstore.New() },
		TxWrites: &idemtest.TxWrites{
			Put: func(t *testing.T, s idem.Store, name string) any {
				return memstore.Write{Key: name, Value: []byte("v"), IfAbsent: true}
			},
			Exists: func(t *testing.T, s idem.Store, name string) bool {
				_, ok := s.(*memstore.Store).Item(name)
				return ok
			},
		}})
}

// TestCrashMatrix: Layer 1's crash-point matrix on the memory store.
func TestCrashMatrix(t *testing.T) {
	idemtest.RunCrashMatrix(t, idemtest.Harness{
		NewStore: func(t *testing.T) idem.Store { return memstore.New() },
		TxWrites: &idemtest.TxWrites{
			Put: func(t *testing.T, s idem.Store, name string) any {
				return memstore.Write{Key: name, Value: []byte("v"), IfAbsent: true}
			},
			Exists: func(t *testing.T, s idem.Store, name string) bool {
				_, ok := s.(*memstore.Store).Item(name)
				return ok
			},
		}})
	t.Run("without-transactions", func(t *testing.T) {
		idemtest.RunCrashMatrix(t, idemtest.Harness{NewStore: func(t *testing.T) idem.Store { return memstore.New() }})
	})
}
