package emf_test

import (
	"github.com/idemkit/idemkit/emf"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/ledger"
)

// The recorder is one implementation of the metrics interfaces that idem and
// ledger own.
var (
	_ idem.Metrics   = (*emf.Recorder)(nil)
	_ ledger.Metrics = (*emf.Recorder)(nil)
)
