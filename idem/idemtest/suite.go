package idemtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/internal/respsize"
	"github.com/idemkit/idemkit/idem/keyspace"
)

type suite struct {
	cfg      *config
	newStore func(t *testing.T) idem.Store
}

const (
	digestA = "test-recipe-v1:sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "test-recipe-v1:sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	lease   = 30 * time.Second
	keep    = 24 * time.Hour
)

func (s *suite) start(t *testing.T) (idem.Store, time.Time) {
	t.Helper()
	return s.newStore(t), s.cfg.clock().Truncate(time.Millisecond)
}

// startClaimed starts a test with a fresh id claimed by "owner-1" at now.
func (s *suite) startClaimed(t *testing.T) (idem.Store, time.Time, string) {
	t.Helper()
	st, now := s.start(t)
	id := newID(t)
	claim(t, st, pending(id, digestA, "owner-1", now), now, idem.Claimed)
	return st, now, id
}

func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// newID returns a fresh caller-keyspace record id.
func newID(t *testing.T) string {
	return keyspace.ID("tenant-"+randHex(4), "POST /runs", "key-"+randHex(16))
}

func pending(id, digest, owner string, now time.Time) idem.Record {
	return idem.Record{
		ID:            id,
		Digest:        digest,
		State:         idem.StatePending,
		Owner:         owner,
		LeaseExpires:  now.Add(lease),
		RequestID:     "req-" + owner,
		RawBodySHA256: rawBody(owner),
		Expires:       now.Add(keep),
	}
}

// rawBody is the raw-body hash of owner's attempt: each owner's request
// had different bytes (the same digest stands for one canonical request in
// two encodings). The claim carries it too (pending), and a store ignores
// it there: only the writes that end the attempt (Complete, Release) store
// it.
func rawBody(owner string) string {
	sum := sha256.Sum256([]byte("raw body of " + owner))
	return hex.EncodeToString(sum[:])
}

func resp(status int, body string) *idem.Response {
	return &idem.Response{
		Status:  status,
		Headers: map[string][]string{"Content-Type": {"application/json"}, "X-Multi": {"b", "a"}},
		Body:    []byte(body),
	}
}

var ctx = context.Background()

// claims holds the record every successful claim of the suite returned, by
// id and owner: Complete is handed the record its claim returned, as the
// Guard does.
var claims sync.Map

func remember(res idem.ClaimResult) {
	if res.Decision == idem.Claimed || res.Decision == idem.Reclaimed {
		claims.Store(res.Record.ID+"\x00"+res.Record.Owner, res.Record)
	}
}

// claimed returns the record the claim of id by owner returned.
func claimed(t *testing.T, id, owner string) idem.Record {
	t.Helper()
	r, ok := claims.Load(id + "\x00" + owner)
	if !ok {
		t.Fatalf("no claim of the record by %s", owner)
	}
	return r.(idem.Record)
}

// claimedOrNot is the record the claim of id by owner returned, or, for an
// owner that never claimed id, the record such a claim at now would have
// returned (what a caller holding a forged or foreign claim passes).
func claimedOrNot(id, owner string, now time.Time) idem.Record {
	if r, ok := claims.Load(id + "\x00" + owner); ok {
		return r.(idem.Record)
	}
	r := pending(id, digestA, owner, now)
	r.Attempt = 1
	r.Renewed = now
	return r
}

func claim(t *testing.T, st idem.Store, rec idem.Record, now time.Time, want idem.Decision) idem.Record {
	t.Helper()
	res, err := st.Claim(ctx, rec, now)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	remember(res)
	if res.Decision != want {
		t.Fatalf("Claim decision = %v, want %v (record %+v)", res.Decision, want, summary(res.Record))
	}
	if res.Record.ID != rec.ID {
		t.Fatalf("Claim returned record id %q, want %q", res.Record.ID, rec.ID)
	}
	return res.Record
}

// claimReclaim claims rec expecting Reclaimed, and checks
// ClaimResult.LeaseExpired: true when the record taken over was pending with
// an expired lease, false when it was a retryable failure.
func claimReclaim(t *testing.T, st idem.Store, rec idem.Record, now time.Time, leaseExpired bool) idem.Record {
	t.Helper()
	res, err := st.Claim(ctx, rec, now)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	remember(res)
	if res.Decision != idem.Reclaimed || res.LeaseExpired != leaseExpired {
		t.Fatalf("Claim = %v LeaseExpired %v, want Reclaimed LeaseExpired %v (record %+v)", res.Decision, res.LeaseExpired, leaseExpired, summary(res.Record))
	}
	return res.Record
}

// complete completes the claim of id by owner as the Guard does: with the
// record the claim returned, carrying the raw body hash of owner's
// attempt.
func complete(t *testing.T, st idem.Store, id, owner string, out idem.Outcome, now time.Time) {
	t.Helper()
	c := claimed(t, id, owner)
	c.RawBodySHA256 = rawBody(owner)
	if err := st.Complete(ctx, c, out, now); err != nil {
		t.Fatalf("Complete: %v", err)
	}
}

// attempt is what owner hands Release for its claim of id, as the Guard
// does: the record its claim returned (or, for an owner that never
// claimed id, the one such a claim at now would have returned), carrying
// the raw body hash of owner's attempt.
func attempt(id, owner string, now time.Time) idem.Record {
	r := claimedOrNot(id, owner, now)
	r.RawBodySHA256 = rawBody(owner)
	return r
}

func get(t *testing.T, st idem.Store, id string, now time.Time) (idem.Record, bool) {
	t.Helper()
	rec, ok, err := st.Get(ctx, id, now)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return rec, ok
}

func mustGet(t *testing.T, st idem.Store, id string, now time.Time) idem.Record {
	t.Helper()
	rec, ok := get(t, st, id, now)
	if !ok {
		t.Fatalf("Get(%s): not found", id)
	}
	return rec
}

func wantFenced(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("%s: err = %v, want ErrFenced", what, err)
	}
}

func summary(r idem.Record) string {
	rs := "<nil>"
	if r.Response != nil {
		rs = fmt.Sprintf("{%d %d bytes}", r.Response.Status, len(r.Response.Body))
	}
	return fmt.Sprintf("{state=%s owner=%s attempt=%d digest=%.30s raw=%.12s lease=%s expires=%s response=%s}",
		r.State, r.Owner, r.Attempt, r.Digest, r.RawBodySHA256, r.LeaseExpires.Format(time.RFC3339Nano), r.Expires.Format(time.RFC3339Nano), rs)
}

// wantReplay asserts that a claim of id by owner at now finds the record
// (Exists) and replays want.
func wantReplay(t *testing.T, st idem.Store, id, owner string, now time.Time, want *idem.Response) {
	t.Helper()
	got := claim(t, st, pending(id, digestA, owner, now), now, idem.Exists)
	equalResponse(t, got.Response, want)
}

func equalResponse(t *testing.T, got, want *idem.Response) {
	t.Helper()
	if got == nil {
		t.Fatalf("response = nil, want status %d", want.Status)
	}
	if got.Status != want.Status {
		t.Fatalf("status = %d, want %d", got.Status, want.Status)
	}
	if got.NotKept != want.NotKept {
		t.Fatalf("NotKept = %d, want %d", got.NotKept, want.NotKept)
	}
	if !bytes.Equal(got.Body, want.Body) {
		t.Fatalf("body differs: got %d bytes, want %d bytes", len(got.Body), len(want.Body))
	}
	gh, wh := got.Headers, want.Headers
	if len(gh) == 0 && len(wh) == 0 {
		return
	}
	if !reflect.DeepEqual(gh, wh) {
		t.Fatalf("headers = %v, want %v", gh, wh)
	}
}

func checkRecord(t *testing.T, got idem.Record, want idem.Record) {
	t.Helper()
	if got.ID != want.ID || got.Digest != want.Digest || got.State != want.State || got.Owner != want.Owner ||
		got.Attempt != want.Attempt || got.RequestID != want.RequestID || got.RawBodySHA256 != want.RawBodySHA256 ||
		!got.LeaseExpires.Equal(want.LeaseExpires) || !got.Expires.Equal(want.Expires) {
		t.Fatalf("record =\n  %+v\nwant\n  %+v", summary(got)+" req="+got.RequestID, summary(want)+" req="+want.RequestID)
	}
}

