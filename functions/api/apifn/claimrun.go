package apifn

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
)

// createClaimedRun writes run, the run a request creates (createRun,
// retryRun). Under an idempotency claim that carries the original request
// ID, run takes the claim's run ID (runs.ClaimRunID), so every execution of
// one idempotency record names the same run. Where the run write cannot
// commit with the completion record (no transactions), an
// execution whose completion was lost, whose lease was reclaimed, or whose
// run write's response was lost, is re-executed by the retry: it finds the
// run it created and answers for it instead of creating a second one (and a
// second set of effects); a retry found so is listed among its failed
// run's retries again (a set: once). That run is accepted when ours says it is this
// request's (existed is true); otherwise the answer is an error. Without a
// claim, a create whose write applied and whose answer was lost finds its
// own run the same way and succeeds (existed false). The claim
// is returned for the caller's log. A non-empty scope makes the run hold
// the tenant's scope (runs.RunStore.CreateScoped): the error is then
// runs.ErrScopeHeld while another live run holds it. A retry and a fork
// pass "": they never hold a scope.
func (h *Handler) createClaimedRun(ctx context.Context, run *runs.Run, scope string, ours func(prev runs.Run) bool) (claim idem.ClaimInfo, existed bool, err error) {
	claim, claimed := idem.FromContext(ctx)
	claimed = claimed && claim.OriginalRequestID != ""
	if claimed {
		run.ID = runs.ClaimRunID(run.Tenant, claim.ID, claim.OriginalRequestID)
	}
	create := h.cfg.Runs.Create
	if scope != "" {
		create = func(ctx context.Context, r runs.Run) error { return h.cfg.Runs.CreateScoped(ctx, r, scope) }
	}
	if err := create(ctx, *run); err != nil {
		if !errors.Is(err, runs.ErrRunExists) {
			return claim, false, err
		}
		// The store may hand back the run it found (RED_TEAM 344):
		// read only where it did not.
		var taken *runs.RunExistsError
		var prev runs.Run
		if errors.As(err, &taken) {
			prev = taken.Run
		} else if prev, err = h.cfg.Runs.Get(ctx, run.ID); err != nil {
			return claim, false, err
		}
		// Without a claim the id is new and random: a run found there is
		// this very create's, whose write applied and whose answer was
		// lost (the store's retry found it), when it is the run written
		// (the same creation time; the store keeps milliseconds).
		// Answered an error, the caller would retry into a second run.
		mine := claimed || prev.CreatedAt.UnixMilli() == run.CreatedAt.UnixMilli()
		if !mine || !ours(prev) {
			return claim, false, fmt.Errorf("apifn: run %s exists for another request", run.ID)
		}
		if run.RetryOf != "" && (taken == nil || !taken.Listed) {
			// The execution that created it may have stopped before
			// listing it among the failed run's retries (a Create that
			// lists it before its write has listed it: Listed).
			if err := h.cfg.Runs.LinkRetry(ctx, run.RetryOf, run.ID); err != nil {
				return claim, false, err
			}
		}
		if prev.Status == runs.StatusCancelled {
			// Cancelled since, or before it was written (a cancel of a
			// retry listed and not yet written, RED_TEAM 345): answered
			// as it is, never as pending.
			*run = prev
		}
		return claim, claimed, nil
	}
	return claim, false, nil
}

// writtenEarlier reports whether this request is a re-execution of a
// Layer-1 record (attempt > 1, or reclaimed) whose earlier execution
// already wrote its run of tenant (the id createClaimedRun gives it), a
// run ours accepts (the check createClaimedRun makes of it): a
// precondition that depends on the clock (the fork retention) or on what
// other requests did since (a failed run's retries reaching their cap)
// was then the first execution's, and passed. False outside a claim and
// on a first execution (no read).
func (h *Handler) writtenEarlier(ctx context.Context, tenant string, ours func(runs.Run) bool) (bool, error) {
	claim, ok := idem.FromContext(ctx)
	if !ok || claim.OriginalRequestID == "" || (claim.Attempt <= 1 && !claim.Reclaimed) {
		return false, nil
	}
	r, err := h.cfg.Runs.Get(ctx, runs.ClaimRunID(tenant, claim.ID, claim.OriginalRequestID))
	if errors.Is(err, runs.ErrRunNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return r.Tenant == tenant && ours(r), nil
}
