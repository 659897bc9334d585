// Package emf is the public face of idemkit's CloudWatch Embedded Metric
// Format recorder, for library users who set idem.Config.Metrics or
// ledger.Config.Metrics in their own functions:
//
//	guard, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: store, Metrics: emf.New(os.Stdout, "idemkit")})
//
// One JSON line per metric goes to the writer (stdout in Lambda), which
// CloudWatch Logs turns into metrics. Dimensions are bounded: idemkit never
// puts keys, tenants or ids in them. A nil *Recorder records nothing.
package emf

import (
	"io"

	internal "github.com/idemkit/idemkit/internal/emf"
)

// Recorder emits EMF records; safe for concurrent use. It implements
// idem.Metrics and ledger.Metrics (and so fence.Config.Metrics).
type Recorder = internal.Recorder

// New returns a Recorder writing to w under namespace (default "idemkit").
func New(w io.Writer, namespace string) *Recorder { return internal.New(w, namespace) }