func (s *suite) claimAbsent(t *testing.T) {
	st, now := s.start(t)
	id := newID(t)
	rec := pending(id, digestA, "owner-1", now)
	got := claim(t, st, rec, now, idem.Claimed)
	want := rec
	want.Attempt = 1
	want.RawBodySHA256 = "" // a claim writes none, whatever it carries
	checkRecord(t, got, want)
	if got.Response != nil {
		t.Fatalf("pending record has a response")
	}
	checkRecord(t, mustGet(t, st, id, now), want)
	if _, ok := get(t, st, newID(t), now); ok {
		t.Fatalf("Get of an absent id found a record")
	}
	// A claim ignores the response its record carries: the pending record
	// has none, for its owner, for Get and for a second claimer (which
	// would otherwise see a pending record answering as a replay).
	id2 := newID(t)
	rec2 := pending(id2, digestA, "owner-1", now)
	rec2.Response = resp(201, `{"carried":true}`)
	if got := claim(t, st, rec2, now, idem.Claimed); got.Response != nil {
		t.Fatalf("a claim carrying a response returned it: %s", summary(got))
	}
	if got := mustGet(t, st, id2, now); got.Response != nil {
		t.Fatalf("a claim carrying a response stored it: Get = %s", summary(got))
	}
	if got := claim(t, st, pending(id2, digestA, "owner-2", now), now, idem.Exists); got.State != idem.StatePending || got.Response != nil {
		t.Fatalf("a second claimer saw the first claim's carried response: %s", summary(got))
	}
}

func (s *suite) pendingLive(t *testing.T) {
	st, now := s.start(t)
	id := newID(t)
	first := claim(t, st, pending(id, digestA, "owner-1", now), now, idem.Claimed)
	// Just before the lease ends the claim is still live.
	at := now.Add(lease - time.Millisecond)
	got := claim(t, st, pending(id, digestA, "owner-2", at), at, idem.Exists)
	checkRecord(t, got, first)
	checkRecord(t, mustGet(t, st, id, at), first)
}

func (s *suite) mismatch(t *testing.T) {
	st, now := s.start(t)
	id := newID(t)
	first := claim(t, st, pending(id, digestA, "owner-1", now), now, idem.Claimed)
	got := claim(t, st, pending(id, digestB, "owner-2", now), now, idem.Exists)
	if got.Digest != digestA {
		t.Fatalf("existing digest = %q, want %q", got.Digest, digestA)
	}
	complete(t, st, id, "owner-1", idem.Outcome{State: idem.StateCompleted, Response: resp(201, `{"a":1}`), Expires: now.Add(keep)}, now)
	got = claim(t, st, pending(id, digestB, "owner-3", now), now, idem.Exists)
	if got.Digest != digestA || got.State != idem.StateCompleted {
		t.Fatalf("after complete: %s", summary(got))
	}
	_ = first
}

func (s *suite) replay(t *testing.T, state idem.State, r *idem.Response) {
	st, now, id := s.startClaimed(t)
	later := now.Add(time.Second)
	complete(t, st, id, "owner-1", idem.Outcome{State: state, Response: r, Expires: later.Add(keep)}, later)
	// Long after the (never renewed) lease: a final record is never reclaimed.
	at := now.Add(2 * lease)
	got := claim(t, st, pending(id, digestA, "owner-2", at), at, idem.Exists)
	if got.State != state {
		t.Fatalf("state = %s, want %s", got.State, state)
	}
	if got.Attempt != 1 || got.RequestID != "req-owner-1" {
		t.Fatalf("replayed record: %s req=%s", summary(got), got.RequestID)
	}
	equalResponse(t, got.Response, r)
	g := mustGet(t, st, id, at)
	if g.State != state || !g.Expires.Equal(later.Add(keep)) {
		t.Fatalf("Get after complete: %s", summary(g))
	}
	equalResponse(t, g.Response, r)
}

func (s *suite) replayCompleted(t *testing.T) {
	s.replay(t, idem.StateCompleted, resp(201, `{"id":"run_1","note":"<&>\u2028"}`))
}

func (s *suite) replayTerminal(t *testing.T) {
	s.replay(t, idem.StateTerminalFailure, resp(422, `{"error":"unprocessable","message":"no"}`))
}

func (s *suite) leaseExpiredReclaim(t *testing.T) {
	st, now, id := s.startClaimed(t)
	at := now.Add(lease) // lease ends exactly now: reclaimable
	rec := pending(id, digestA, "owner-2", at)
	got := claimReclaim(t, st, rec, at, true)
	want := rec
	want.Attempt = 2
	want.RequestID = "req-owner-1" // the first request id is kept
	want.RawBodySHA256 = ""        // owner-1's attempt never ended: no raw body hash
	checkRecord(t, got, want)
	checkRecord(t, mustGet(t, st, id, at), want)
	// And again: attempt 3.
	at2 := at.Add(lease + time.Second)
	rec3 := pending(id, digestA, "owner-3", at2)
	got = claimReclaim(t, st, rec3, at2, true)
	if got.Attempt != 3 || got.Owner != "owner-3" {
		t.Fatalf("second reclaim: %s", summary(got))
	}
}

func (s *suite) leaseExpiredOtherDigest(t *testing.T) {
	st, now := s.start(t)
	id := newID(t)
	first := claim(t, st, pending(id, digestA, "owner-1", now), now, idem.Claimed)
	at := now.Add(2 * lease)
	got := claim(t, st, pending(id, digestB, "owner-2", at), at, idem.Exists)
	checkRecord(t, got, first)
	// The original owner can still complete: nobody took the record over.
	complete(t, st, id, "owner-1", idem.Outcome{State: idem.StateCompleted, Response: resp(200, "ok"), Expires: at.Add(keep)}, at)
}

func (s *suite) retryableReclaim(t *testing.T) {
	st, now, id := s.startClaimed(t)
	complete(t, st, id, "owner-1", idem.Outcome{State: idem.StateRetryableFailure, Response: resp(503, "busy"), Expires: now.Add(keep)}, now)
	g := mustGet(t, st, id, now)
	if g.State != idem.StateRetryableFailure || g.Response != nil {
		t.Fatalf("retryable record: %s (a retryable response is never stored)", summary(g))
	}
	// A different digest does not reclaim it.
	claim(t, st, pending(id, digestB, "owner-x", now), now, idem.Exists)
	// The same digest reclaims at once, without waiting for any lease (not
	// a lease reclaim).
	got := claimReclaim(t, st, pending(id, digestA, "owner-2", now), now, false)
	if got.Attempt != 2 || got.State != idem.StatePending || got.Owner != "owner-2" {
		t.Fatalf("reclaimed: %s", summary(got))
	}
	// A later final outcome replaces the record.
	complete(t, st, id, "owner-2", idem.Outcome{State: idem.StateCompleted, Response: resp(201, "done"), Expires: now.Add(keep)}, now)
	wantReplay(t, st, id, "owner-3", now, resp(201, "done"))
}

func (s *suite) releaseReclaim(t *testing.T) {
	st, now, id := s.startClaimed(t)
	if err := st.Release(ctx, attempt(id, "owner-1", now), now); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if g := mustGet(t, st, id, now); g.State != idem.StateRetryableFailure {
		t.Fatalf("after release: %s", summary(g))
	}
	wantFenced(t, "second Release", st.Release(ctx, attempt(id, "owner-1", now), now))
	got := claimReclaim(t, st, pending(id, digestA, "owner-2", now), now, false)
	if got.Attempt != 2 {
		t.Fatalf("attempt = %d, want 2", got.Attempt)
	}
}

