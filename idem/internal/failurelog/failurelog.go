// Package failurelog is the failure-log seam between idem's Guard and its
// adapter package idem/event, and nothing users call: an adapter that logs
// each failed unit of work itself, once (the SQS adapter, per record),
// marks the context it hands Guard.Once (Adapter), so the Guard writes no
// line of its own about a failed outcome (Logged), and writes its own line
// through the Guard's logger, key hash and redaction (Write).
package failurelog

import (
	"context"
	"log/slog"
)

// adapterKey marks a context whose adapter logs each failure itself.
type adapterKey struct{}

// Adapter returns ctx marked: its adapter logs each failure itself, once,
// so Guard.Once writes no log line of its own about a failed outcome.
func Adapter(ctx context.Context) context.Context {
	return context.WithValue(ctx, adapterKey{}, true)
}

// Logged reports whether ctx was marked by Adapter.
func Logged(ctx context.Context) bool { return ctx.Value(adapterKey{}) != nil }

// Write writes the one warning line of a failed unit of work that its
// adapter reports through guard, an *idem.Guard: msg, the operation, the
// key as its keyed hash (Config.KeyHashSecret) unless public (a key the
// platform assigned, such as an SQS message id, which is no caller
// secret), the outcome, attrs, and err's text with every occurrence of a
// secret key replaced by its hash. The key itself never reaches the log.
// Package idem sets it when it is initialised.
var Write func(guard any, ctx context.Context, msg, operation, key string, public bool, outcome string, err error, attrs ...slog.Attr)
