package idemtest

import (
	"context"
	"crypto/rand"
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
	err = down.Complete(ctx, claimed(t, id, "owner-1"), idem.Outcome{State: idem.StateCompleted, Response: resp(201, "x"), Expires: now.Add(time.Hour)}, now)
	want("Complete", err)
	if errors.Is(err, idem.ErrRecordNotSent) {
		// A small response is written with the record: the write was
		// sent (as far as the store can tell), so a store never says
		// it was not, which would have the Guard write again over a
		// completion that may have landed.
		t.Errorf("Complete of a small response on an unavailable store: %v, which says its write of the record was not sent", err)
	}
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

// responsePartNotWritten: a completion whose response is kept in a part
// beside the record, that part's write failing as an outage, fails
// before its write of the record is sent: its error matches
// idem.ErrRecordNotSent and idem.ErrStoreUnavailable, the record stays
// pending and the claim's (its lease, attempt and owner as the claim
// wrote them), and the not-kept outcome, written with the record alone,
// then lands, so that the Guard records that the handler ran rather
// than leave the record claimed for a second run. A not-kept outcome
// needs no part beside the record: it lands on that store as it is.
func (s *suite) responsePartNotWritten(t *testing.T) {
	st, now, id := s.startClaimed(t)
	failing := s.cfg.beside(t)
	body := make([]byte, 1<<20)
	if _, err := rand.Read(body); err != nil {
		t.Fatal(err)
	}
	r := &idem.Response{Status: 201, Headers: map[string][]string{"Content-Type": {"application/octet-stream"}}, Body: body}
	err := failing.Complete(ctx, claimed(t, id, "owner-1"), idem.Outcome{State: idem.StateCompleted, Response: r, Expires: now.Add(keep)}, now)
	if !errors.Is(err, idem.ErrRecordNotSent) || !errors.Is(err, idem.ErrStoreUnavailable) {
		t.Fatalf("Complete whose response part could not be written: %v, want an error matching ErrRecordNotSent and ErrStoreUnavailable", err)
	}
	want := claimed(t, id, "owner-1")
	if got := mustGet(t, st, id, now); got.State != idem.StatePending || got.Owner != "owner-1" || got.Attempt != want.Attempt ||
		!got.LeaseExpires.Equal(want.LeaseExpires) || got.Response != nil {
		t.Fatalf("record after the failed completion: %s, want it as claimed", summary(got))
	}
	nk := &idem.Response{Status: 201, NotKept: len(body)}
	if err := failing.Complete(ctx, claimed(t, id, "owner-1"), idem.Outcome{State: idem.StateCompleted, Response: nk, Expires: now.Add(keep)}, now); err != nil {
		t.Fatalf("the not-kept outcome after it: %v", err)
	}
	at := now.Add(2 * lease)
	got := claim(t, st, pending(id, digestA, "owner-2", at), at, idem.Exists)
	if got.State != idem.StateCompleted || got.Owner != "owner-1" {
		t.Fatalf("replayed record: %s", summary(got))
	}
	equalResponse(t, got.Response, nk)
}