// fencedAfterReclaim is the regression test for the Powertools trap: a slow
// first invocation whose lease was reclaimed must not overwrite or delete the
// second owner's record.
func (s *suite) fencedAfterReclaim(t *testing.T) {
	st, now := s.start(t)
	id := newID(t)
	claim(t, st, pending(id, digestA, "slow", now), now, idem.Claimed)
	at := now.Add(lease + time.Second)
	claim(t, st, pending(id, digestA, "fast", at), at, idem.Reclaimed)

	out := idem.Outcome{State: idem.StateCompleted, Response: resp(201, "slow"), Expires: at.Add(keep)}
	wantFenced(t, "stale Complete while reclaimed", st.Complete(ctx, claimed(t, id, "slow"), out, at))
	wantFenced(t, "stale Release while reclaimed", st.Release(ctx, attempt(id, "slow", at), at))
	wantFenced(t, "stale Renew while reclaimed", st.Renew(ctx, id, "slow", at.Add(time.Hour), at))
	wantFenced(t, "stale Delete while reclaimed", st.Delete(ctx, id, "slow", at))
	if g := mustGet(t, st, id, at); g.Owner != "fast" || g.State != idem.StatePending {
		t.Fatalf("record after stale writes: %s", summary(g))
	}
	// A fenced Complete or Release writes nothing, the raw body hash it
	// carries included.
	if g := mustGet(t, st, id, at); g.RawBodySHA256 != "" {
		t.Fatalf("a fenced write stored its raw body hash: %s", summary(g))
	}

	complete(t, st, id, "fast", idem.Outcome{State: idem.StateCompleted, Response: resp(201, "fast"), Expires: at.Add(keep)}, at)
	// The slow invocation finishes late: its completion and its delete are
	// both rejected, and the record keeps the second response.
	late := at.Add(time.Second)
	wantFenced(t, "late Complete", st.Complete(ctx, claimed(t, id, "slow"), out, late))
	wantFenced(t, "late Delete", st.Delete(ctx, id, "slow", late))
	wantFenced(t, "late Release", st.Release(ctx, attempt(id, "slow", late), late))
	wantReplay(t, st, id, "third", late, resp(201, "fast"))
	if g := mustGet(t, st, id, late); g.RawBodySHA256 != rawBody("fast") {
		t.Fatalf("after the slow owner's fenced writes: %s, want the raw body hash of fast's attempt", summary(g))
	}
}

func (s *suite) fencedAfterFinal(t *testing.T) {
	st, now, id := s.startClaimed(t)
	complete(t, st, id, "owner-1", idem.Outcome{State: idem.StateCompleted, Response: resp(200, "one"), Expires: now.Add(keep)}, now)
	// Even the owner cannot write again once the outcome is final.
	wantFenced(t, "second Complete", st.Complete(ctx, claimed(t, id, "owner-1"), idem.Outcome{State: idem.StateCompleted, Response: resp(200, "two"), Expires: now.Add(keep)}, now))
	wantFenced(t, "Renew after final", st.Renew(ctx, id, "owner-1", now.Add(time.Hour), now))
	wantFenced(t, "Release after final", st.Release(ctx, attempt(id, "owner-1", now), now))
	wantFenced(t, "Delete after final", st.Delete(ctx, id, "owner-1", now))
	equalResponse(t, mustGet(t, st, id, now).Response, resp(200, "one"))
	// The fenced Release wrote nothing: not its raw body hash either (a
	// second Complete's would be the same owner's, so only a hash no
	// attempt of owner-1 had would show it).
	other := attempt(id, "owner-1", now)
	other.RawBodySHA256 = rawBody("someone else")
	wantFenced(t, "Release after final, another hash", st.Release(ctx, other, now))
	if g := mustGet(t, st, id, now); g.RawBodySHA256 != rawBody("owner-1") {
		t.Fatalf("after fenced writes: %s, want the raw body hash of the completed attempt", summary(g))
	}
}

func (s *suite) fencedUnknown(t *testing.T) {
	st, now := s.start(t)
	id := newID(t)
	wantOwnerWritesFenced(t, st, id, "o", "of absent record", now)
}

func (s *suite) renew(t *testing.T) {
	st, now, id := s.startClaimed(t)
	at := now.Add(lease / 2)
	newLease := at.Add(lease)
	if err := st.Renew(ctx, id, "owner-1", newLease, at); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if g := mustGet(t, st, id, at); !g.LeaseExpires.Equal(newLease) {
		t.Fatalf("lease = %s, want %s", g.LeaseExpires, newLease)
	}
	// The old lease end no longer allows a reclaim.
	old := now.Add(lease)
	claim(t, st, pending(id, digestA, "owner-2", old), old, idem.Exists)
	// Renewing after the lease ran out, with nobody else claiming, is still
	// the owner's right (the owner token is the fence).
	at2 := newLease.Add(time.Millisecond)
	if err := st.Renew(ctx, id, "owner-1", at2.Add(lease), at2); err != nil {
		t.Fatalf("Renew after lease end, unclaimed: %v", err)
	}
	end := at2.Add(lease)
	claim(t, st, pending(id, digestA, "owner-2", end), end, idem.Reclaimed)
	wantFenced(t, "Renew after reclaim", st.Renew(ctx, id, "owner-1", end.Add(lease), end))
}

// renewed: Claim, Reclaim and Renew record when the owner last wrote its
// lease (millisecond precision), Complete and Release clear it, and a
// failed claim leaves it alone.
func (s *suite) renewed(t *testing.T) {
	st, now := s.start(t)
	id := newID(t)
	at := func(d time.Duration) time.Time { return now.Add(d) }
	want := func(what string, got idem.Record, w time.Time) {
		t.Helper()
		if !got.Renewed.Equal(w) {
			t.Fatalf("%s: Renewed = %s, want %s", what, got.Renewed, w)
		}
	}
	now = now.Add(123 * time.Microsecond) // sub-millisecond part is dropped
	ms := now.Truncate(time.Millisecond)
	want("Claim result", claim(t, st, pending(id, digestA, "owner-1", now), now, idem.Claimed), ms)
	want("Get after Claim", mustGet(t, st, id, now), ms)
	later := at(lease / 3)
	if err := st.Renew(ctx, id, "owner-1", later.Add(lease), later); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	want("Get after Renew", mustGet(t, st, id, later), later.Truncate(time.Millisecond))
	// A duplicate that finds the live claim changes nothing.
	dup := at(lease / 2)
	want("Exists", claim(t, st, pending(id, digestA, "owner-2", dup), dup, idem.Exists), later.Truncate(time.Millisecond))
	want("Get after a lost claim", mustGet(t, st, id, dup), later.Truncate(time.Millisecond))
	// A reclaim after the lease ran out is a fresh write by the new owner.
	re := later.Add(2 * lease)
	want("Reclaim result", claim(t, st, pending(id, digestA, "owner-2", re), re, idem.Reclaimed), re.Truncate(time.Millisecond))
	want("Get after Reclaim", mustGet(t, st, id, re), re.Truncate(time.Millisecond))
	if err := st.Release(ctx, attempt(id, "owner-2", re), re); err != nil {
		t.Fatalf("Release: %v", err)
	}
	want("Get after Release", mustGet(t, st, id, re), time.Time{})
	re2 := re.Add(time.Second)
	claim(t, st, pending(id, digestA, "owner-3", re2), re2, idem.Reclaimed)
	complete(t, st, id, "owner-3", idem.Outcome{State: idem.StateCompleted, Response: resp(201, "{}"), Expires: re2.Add(time.Hour)}, re2)
	want("Get after Complete", mustGet(t, st, id, re2), time.Time{})
}

func (s *suite) delete(t *testing.T) {
	st, now, id := s.startClaimed(t)
	wantFenced(t, "Delete by another owner", st.Delete(ctx, id, "owner-2", now))
	if err := st.Delete(ctx, id, "owner-1", now); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, ok := get(t, st, id, now); ok {
		t.Fatalf("record still present after Delete")
	}
	// A deleted record leaves no trace: a different digest claims afresh.
	got := claim(t, st, pending(id, digestB, "owner-3", now), now, idem.Claimed)
	if got.Attempt != 1 || got.RequestID != "req-owner-3" {
		t.Fatalf("claim after delete: %s", summary(got))
	}
}

func (s *suite) expiry(t *testing.T) {
	for _, state := range []idem.State{idem.StatePending, idem.StateCompleted, idem.StateTerminalFailure, idem.StateRetryableFailure} {
		t.Run(string(state), func(t *testing.T) {
			st, now := s.start(t)
			id := newID(t)
			rec := pending(id, digestA, "owner-1", now)
			rec.LeaseExpires = now.Add(48 * time.Hour) // a lease outliving retention
			claim(t, st, rec, now, idem.Claimed)
			if state != idem.StatePending {
				complete(t, st, id, "owner-1", idem.Outcome{State: state, Response: resp(200, "x"), Expires: now.Add(keep)}, now)
			}
			before := now.Add(keep - time.Millisecond)
			if _, ok := get(t, st, id, before); !ok {
				t.Fatalf("record gone before its expiry")
			}
			at := now.Add(keep) // expiry is inclusive: at Expires the record is gone
			if _, ok := get(t, st, id, at); ok {
				t.Fatalf("expired record still visible to Get")
			}
			// An expired record is absent for Claim, whatever its state and digest.
			got := claim(t, st, pending(id, digestB, "owner-2", at), at, idem.Claimed)
			if got.Attempt != 1 || got.RequestID != "req-owner-2" || got.Response != nil || got.Digest != digestB {
				t.Fatalf("claim over expired record: %s", summary(got))
			}
			wantFenced(t, "old owner after expiry", st.Complete(ctx, claimed(t, id, "owner-1"), idem.Outcome{State: idem.StateCompleted, Response: resp(200, "x"), Expires: at.Add(keep)}, at))
		})
	}
}

