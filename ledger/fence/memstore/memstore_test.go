package memstore_test

import (
	"testing"

	"github.com/idemkit/idemkit/ledger/fence"
	"github.com/idemkit/idemkit/ledger/fence/fencetest"
	"github.com/idemkit/idemkit/ledger/fence/memstore"
)

func TestConformance(t *testing.T) {
	fencetest.Run(t, fencetest.Harness{
		NewStore: func(*testing.T) fence.Store { return memstore.New() },
		Delete:   func(_ *testing.T, s fence.Store, id string) { s.(*memstore.Store).Delete(id) },
	})
}
