package apifn

import (
	"log/slog"

	"github.com/idemkit/idemkit/internal/keyhash"
)

// errAttr is the "error" attribute of a log line reporting err: its text
// with every effect id and provider key replaced by its keyed hash
// (keyhash.RedactEffects). The ledger's errors name the effect, and the
// provider idempotency key is a public derivation of the effect id.
func errAttr(err error) slog.Attr {
	return slog.String("error", keyhash.RedactEffects(err.Error()))
}