func (s *suite) expiryFences(t *testing.T) {
	st, now := s.start(t)
	id := newID(t)
	rec := pending(id, digestA, "owner-1", now)
	rec.Expires = now.Add(time.Minute)
	rec.LeaseExpires = now.Add(time.Hour)
	claim(t, st, rec, now, idem.Claimed)
	at := now.Add(time.Minute)
	// Nobody reclaimed, but the record expired (TTL deletes lazily): every
	// write of the old owner must still be rejected.
	wantOwnerWritesFenced(t, st, id, "owner-1", "after expiry", at)
}

// wantOwnerWritesFenced asserts that every write of owner to id at now
// (Complete, Release, Renew, Delete) is ErrFenced, and that id is then
// absent to Get.
func wantOwnerWritesFenced(t *testing.T, st idem.Store, id, owner, when string, now time.Time) {
	t.Helper()
	out := idem.Outcome{State: idem.StateCompleted, Response: resp(200, "x"), Expires: now.Add(keep)}
	wantFenced(t, "Complete "+when, st.Complete(ctx, claimedOrNot(id, owner, now), out, now))
	wantFenced(t, "Release "+when, st.Release(ctx, attempt(id, owner, now), now))
	wantFenced(t, "Renew "+when, st.Renew(ctx, id, owner, now.Add(time.Hour), now))
	wantFenced(t, "Delete "+when, st.Delete(ctx, id, owner, now))
	if _, ok := get(t, st, id, now); ok {
		t.Fatalf("record visible after fenced writes %s", when)
	}
}

func (s *suite) noExpiry(t *testing.T) {
	st, now := s.start(t)
	id := newID(t)
	rec := pending(id, digestA, "owner-1", now)
	rec.Expires = time.Time{}
	got := claim(t, st, rec, now, idem.Claimed)
	if !got.Expires.IsZero() {
		t.Fatalf("Expires = %s, want zero (never)", got.Expires)
	}
	complete(t, st, id, "owner-1", idem.Outcome{State: idem.StateCompleted, Response: resp(200, "forever")}, now)
	far := now.AddDate(100, 0, 0)
	g := mustGet(t, st, id, far)
	if !g.Expires.IsZero() {
		t.Fatalf("Expires = %s, want zero", g.Expires)
	}
	wantReplay(t, st, id, "owner-2", far, resp(200, "forever"))
}

func (s *suite) completeSetsExpiry(t *testing.T) {
	st, now, id := s.startClaimed(t)
	exp := now.Add(2 * keep)
	complete(t, st, id, "owner-1", idem.Outcome{State: idem.StateCompleted, Response: resp(200, "x"), Expires: exp}, now)
	if _, ok := get(t, st, id, now.Add(keep)); !ok {
		t.Fatalf("record expired at the claim's expiry, not the completion's")
	}
	if _, ok := get(t, st, id, exp); ok {
		t.Fatalf("record visible at the completion's expiry")
	}
}

// completeKeepsClaim: a completion keeps every attribute the claim stored
// (attempt, first request id, digest, owner), stores the raw-body hash of
// the attempt that ran (the reclaimer's), takes the outcome's state and
// retention, and leaves no lease and no liveness, also after a reclaim and
// a renewal.
func (s *suite) completeKeepsClaim(t *testing.T) {
	for _, state := range []idem.State{idem.StateCompleted, idem.StateTerminalFailure, idem.StateRetryableFailure} {
		t.Run(string(state), func(t *testing.T) {
			st, now, id := s.startClaimed(t)
			at := now.Add(lease)
			rec := claimReclaim(t, st, pending(id, digestA, "owner-2", at), at, true)
			renewAt := at.Add(time.Second)
			if err := st.Renew(ctx, id, "owner-2", renewAt.Add(lease), renewAt); err != nil {
				t.Fatalf("Renew: %v", err)
			}
			exp := renewAt.Add(2 * keep)
			complete(t, st, id, "owner-2", idem.Outcome{State: state, Response: resp(200, "kept"), Expires: exp}, renewAt)
			if rec.RawBodySHA256 != "" {
				t.Fatalf("reclaim of a crashed claim has a raw body hash: %s", summary(rec))
			}
			want := rec
			want.State, want.LeaseExpires, want.Expires = state, time.Time{}, exp
			want.RawBodySHA256 = rawBody("owner-2") // the completion's: the attempt that ran
			if want.Attempt != 2 || want.RequestID != "req-owner-1" {
				t.Fatalf("reclaimed record: %s req=%s", summary(want), want.RequestID)
			}
			g := mustGet(t, st, id, renewAt)
			checkRecord(t, g, want)
			if !g.Renewed.IsZero() {
				t.Fatalf("completed record still reports Renewed %s", g.Renewed)
			}
			if state.Final() {
				equalResponse(t, g.Response, resp(200, "kept"))
			} else if g.Response != nil {
				t.Fatalf("retryable record has a response")
			}
		})
	}
}

// completeNeedsClaim: Complete is handed the record Claim returned; one
// without digest, pending state or attempt is ErrInvalidRecord and writes
// nothing, even from the live owner.
func (s *suite) completeNeedsClaim(t *testing.T) {
	st, now, id := s.startClaimed(t)
	out := idem.Outcome{State: idem.StateCompleted, Response: resp(200, "x"), Expires: now.Add(keep)}
	for _, bad := range []func(r *idem.Record){
		func(r *idem.Record) { r.Digest = "" },
		func(r *idem.Record) { r.State = idem.StateCompleted },
		func(r *idem.Record) { r.Attempt = 0 },
		func(r *idem.Record) { *r = idem.Record{ID: r.ID, Owner: r.Owner} },
	} {
		rec := claimed(t, id, "owner-1")
		bad(&rec)
		if err := st.Complete(ctx, rec, out, now); !errors.Is(err, idem.ErrInvalidRecord) {
			t.Fatalf("Complete(%s): err = %v, want ErrInvalidRecord", summary(rec), err)
		}
		if g := mustGet(t, st, id, now); g.State != idem.StatePending || g.Owner != "owner-1" {
			t.Fatalf("record changed by a refused completion: %s", summary(g))
		}
	}
	complete(t, st, id, "owner-1", out, now)
}

func (s *suite) roundTrip(t *testing.T, st idem.Store, now time.Time, r *idem.Response) {
	t.Helper()
	id := newID(t)
	claim(t, st, pending(id, digestA, "owner-1", now), now, idem.Claimed)
	complete(t, st, id, "owner-1", idem.Outcome{State: idem.StateCompleted, Response: r, Expires: now.Add(keep)}, now)
	wantReplay(t, st, id, "owner-2", now, r)
	equalResponse(t, mustGet(t, st, id, now).Response, r)
}

func (s *suite) responseShapes(t *testing.T) {
	st, now := s.start(t)
	s.roundTrip(t, st, now, &idem.Response{Status: 204})
	s.roundTrip(t, st, now, &idem.Response{Status: 200, Body: []byte{}})
	s.roundTrip(t, st, now, &idem.Response{Status: 200, Body: []byte{0, 0xff, 0xfe, '\n', 0x80}})
	s.roundTrip(t, st, now, &idem.Response{Status: 409, Headers: map[string][]string{
		"Content-Type": {"application/problem+json; charset=utf-8"},
		"Link":         {"<a>; rel=x", "<b>; rel=y", "<a>; rel=x"},
		"X-Empty":      {""},
	}, Body: []byte(`{"a":"\u00e9"}`)})
}

