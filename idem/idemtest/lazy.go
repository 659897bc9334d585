package idemtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
)

// notTheClaims is the raw body hash lazyStore puts in the record it hands
// ClaimLazy: a store must take the claim's from the RawBodySource, never
// from the record.
const notTheClaims = "not-the-claims-raw-body-hash"

// lazyStore is a store whose Claim is made through its ClaimLazy: the
// claim's RawBodySHA256 comes from a RawBodySource instead of the record.
// It answers an error (which fails the case that claimed) when the store
// asked for the hash more than once, or wrote a record without asking.
type lazyStore struct {
	idem.Store
	lazy idem.LazyClaimer
}

// rawSource is a RawBodySource that counts the calls.
type rawSource struct {
	value string
	calls atomic.Int32
}

func (r *rawSource) RawBodySHA256() string {
	r.calls.Add(1)
	return r.value
}

func (l lazyStore) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	src := &rawSource{value: rec.RawBodySHA256}
	rec.RawBodySHA256 = notTheClaims
	res, err := l.lazy.ClaimLazy(ctx, rec, src, now)
	if err != nil {
		return res, err
	}
	switch n := src.calls.Load(); {
	case n > 1:
		return res, fmt.Errorf("idemtest: ClaimLazy asked for the raw body hash %d times, want at most once", n)
	case n == 0 && res.Decision != idem.Exists:
		return res, fmt.Errorf("idemtest: ClaimLazy wrote a record (%v) without asking for the raw body hash", res.Decision)
	}
	return res, nil
}

// claimLazyAsks: ClaimLazy asks for the raw body hash only when it writes
// the record, and then once: a first claim and a reclaim ask for it and
// store it; a claim answered Exists (a live pending record, a replay of a
// final one, another digest) does not ask.
func (s *suite) claimLazyAsks(t *testing.T) {
	st, now := s.start(t)
	lz := st.(lazyStore).lazy
	id := newID(t)
	claimLazy := func(rec idem.Record, want idem.Decision, wantCalls int32) idem.Record {
		t.Helper()
		src := &rawSource{value: rec.RawBodySHA256}
		rec.RawBodySHA256 = notTheClaims
		res, err := lz.ClaimLazy(ctx, rec, src, now)
		if err != nil {
			t.Fatalf("ClaimLazy: %v", err)
		}
		remember(res)
		if res.Decision != want {
			t.Fatalf("ClaimLazy decision = %v, want %v (record %s)", res.Decision, want, summary(res.Record))
		}
		if n := src.calls.Load(); n != wantCalls {
			t.Fatalf("ClaimLazy (%v) asked for the raw body hash %d times, want %d", res.Decision, n, wantCalls)
		}
		return res.Record
	}
	if got := claimLazy(pending(id, digestA, "owner-1", now), idem.Claimed, 1); got.RawBodySHA256 != rawBody("owner-1") {
		t.Fatalf("claimed record raw body hash = %q, want %q", got.RawBodySHA256, rawBody("owner-1"))
	}
	claimLazy(pending(id, digestA, "owner-2", now), idem.Exists, 0) // pending, lease live
	claimLazy(pending(id, digestB, "owner-2", now), idem.Exists, 0) // another digest
	if err := st.Release(ctx, id, "owner-1", now); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if got := claimLazy(pending(id, digestA, "owner-3", now), idem.Reclaimed, 1); got.RawBodySHA256 != rawBody("owner-3") {
		t.Fatalf("reclaimed record raw body hash = %q, want %q", got.RawBodySHA256, rawBody("owner-3"))
	}
	complete(t, st, id, "owner-3", idem.Outcome{State: idem.StateCompleted, Response: resp(201, `{"a":1}`), Expires: now.Add(keep)}, now)
	if got := claimLazy(pending(id, digestA, "owner-4", now), idem.Exists, 0); got.RawBodySHA256 != rawBody("owner-3") || got.State != idem.StateCompleted {
		t.Fatalf("replayed record: %s", summary(got))
	}
	claimLazy(pending(id, digestB, "owner-4", now), idem.Exists, 0) // a mismatch
	if g := mustGet(t, st, id, now); g.RawBodySHA256 != rawBody("owner-3") || g.Owner != "owner-3" {
		t.Fatalf("Get after the replays: %s", summary(g))
	}
	// A lease-expired pending record is reclaimed, and asks.
	id2 := newID(t)
	claimLazy(pending(id2, digestA, "owner-5", now), idem.Claimed, 1)
	later := now.Add(lease + time.Second)
	src := &rawSource{value: rawBody("owner-6")}
	rec := pending(id2, digestA, "owner-6", later)
	rec.RawBodySHA256 = notTheClaims
	res, err := lz.ClaimLazy(ctx, rec, src, later)
	if err != nil || res.Decision != idem.Reclaimed || !res.LeaseExpired || src.calls.Load() != 1 || res.Record.RawBodySHA256 != rawBody("owner-6") {
		t.Fatalf("lease-expired ClaimLazy = %v %v (lease expired %v, asked %d times, record %s)", res.Decision, err, res.LeaseExpired, src.calls.Load(), summary(res.Record))
	}
}
