package idemtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/clock"
)

// unavailableStore: every method of a store that cannot use its backend
// fails with an error matching idem.ErrStoreUnavailable (never a fenced or
// claim-lost answer), and a call made after its context's deadline fails as
// unavailable (idem.ErrStoreUnavailable or context.DeadlineExceeded), so
// the Guard answers such requests 503 with Retry-After.
func (s *suite) unavailableStore(t *testing.T) {
	healthy, now := s.start(t)
	id := newID(t)
	claim(t, healthy, pending(id, digestA, "owner-1", now), now, idem.Claimed)
	down := s.cfg.unavailable(t)
	ctx := context.Background()
	want := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, idem.ErrStoreUnavailable) {
			t.Errorf("%s on an unavailable store: %v, want an error matching idem.ErrStoreUnavailable", what, err)
		}
	}
	_, err := down.Claim(ctx, pending(newID(t), digestA, "owner-2", now), now)
	want("Claim", err)
	_, _, err = down.Get(ctx, id, now)
	want("Get", err)
	want("Complete", down.Complete(ctx, claimed(t, id, "owner-1"), idem.Outcome{State: idem.StateCompleted, Response: resp(201, "x"), Expires: now.Add(time.Hour)}, now))
	want("Release", down.Release(ctx, claimed(t, id, "owner-1"), now))
	want("Renew", down.Renew(ctx, id, "owner-1", now.Add(time.Minute), now))
	want("Delete", down.Delete(ctx, id, "owner-1", now))

	// A healthy store called after its deadline: unavailable, never a
	// fenced or lost answer.
	past, cancel := context.WithDeadline(ctx, clock.Wall().Add(-time.Second))
	defer cancel()
	if _, err := healthy.Claim(past, pending(newID(t), digestA, "owner-3", now), now); err != nil &&
		!errors.Is(err, idem.ErrStoreUnavailable) && !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Claim after its deadline: %v, want unavailable", err)
	}
	// The record the unavailable calls aimed at is untouched.
	if got := mustGet(t, healthy, id, now); got.State != idem.StatePending || got.Owner != "owner-1" {
		t.Errorf("record after the failed calls: %s", summary(got))
	}
}