// completeKeepsNoReference: the outcome's response is the caller's once
// Complete returns (the Guard then adds its headers to the same header
// map for the answer): changing its headers and body afterwards changes
// neither the replay nor the stored record.
func (s *suite) completeKeepsNoReference(t *testing.T) {
	st, now, id := s.startClaimed(t)
	const body = `{"id":"run_1"}`
	r := resp(201, body)
	complete(t, st, id, "owner-1", idem.Outcome{State: idem.StateCompleted, Response: r, Expires: now.Add(keep)}, now)
	r.Headers["Openwop-Idempotent-Replay"] = []string{"true"}
	r.Headers["Content-Type"][0] = "text/plain"
	r.Headers["X-Multi"] = append(r.Headers["X-Multi"], "c")
	r.Headers["X-Multi"] = append(r.Headers["X-Multi"][:1], "spoiled")
	r.Body[0] = '['
	r.Status = 500
	want := resp(201, body)
	wantReplay(t, st, id, "owner-2", now, want)
	equalResponse(t, mustGet(t, st, id, now).Response, want)
}

// returnedRecordsAreTheCallers: a record Claim (Exists) or Get returns is
// the caller's (the Guard adds its headers to a replayed response in
// place): changing its response (its values, and appends over a
// truncated value list) changes neither a later replay nor a later read.
func (s *suite) returnedRecordsAreTheCallers(t *testing.T) {
	st, now, id := s.startClaimed(t)
	const body = `{"id":"run_1"}`
	complete(t, st, id, "owner-1", idem.Outcome{State: idem.StateCompleted, Response: resp(201, body), Expires: now.Add(keep)}, now)
	want := resp(201, body)
	spoil := func(r *idem.Response) {
		if r == nil {
			t.Fatal("no response")
		}
		r.Headers["Openwop-Idempotent-Replay"] = []string{"true"}
		r.Headers["Content-Type"][0] = "text/plain"
		// Appends over a truncated value list: a store that handed out
		// value slices sharing one backing array (its own, or another
		// copy's) would see a neighbour's values change.
		r.Headers["X-Multi"] = append(r.Headers["X-Multi"][:1], "spoiled", "more")
		r.Headers["Content-Type"] = append(r.Headers["Content-Type"][:0], "x", "y")
		r.Body[0] = '['
		r.Status = 500
	}
	spoil(claim(t, st, pending(id, digestA, "owner-2", now), now, idem.Exists).Response)
	g := mustGet(t, st, id, now)
	equalResponse(t, g.Response, want)
	spoil(g.Response)
	wantReplay(t, st, id, "owner-3", now, want)
	equalResponse(t, mustGet(t, st, id, now).Response, want)
}

// copiedValueListsAreSeparate: within one record Claim (Exists) or Get
// returns, each header's value list is its own: appending to one (as the
// Guard adds its headers to a replay in place) changes no other header
// of that copy, however the store packed the values it keeps.
func (s *suite) copiedValueListsAreSeparate(t *testing.T) {
	st, now, id := s.startClaimed(t)
	want := &idem.Response{Status: 201, Body: []byte(`{"id":"run_1"}`), Headers: map[string][]string{
		"Content-Type": {"application/json"},
		"Link":         {"<a>; rel=x", "<b>; rel=y"},
		"X-Empty":      {""},
		"X-Multi":      {"b", "a"},
		"Location":     {"/runs/run_1"},
	}}
	complete(t, st, id, "owner-1", idem.Outcome{State: idem.StateCompleted, Response: want, Expires: now.Add(keep)}, now)
	want = mustGet(t, st, id, now).Response
	for name := range want.Headers {
		for _, read := range []func() *idem.Response{
			func() *idem.Response { return mustGet(t, st, id, now).Response },
			func() *idem.Response {
				return claim(t, st, pending(id, digestA, "owner-2", now), now, idem.Exists).Response
			},
		} {
			r := read()
			r.Headers[name] = append(r.Headers[name], "appended")
			for other, vs := range want.Headers {
				if other != name && !slices.Equal(r.Headers[other], vs) {
					t.Fatalf("appending to %s changed %s in the same copy: %q, want %q", name, other, r.Headers[other], vs)
				}
			}
		}
	}
	wantReplay(t, st, id, "owner-3", now, want)
}

// notKept: a final outcome whose response was not kept (Response.NotKept:
// the original status and the body's size, no headers, no body) is
// stored and read back as written, by a replay's Claim and by Get, in
// both final states; it is final like any other (never reclaimed, even
// long past its lease, and its owner's writes are fenced). A not-kept
// response carrying headers or a body, or a negative size, is
// ErrInvalidRecord and writes nothing. Its status may be 0: the Guard
// records so a handler's answer without a status it answers.
func (s *suite) notKept(t *testing.T) {
	for _, c := range []struct {
		name   string
		state  idem.State
		status int
	}{
		{string(idem.StateCompleted), idem.StateCompleted, 201},
		{string(idem.StateTerminalFailure), idem.StateTerminalFailure, 422},
		{"status 0", idem.StateTerminalFailure, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, now, id := s.startClaimed(t)
			for _, bad := range []*idem.Response{
				{Status: c.status, NotKept: 10, Body: []byte("x")},
				{Status: c.status, NotKept: 10, Headers: map[string][]string{"Content-Type": {"application/json"}}},
				{Status: c.status, NotKept: -1},
			} {
				out := idem.Outcome{State: c.state, Response: bad, Expires: now.Add(keep)}
				if err := st.Complete(ctx, claimed(t, id, "owner-1"), out, now); !errors.Is(err, idem.ErrInvalidRecord) {
					t.Fatalf("Complete(NotKept %d, %d header(s), %d body bytes): err = %v, want ErrInvalidRecord",
						bad.NotKept, len(bad.Headers), len(bad.Body), err)
				}
				if g := mustGet(t, st, id, now); g.State != idem.StatePending || g.Owner != "owner-1" {
					t.Fatalf("record changed by a refused completion: %s", summary(g))
				}
			}
			want := &idem.Response{Status: c.status, NotKept: idem.MaxResponseBytes + 1}
			complete(t, st, id, "owner-1", idem.Outcome{State: c.state, Response: want, Expires: now.Add(keep)}, now)
			at := now.Add(2 * lease)
			got := claim(t, st, pending(id, digestA, "owner-2", at), at, idem.Exists)
			if got.State != c.state || got.Attempt != 1 {
				t.Fatalf("replayed record: %s", summary(got))
			}
			equalResponse(t, got.Response, want)
			if len(got.Response.Headers) != 0 || len(got.Response.Body) != 0 {
				t.Fatalf("not-kept response has headers %v or %d body bytes", got.Response.Headers, len(got.Response.Body))
			}
			g := mustGet(t, st, id, at)
			if g.State != c.state {
				t.Fatalf("Get: %s", summary(g))
			}
			equalResponse(t, g.Response, want)
			// Final: even its owner cannot write again, nor release it for
			// a re-run.
			wantFenced(t, "Release after a not-kept completion", st.Release(ctx, attempt(id, "owner-1", at), at))
			wantFenced(t, "Complete after a not-kept completion", st.Complete(ctx, claimed(t, id, "owner-1"),
				idem.Outcome{State: idem.StateCompleted, Response: resp(200, "kept"), Expires: at.Add(keep)}, at))
			equalResponse(t, mustGet(t, st, id, at).Response, want)
		})
	}
}

