package idem

import (
	"context"
	"log/slog"
)

// RegisterPreset adds p to the preset registry for one test, as a new
// preset file's registry row would; the returned func removes it.
func RegisterPreset(p Policy) (restore func()) {
	saved := presets
	presets = append(presets[:len(presets):len(presets)], p)
	return func() { presets = saved }
}

// The digest and key parsers, for the package's tests and benchmarks.
var (
	DigestBytes = digestBytes
	DigestJSON  = digestJSON
	ParseKey    = parseKey
)

// LogFailure is logFailure for the tests of package idem_test (the line
// failurelog.Write writes for an adapter).
func (g *Guard) LogFailure(ctx context.Context, msg, operation, key string, public bool, outcome string, err error, attrs ...slog.Attr) {
	g.logFailure(ctx, msg, operation, key, public, outcome, err, attrs...)
}
