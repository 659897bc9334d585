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

// ErrClaimLost is returned by an effect seam reached by an execution that
// has lost its claim on its run (its run was cancelled, or another
// execution took it, and its claim heartbeat found so): nothing it has not
// sent yet is sent (RED_TEAM 550).
var ErrClaimLost = errors.New("host: the execution lost its claim on the run (cancelled or taken over); nothing more is sent")

type replayKey struct{}

type claimKey struct{}

// WithClaim marks ctx as an effect call of an execution under a claim on
// its run that holds until claim is done: every effect seam (CheckSeam,
// GuardSeam) denies under ctx once claim is done. The executor's effect
// calls run under a context the claim's loss does not cancel (a request
// already sent is left to finish); this is how they still send nothing
// new once the loss is known.
func WithClaim(ctx, claim context.Context) context.Context {
	return context.WithValue(ctx, claimKey{}, claim)
}

// claimLost reports whether ctx carries a claim (WithClaim) that is done.
func claimLost(ctx context.Context) bool {
	c, ok := ctx.Value(claimKey{}).(context.Context)
	return ok && c.Err() != nil
}

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
// no exception and no allow list; ErrClaimLost once the claim ctx carries
// (WithClaim) is done.
func CheckSeam(ctx context.Context, seam string) error {
	if UnderReplay(ctx) {
		return fmt.Errorf("%w: seam %s", ErrSeamDenied, seam)
	}
	if claimLost(ctx) {
		return fmt.Errorf("%w: seam %s", ErrClaimLost, seam)
	}
	return nil
}

// GuardSeam wraps an effect function so it refuses to run under a replay,
// or once the claim ctx carries is done (CheckSeam; a failure before
// anything is sent: ledger.NotSent), whoever reaches it.
func GuardSeam(seam string, fn ledger.Func) ledger.Func {
	return func(ctx context.Context, c ledger.Call) ([]byte, error) {
		if err := CheckSeam(ctx, seam); err != nil {
			return nil, ledger.NotSent(err)
		}
		return fn(ctx, c)
	}
}