// responseLost: a completed record part of whose response the backend
// lost (a chunk item gone) can never be replayed byte-exactly: a replay's
// Claim and Get fail with idem.ErrNotKept, not an outage and never a
// response (a claim with another payload is still a mismatch); the record stays final (not reclaimed long past its lease, so
// the work never runs again; its owner's writes are fenced) and is absent
// once its retention ends, as every record.
func (s *suite) responseLost(t *testing.T) {
	st, now, id := s.startClaimed(t)
	body := make([]byte, 1<<20)
	if _, err := rand.Read(body); err != nil {
		t.Fatal(err)
	}
	r := &idem.Response{Status: 201, Headers: map[string][]string{"Content-Type": {"application/octet-stream"}}, Body: body}
	complete(t, st, id, "owner-1", idem.Outcome{State: idem.StateCompleted, Response: r, Expires: now.Add(keep)}, now)
	s.cfg.lose(t, st, id)
	lost := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, idem.ErrNotKept) || errors.Is(err, idem.ErrStoreUnavailable) {
			t.Fatalf("%s: err = %v, want ErrNotKept (and not an outage)", what, err)
		}
	}
	for _, at := range []time.Time{now, now.Add(2 * lease), now.Add(keep - time.Second)} {
		res, err := st.Claim(ctx, pending(id, digestA, "owner-2", at), at)
		lost(fmt.Sprintf("Claim at +%s", at.Sub(now)), err)
		if res.Decision == idem.Claimed || res.Decision == idem.Reclaimed {
			t.Fatalf("Claim at +%s took the record over: %s", at.Sub(now), summary(res.Record))
		}
		_, _, err = st.Get(ctx, id, at)
		lost(fmt.Sprintf("Get at +%s", at.Sub(now)), err)
	}
	// A request with another payload is still a mismatch (409), not the
	// lost response's answer: its claim reads no response.
	if res, err := st.Claim(ctx, pending(id, digestB, "owner-2", now), now); err != nil || res.Decision != idem.Exists || res.Record.Digest != digestA {
		t.Fatalf("Claim with another digest = %v %s, %v; want Exists (a mismatch)", res.Decision, summary(res.Record), err)
	}
	wantFenced(t, "Release by the owner", st.Release(ctx, attempt(id, "owner-1", now), now))
	wantFenced(t, "Complete by the owner", st.Complete(ctx, claimed(t, id, "owner-1"),
		idem.Outcome{State: idem.StateCompleted, Response: resp(200, "again"), Expires: now.Add(keep)}, now))
	end := now.Add(keep)
	if _, found := get(t, st, id, end); found {
		t.Fatal("the record is read past its retention")
	}
	claim(t, st, pending(id, digestA, "owner-3", end), end, idem.Claimed)
}

func (s *suite) largeResponses(t *testing.T) {
	st, now := s.start(t)
	random := make([]byte, idem.MaxResponseBytes)
	if _, err := rand.Read(random); err != nil {
		t.Fatal(err)
	}
	compressible := bytes.Repeat([]byte(`{"row":"abcdefgh","n":12345678},`), idem.MaxResponseBytes/32)
	for name, body := range map[string][]byte{
		"incompressible-6MB": random,
		"compressible-6MB":   compressible[:idem.MaxResponseBytes],
		"just-over-400KB":    random[:400*1024+1],
	} {
		t.Run(name, func(t *testing.T) {
			s.roundTrip(t, st, now, &idem.Response{Status: 200, Headers: map[string][]string{"Content-Type": {"application/octet-stream"}}, Body: body})
		})
	}
}

// largeHeaders: every store keeps the same responses. The stored form of
// a response (its status, each header's name and values, each with its
// length, and the body) has room for MaxResponseBytes of body and 1 MB
// more: a 6 MB body whose headers fill that room to the byte is kept and
// replayed byte-exactly; one byte more is idem.ErrTooLarge and writes
// nothing (the record stays its owner's, who records the response as not
// kept instead, as the Guard does). A store that kept the larger one would
// replay what another store answers 410 for.
func (s *suite) largeHeaders(t *testing.T) {
	st, now := s.start(t)
	body := make([]byte, idem.MaxResponseBytes)
	if _, err := rand.Read(body); err != nil {
		t.Fatal(err)
	}
	at := func(extra int) *idem.Response {
		r := &idem.Response{Status: 200, Body: body, Headers: map[string][]string{
			"Content-Type": {"application/octet-stream"},
			"X-Pad":        {""},
		}}
		n := respsize.Max - respsize.Encoded(r.Status, r.Headers, len(r.Body))
		// The value's own length prefix grows from one byte to three.
		r.Headers["X-Pad"][0] = strings.Repeat("h", n-2+extra)
		if got := respsize.Encoded(r.Status, r.Headers, len(r.Body)); got != respsize.Max+extra {
			t.Fatalf("stored form %d bytes, want %d", got, respsize.Max+extra)
		}
		return r
	}
	t.Run("at the room", func(t *testing.T) {
		s.roundTrip(t, st, now, at(0))
	})
	t.Run("a byte more", func(t *testing.T) {
		id := newID(t)
		claim(t, st, pending(id, digestA, "owner-1", now), now, idem.Claimed)
		out := idem.Outcome{State: idem.StateCompleted, Response: at(1), Expires: now.Add(keep)}
		if err := st.Complete(ctx, claimed(t, id, "owner-1"), out, now); !errors.Is(err, idem.ErrTooLarge) {
			t.Fatalf("Complete: err = %v, want ErrTooLarge", err)
		}
		if g := mustGet(t, st, id, now); g.State != idem.StatePending || g.Owner != "owner-1" || g.Response != nil {
			t.Fatalf("record changed by a refused completion: %s", summary(g))
		}
		notKept := &idem.Response{Status: 200, NotKept: len(body)}
		complete(t, st, id, "owner-1", idem.Outcome{State: idem.StateCompleted, Response: notKept, Expires: now.Add(keep)}, now)
		wantReplay(t, st, id, "owner-2", now, notKept)
	})
}

// largeTakeovers: an attempt whose lease ended without a completion (its
// process died, perhaps after storing part of its response) is taken
// over; the takeover completes with a response of another size (fewer or
// more bytes, compressible or not, empty), and the first owner's late
// completion, large too, is fenced. Every replay and read is exactly the
// takeover's response, whatever either size. A released attempt's large
// retryable answer is never kept, and a terminal failure's large answer
// is replayed like a completion's.
func (s *suite) largeTakeovers(t *testing.T) {
	st, now := s.start(t)
	random := make([]byte, 800<<10)
	if _, err := rand.Read(random); err != nil {
		t.Fatal(err)
	}
	compressible := bytes.Repeat([]byte(`{"row":"abcdefgh","n":12345678},`), idem.MaxResponseBytes/32)
	body := func(r *idem.Response) *idem.Response {
		r.Headers = map[string][]string{"Content-Type": {"application/octet-stream"}}
		return r
	}
	for _, c := range []struct {
		name          string
		second, late  []byte
		status        int
		terminal      bool
		releasedFirst bool
	}{
		{"to fewer bytes", random[:400<<10+1], random[100<<10:], 200, false, false},
		{"to more bytes", compressible[:idem.MaxResponseBytes], random[:400<<10+1], 200, false, false},
		{"to an empty body", []byte{}, random, 200, false, false},
		{"to one byte", random[7:8], random[:800<<10], 200, false, false},
		{"terminal failure", random[1:], random[:700<<10], 422, true, false},
		{"after a release", random[3 : 600<<10], random[5:], 201, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := newID(t)
			claim(t, st, pending(id, digestA, "owner-1", now), now, idem.Claimed)
			at := now.Add(lease)
			if c.releasedFirst {
				big := body(&idem.Response{Status: 503, Body: random})
				complete(t, st, id, "owner-1", idem.Outcome{State: idem.StateRetryableFailure, Response: big, Expires: now.Add(keep)}, now)
				if g := mustGet(t, st, id, now); g.Response != nil {
					t.Fatalf("a retryable answer was kept: %s", summary(g))
				}
				at = now
			}
			if got := claimReclaim(t, st, pending(id, digestA, "owner-2", at), at, !c.releasedFirst); got.Attempt != 2 {
				t.Fatalf("takeover: %s", summary(got))
			}
			state := idem.StateCompleted
			if c.terminal {
				state = idem.StateTerminalFailure
			}
			want := body(&idem.Response{Status: c.status, Body: c.second})
			complete(t, st, id, "owner-2", idem.Outcome{State: state, Response: want, Expires: at.Add(keep)}, at)
			late := body(&idem.Response{Status: 200, Body: c.late})
			wantFenced(t, "the first owner's late Complete", st.Complete(ctx, claimed(t, id, "owner-1"),
				idem.Outcome{State: idem.StateCompleted, Response: late, Expires: at.Add(keep)}, at))
			wantReplay(t, st, id, "owner-3", at, want)
			g := mustGet(t, st, id, at)
			if g.State != state || g.Attempt != 2 || g.Owner != "owner-2" {
				t.Fatalf("record: %s", summary(g))
			}
			equalResponse(t, g.Response, want)
		})
	}
}

