package runs

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkit/idemkit/ledger"
)

// ErrSeamDenied is returned by an effect seam reached during a replay
// fork's execution: the seam refuses the effect (nothing is sent). It is
// the last line of replay suppression; the first is the executor's
// classification, which resolves every side-effecting node of a replay
// from the source's record (ledger.Ledger.Replay) before any seam is near.
var ErrSeamDenied = errors.New("host: effect seam denied during a replay")

type replayKey struct{}

// WithReplay marks ctx as the execution of a replay fork: every effect
// seam (CheckSeam, GuardSeam) denies under it. The executor derives ctx so
// for the whole execution of a replay run, before any node runs.
func WithReplay(ctx context.Context) context.Context {
	return context.WithValue(ctx, replayKey{}, true)
}

// UnderReplay reports whether ctx is a replay fork's execution.
func UnderReplay(ctx context.Context) bool {
	v, _ := ctx.Value(replayKey{}).(bool)
	return v
}

// CheckSeam is the check every outbound effect seam makes before it claims
// or sends anything: ErrSeamDenied (naming the seam) under a replay, with
// no exception and no allow list.
func CheckSeam(ctx context.Context, seam string) error {
	if UnderReplay(ctx) {
		return fmt.Errorf("%w: seam %s", ErrSeamDenied, seam)
	}
	return nil
}

// GuardSeam wraps an effect function so it refuses to run under a replay
// (a failure before anything is sent: ledger.NotSent), whoever reaches it.
func GuardSeam(seam string, fn ledger.Func) ledger.Func {
	return func(ctx context.Context, c ledger.Call) ([]byte, error) {
		if err := CheckSeam(ctx, seam); err != nil {
			return nil, ledger.NotSent(err)
		}
		return fn(ctx, c)
	}
}