// largeCompletionRace: a lapsed owner's large completion races a
// takeover that completes with another large response, while a duplicate
// reads the record: exactly one completion wins, and every response read,
// during the race and after it, is exactly the winner's, never the
// loser's nor a mix.
func (s *suite) largeCompletionRace(t *testing.T) {
	st, now := s.start(t)
	bodies := [2][]byte{make([]byte, 700<<10), make([]byte, 500<<10)}
	for _, b := range bodies {
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
	}
	for r := 0; r < 4; r++ {
		id := newID(t)
		first := claim(t, st, pending(id, digestA, "first", now), now, idem.Claimed)
		at := now.Add(lease)
		var (
			wg        sync.WaitGroup
			cerr      error
			res       idem.ClaimResult
			rerr, err error
			seen      [][]byte
		)
		wg.Add(3)
		go func() {
			defer wg.Done()
			cerr = st.Complete(ctx, first, idem.Outcome{State: idem.StateCompleted, Response: &idem.Response{Status: 200, Body: bodies[0]}, Expires: at.Add(keep)}, at)
		}()
		go func() {
			defer wg.Done()
			if res, rerr = st.Claim(ctx, pending(id, digestA, "second", at), at); rerr == nil && res.Decision == idem.Reclaimed {
				err = st.Complete(ctx, res.Record, idem.Outcome{State: idem.StateCompleted, Response: &idem.Response{Status: 200, Body: bodies[1]}, Expires: at.Add(keep)}, at)
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < 3; i++ {
				if g, ok, gerr := st.Get(ctx, id, at); gerr == nil && ok && g.Response != nil {
					seen = append(seen, g.Response.Body)
				}
			}
		}()
		wg.Wait()
		if rerr != nil || err != nil {
			t.Fatalf("takeover: claim %v, completion %v", rerr, err)
		}
		var want []byte
		switch {
		case cerr == nil && res.Decision == idem.Exists:
			want = bodies[0]
		case errors.Is(cerr, idem.ErrFenced) && res.Decision == idem.Reclaimed:
			want = bodies[1]
		default:
			t.Fatalf("complete err=%v, claim decision=%v: exactly one must win", cerr, res.Decision)
		}
		for _, b := range seen {
			if !bytes.Equal(b, want) {
				t.Fatalf("a read during the race answered %d bytes, not the winner's %d", len(b), len(want))
			}
		}
		wantReplay(t, st, id, "third", at, &idem.Response{Status: 200, Body: want})
	}
}

func (s *suite) callerKeyspace(t *testing.T) {
	st, now := s.start(t)
	for _, id := range []string{
		"",
		"schedule-fire:job-1:slot-7",
		"lock:scheduler",
		keyspace.CallerPrefix,
		keyspace.CallerPrefix + "schedule-fire:job-1:slot-7",
		"host:" + keyspace.ID("t", "op", "k"),
		keyspace.ID("t", "op", "k") + "x",
	} {
		rec := pending(id, digestA, "owner", now)
		_, err := st.Claim(ctx, rec, now)
		if !errors.Is(err, idem.ErrInvalidRecord) {
			t.Fatalf("Claim(%q): err = %v, want ErrInvalidRecord", id, err)
		}
		// An ID outside the caller keyspace may be a raw key (a caller's
		// Idempotency-Key passed unhashed, a host lock's name): the
		// refusal's text, which its caller logs, never quotes it.
		if id != "" && strings.Contains(err.Error(), id) {
			t.Fatalf("Claim(%q): the refusal quotes the ID: %v", id, err)
		}
	}
	for _, bad := range []func(r *idem.Record){
		func(r *idem.Record) { r.Owner = "" },
		func(r *idem.Record) { r.Digest = "" },
		func(r *idem.Record) { r.State = idem.StateCompleted },
	} {
		rec := pending(newID(t), digestA, "owner", now)
		bad(&rec)
		if _, err := st.Claim(ctx, rec, now); !errors.Is(err, idem.ErrInvalidRecord) {
			t.Fatalf("Claim(%s): err = %v, want ErrInvalidRecord", summary(rec), err)
		}
	}
}

func (s *suite) unsupportedWrite(t *testing.T) {
	st, now, id := s.startClaimed(t)
	type alien struct{ X int }
	err := st.Complete(ctx, claimed(t, id, "owner-1"), idem.Outcome{State: idem.StateCompleted, Response: resp(200, "x"), Expires: now.Add(keep), Writes: []any{alien{1}}}, now)
	if !errors.Is(err, idem.ErrUnsupportedWrite) {
		t.Fatalf("Complete with alien write: err = %v, want ErrUnsupportedWrite", err)
	}
	if g := mustGet(t, st, id, now); g.State != idem.StatePending {
		t.Fatalf("record changed by a rejected completion: %s", summary(g))
	}
	complete(t, st, id, "owner-1", idem.Outcome{State: idem.StateCompleted, Response: resp(200, "x"), Expires: now.Add(keep)}, now)
}

func (s *suite) txWrites(t *testing.T) {
	tx := s.cfg.tx
	st, now := s.start(t)

	t.Run("Committed", func(t *testing.T) {
		id := newID(t)
		name := "item-" + randHex(6)
		claim(t, st, pending(id, digestA, "owner-1", now), now, idem.Claimed)
		complete(t, st, id, "owner-1", idem.Outcome{State: idem.StateCompleted, Response: resp(201, "x"), Expires: now.Add(keep), Writes: []any{tx.Put(t, st, name)}}, now)
		if !tx.Exists(t, st, name) {
			t.Fatalf("business write not committed with the completion")
		}
	})
	t.Run("FencedWritesNothing", func(t *testing.T) {
		id := newID(t)
		name := "item-" + randHex(6)
		claim(t, st, pending(id, digestA, "slow", now), now, idem.Claimed)
		at := now.Add(lease)
		claim(t, st, pending(id, digestA, "fast", at), at, idem.Reclaimed)
		err := st.Complete(ctx, claimed(t, id, "slow"), idem.Outcome{State: idem.StateCompleted, Response: resp(201, "slow"), Expires: at.Add(keep), Writes: []any{tx.Put(t, st, name)}}, at)
		wantFenced(t, "fenced transactional Complete", err)
		if tx.Exists(t, st, name) {
			t.Fatalf("a fenced completion committed its business write")
		}
		if g := mustGet(t, st, id, at); g.Owner != "fast" || g.State != idem.StatePending {
			t.Fatalf("record after fenced tx: %s", summary(g))
		}
	})
	t.Run("ConflictWritesNothing", func(t *testing.T) {
		name := "item-" + randHex(6)
		id0 := newID(t)
		claim(t, st, pending(id0, digestA, "o", now), now, idem.Claimed)
		complete(t, st, id0, "o", idem.Outcome{State: idem.StateCompleted, Response: resp(201, "x"), Expires: now.Add(keep), Writes: []any{tx.Put(t, st, name)}}, now)
		id := newID(t)
		claim(t, st, pending(id, digestA, "owner-1", now), now, idem.Claimed)
		free := "item-" + randHex(6)
		err := st.Complete(ctx, claimed(t, id, "owner-1"), idem.Outcome{State: idem.StateCompleted, Response: resp(201, "y"), Expires: now.Add(keep), Writes: []any{tx.Put(t, st, free), tx.Put(t, st, name)}}, now)
		if !errors.Is(err, idem.ErrWriteConflict) {
			t.Fatalf("Complete with a conflicting write: err = %v, want ErrWriteConflict", err)
		}
		// The error names the write whose condition failed, by its index
		// in Outcome.Writes (the Guard hands its cause to the handler).
		var wc *idem.WriteConflictError
		if !errors.As(err, &wc) || wc.Index != 1 {
			t.Fatalf("Complete whose second write conflicts: err = %v, want a *WriteConflictError with Index 1", err)
		}
		if tx.Exists(t, st, free) {
			t.Fatalf("a cancelled completion committed its other write")
		}
		if g := mustGet(t, st, id, now); g.State != idem.StatePending || g.Owner != "owner-1" {
			t.Fatalf("record changed by a cancelled transaction: %s", summary(g))
		}
	})
}

func (s *suite) concurrentClaims(t *testing.T) {
	st, now := s.start(t)
	g, k := s.cfg.goroutines, s.cfg.keys
	ids := make([]string, k)
	for i := range ids {
		ids[i] = newID(t)
	}
	winners := make([]atomic.Int32, k)
	var wg sync.WaitGroup
	errs := make(chan error, g)
	start := make(chan struct{})
	for w := 0; w < g; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			<-start
			owner := fmt.Sprintf("owner-%d", w)
			for j := 0; j < k; j++ {
				i := (j + w*7) % k // different goroutines walk the keys in different orders
				res, err := st.Claim(ctx, pending(ids[i], digestA, owner, now), now)
				if err != nil {
					errs <- fmt.Errorf("goroutine %d key %d: %w", w, i, err)
					return
				}
				switch res.Decision {
				case idem.Claimed:
					winners[i].Add(1)
				case idem.Exists:
					if res.Record.State != idem.StatePending || res.Record.Owner == owner {
						errs <- fmt.Errorf("goroutine %d key %d: loser saw %s", w, i, summary(res.Record))
						return
					}
				default:
					errs <- fmt.Errorf("goroutine %d key %d: decision %v", w, i, res.Decision)
					return
				}
			}
		}(w)
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range winners {
		if n := winners[i].Load(); n != 1 {
			t.Fatalf("key %d: %d winners, want exactly 1", i, n)
		}
	}
}

func (s *suite) concurrentReclaim(t *testing.T) {
	st, now := s.start(t)
	id := newID(t)
	claim(t, st, pending(id, digestA, "crashed", now), now, idem.Claimed)
	at := now.Add(lease)
	n := s.cfg.goroutines
	var won atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			res, err := st.Claim(ctx, pending(id, digestA, fmt.Sprintf("r-%d", w), at), at)
			if err != nil {
				errs <- err
				return
			}
			if res.Decision == idem.Reclaimed {
				won.Add(1)
			} else if res.Decision != idem.Exists {
				errs <- fmt.Errorf("decision %v", res.Decision)
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if won.Load() != 1 {
		t.Fatalf("%d reclaimers won, want exactly 1", won.Load())
	}
	if g := mustGet(t, st, id, at); g.Attempt != 2 {
		t.Fatalf("attempt = %d after one reclaim, want 2", g.Attempt)
	}
}

// concurrentCompleteVsReclaim races the stale owner's completion against a
// reclaim: exactly one of them may win, and the record is consistent.
func (s *suite) concurrentCompleteVsReclaim(t *testing.T) {
	st, now := s.start(t)
	rounds := 20
	for r := 0; r < rounds; r++ {
		id := newID(t)
		first := claim(t, st, pending(id, digestA, "first", now), now, idem.Claimed)
		at := now.Add(lease)
		var cerr error
		var res idem.ClaimResult
		var rerr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			cerr = st.Complete(ctx, first, idem.Outcome{State: idem.StateCompleted, Response: resp(200, "first"), Expires: at.Add(keep)}, at)
		}()
		go func() {
			defer wg.Done()
			res, rerr = st.Claim(ctx, pending(id, digestA, "second", at), at)
		}()
		wg.Wait()
		if rerr != nil {
			t.Fatal(rerr)
		}
		g := mustGet(t, st, id, at)
		switch {
		case cerr == nil && res.Decision == idem.Exists:
			if g.State != idem.StateCompleted {
				t.Fatalf("complete won but record is %s", summary(g))
			}
		case errors.Is(cerr, idem.ErrFenced) && res.Decision == idem.Reclaimed:
			if g.State != idem.StatePending || g.Owner != "second" {
				t.Fatalf("reclaim won but record is %s", summary(g))
			}
		default:
			t.Fatalf("complete err=%v, claim decision=%v: exactly one must win", cerr, res.Decision)
		}
	}
}

// rawBodySHA256 (the ERP policy's raw_body_sha256, kept for archive): a
// claim writes none, whatever it carries (a replay, an in-flight answer
// and a mismatch never hash the raw body); the write that ends an attempt
// stores the hash its caller hands it (Complete, Release), beside the
// digest; a reclaim keeps the last ended attempt's until its own attempt
// ends, and a reclaimer that crashed leaves it as it was; a completed
// reclaim (the same canonical request sent in other bytes) replaces it
// with the reclaimer's, the body whose attempt ran; replay and Get keep
// it; a caller that sets none stores none, removing a previous one.
func (s *suite) rawBodySHA256(t *testing.T) {
	st, now := s.start(t)
	wantRaw := func(what string, got idem.Record, want string) {
		t.Helper()
		if got.RawBodySHA256 != want {
			t.Fatalf("%s: raw body hash = %q, want %q (%s)", what, got.RawBodySHA256, want, summary(got))
		}
	}
	id := newID(t)
	wantRaw("claimed record", claim(t, st, pending(id, digestA, "owner-1", now), now, idem.Claimed), "")
	wantRaw("Get of the pending record", mustGet(t, st, id, now), "")
	if err := st.Release(ctx, attempt(id, "owner-1", now), now); err != nil {
		t.Fatalf("Release: %v", err)
	}
	wantRaw("released record", mustGet(t, st, id, now), rawBody("owner-1"))
	wantRaw("reclaimed record", claimReclaim(t, st, pending(id, digestA, "owner-2", now), now, false), rawBody("owner-1"))
	wantRaw("Get of the reclaimed record", mustGet(t, st, id, now), rawBody("owner-1"))
	complete(t, st, id, "owner-2", idem.Outcome{State: idem.StateCompleted, Response: resp(201, `{"a":1}`), Expires: now.Add(keep)}, now)
	g := mustGet(t, st, id, now)
	wantRaw("completed record", g, rawBody("owner-2"))
	if g.Digest != digestA {
		t.Fatalf("completed record: %s", summary(g))
	}
	wantRaw("replayed record (a replay writes nothing)", claim(t, st, pending(id, digestA, "owner-3", now), now, idem.Exists), rawBody("owner-2"))
	wantRaw("mismatched claim (writes nothing)", claim(t, st, pending(id, digestB, "owner-4", now), now, idem.Exists), rawBody("owner-2"))
	wantRaw("Get after the replay", mustGet(t, st, id, now), rawBody("owner-2"))

	// A reclaimer that crashed wrote none: the record keeps the hash of
	// the attempt before it until the next attempt ends.
	id3 := newID(t)
	claim(t, st, pending(id3, digestA, "owner-a", now), now, idem.Claimed)
	if err := st.Release(ctx, attempt(id3, "owner-a", now), now); err != nil {
		t.Fatalf("Release: %v", err)
	}
	claimReclaim(t, st, pending(id3, digestA, "owner-b", now), now, false) // owner-b crashes
	wantRaw("in flight after the crash", claim(t, st, pending(id3, digestA, "owner-x", now), now, idem.Exists), rawBody("owner-a"))
	late := now.Add(lease)
	wantRaw("lease reclaim after the crash", claimReclaim(t, st, pending(id3, digestA, "owner-c", late), late, true), rawBody("owner-a"))
	complete(t, st, id3, "owner-c", idem.Outcome{State: idem.StateTerminalFailure, Response: resp(422, `{}`), Expires: late.Add(keep)}, late)
	wantRaw("completed after the crash", mustGet(t, st, id3, late), rawBody("owner-c"))

	// A caller that sets none stores none, and removes a previous one.
	id2 := newID(t)
	claim(t, st, pending(id2, digestA, "owner-4", now), now, idem.Claimed)
	none := attempt(id2, "owner-4", now)
	none.RawBodySHA256 = ""
	if err := st.Release(ctx, none, now); err != nil {
		t.Fatalf("Release: %v", err)
	}
	wantRaw("released without a hash", mustGet(t, st, id2, now), "")
	claimReclaim(t, st, pending(id2, digestA, "owner-5", now), now, false)
	if err := st.Release(ctx, attempt(id2, "owner-5", now), now); err != nil {
		t.Fatalf("Release: %v", err)
	}
	wantRaw("released with a hash", mustGet(t, st, id2, now), rawBody("owner-5"))
	claimReclaim(t, st, pending(id2, digestA, "owner-6", now), now, false)
	none = attempt(id2, "owner-6", now)
	none.RawBodySHA256 = ""
	if err := st.Release(ctx, none, now); err != nil {
		t.Fatalf("Release: %v", err)
	}
	wantRaw("a release without a hash after one with", mustGet(t, st, id2, now), "")
	claimReclaim(t, st, pending(id2, digestA, "owner-7", now), now, false)
	if err := st.Release(ctx, attempt(id2, "owner-7", now), now); err != nil {
		t.Fatalf("Release: %v", err)
	}
	claimReclaim(t, st, pending(id2, digestA, "owner-8", now), now, false)
	none = claimed(t, id2, "owner-8")
	none.RawBodySHA256 = ""
	if err := st.Complete(ctx, none, idem.Outcome{State: idem.StateCompleted, Response: resp(201, `{}`), Expires: now.Add(keep)}, now); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	wantRaw("a completion without a hash after a release with one", mustGet(t, st, id2, now), "")
}
