// Package idemtest is the conformance suite every idem.Store must pass.
//
// A store package runs it from a test:
//
//	func TestConformance(t *testing.T) {
//		idemtest.Run(t, idemtest.Harness{NewStore: func(t *testing.T) idem.Store { return memstore.New() }})
//	}
//
// The suite injects the clock: it passes now to every Store method and
// advances it virtually, so expiry and lease tests never sleep. Stores must
// never read a clock themselves. Every transition of the record lifecycle is
// covered: claim, replay, in-flight, lease-expired reclaim (Attempt+1),
// retryable-failure reclaim, fenced complete/release/renew/delete rejected
// after a reclaim, expiry in every condition, digest mismatch, the caller
// keyspace, large responses (up to idem.MaxResponseBytes) byte-exactly, a
// final outcome whose response was not kept (idem.Response.NotKept), a
// response part of which the backend lost (idem.ErrNotKept), a
// completion whose response part beside the record could not be written
// (idem.ErrRecordNotSent, the record left as claimed), and a
// concurrency test (32 goroutines x 100 keys by default, exactly one winner
// per key).
package idemtest

import (
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/clock"
)

// Harness is what a store package hands the suite.
type Harness struct {
	// NewStore returns a fresh (or isolated) store. Called once per
	// subtest. Required.
	NewStore func(t *testing.T) idem.Store
	// Now is the suite's base clock, read once per test; the suite advances
	// time virtually from there. Default the system clock.
	Now func() time.Time
	// Goroutines and Keys size the concurrency test. Default 32 goroutines
	// x 100 keys; the contract is at least that, so only lower them for a
	// documented reason.
	Goroutines, Keys int
	// WithoutLargeResponses skips the multi-megabyte round-trip tests (for a
	// backend that cannot be exercised at that size; they are reported
	// as skipped with the reason, never silently passed). Default false.
	WithoutLargeResponses bool
	// TxWrites, if set, enables the transactional-completion tests.
	TxWrites *TxWrites
	// Unavailable, if set, returns a store over the same backend that
	// cannot use it: every call is throttled, refused or answered 5xx (for
	// dynamostore, a client whose every attempt fails by fault injection).
	// The suite then checks that every method's error matches
	// idem.ErrStoreUnavailable, and that a call whose context deadline has
	// passed fails as unavailable too, so the Guard answers 503 with
	// Retry-After. Default nil: the case is not run (a store that is never
	// unavailable, such as memstore, has no backend to lose).
	Unavailable func(t *testing.T) idem.Store
	// LosePartOfResponse, if set, removes part of the response the store
	// keeps beside record id, as a backend that lost an item (or removed
	// it before the record) would: for dynamostore, one of the record's
	// chunk items. The suite then checks that every replay and read of
	// that record fails with idem.ErrNotKept (never a response, never
	// an outage, never a claim that would run the work again). Default
	// nil: the case is not run (a store that keeps a record's response
	// with the record, such as memstore, cannot lose part of it).
	LosePartOfResponse func(t *testing.T, s idem.Store, id string)
	// FailBesideRecord, if set, returns a store over the same backend
	// whose writes of a response part kept beside the record fail as an
	// outage (for dynamostore, every chunk item's PutItem throttled past
	// the SDK's retries) while its writes of the record go through. The
	// suite then checks that a completion whose response needs such a
	// part fails with an error matching both idem.ErrRecordNotSent and
	// idem.ErrStoreUnavailable, the record left pending and the
	// claim's, and that the not-kept outcome then lands. Default nil:
	// the case is not run (a store that keeps a record's response with
	// the record, such as memstore, writes no such part). Every store
	// is checked, in UnavailableStoreErrors, never to say a write it sent
	// was not sent.
	FailBesideRecord func(t *testing.T) idem.Store
}

type config struct {
	clock       func() time.Time
	goroutines  int
	keys        int
	tx          *TxWrites
	large       bool
	unavailable func(t *testing.T) idem.Store
	lose        func(t *testing.T, s idem.Store, id string)
	beside      func(t *testing.T) idem.Store
}

// TxWrites lets the suite exercise Outcome.Writes, which are store-specific.
type TxWrites struct {
	// Put returns a write that creates the business item name (and fails if
	// it exists).
	Put func(t *testing.T, s idem.Store, name string) any
	// Exists reports whether the business item name exists.
	Exists func(t *testing.T, s idem.Store, name string) bool
}

// Run runs the conformance suite against the stores h.NewStore returns.
func Run(t *testing.T, h Harness) {
	if h.NewStore == nil {
		t.Fatal("idemtest: Harness.NewStore is required")
	}
	c := &config{clock: h.Now, goroutines: h.Goroutines, keys: h.Keys, large: !h.WithoutLargeResponses, tx: h.TxWrites, unavailable: h.Unavailable, lose: h.LosePartOfResponse, beside: h.FailBesideRecord}
	if c.clock == nil {
		c.clock = clock.System{}.Now
	}
	if c.goroutines == 0 {
		c.goroutines = 32
	}
	if c.keys == 0 {
		c.keys = 100
	}
	newStore := h.NewStore
	s := &suite{cfg: c, newStore: newStore}
	t.Run("ClaimAbsent", s.claimAbsent)
	t.Run("PendingLiveIsInFlight", s.pendingLive)
	t.Run("DigestMismatch", s.mismatch)
	t.Run("ReplayCompleted", s.replayCompleted)
	t.Run("ReplayTerminalFailure", s.replayTerminal)
	t.Run("LeaseExpiredReclaim", s.leaseExpiredReclaim)
	t.Run("LeaseExpiredOtherDigestNotReclaimed", s.leaseExpiredOtherDigest)
	t.Run("RetryableFailureReclaim", s.retryableReclaim)
	t.Run("ReleaseReclaim", s.releaseReclaim)
	t.Run("FencedAfterReclaim", s.fencedAfterReclaim)
	t.Run("FencedAfterFinal", s.fencedAfterFinal)
	t.Run("FencedUnknownRecord", s.fencedUnknown)
	t.Run("Renew", s.renew)
	t.Run("RenewedTracksOwnerWrites", s.renewed)
	t.Run("Delete", s.delete)
	t.Run("Expiry", s.expiry)
	t.Run("ExpiryFencesWrites", s.expiryFences)
	t.Run("NoExpiry", s.noExpiry)
	t.Run("CompleteSetsExpiry", s.completeSetsExpiry)
	t.Run("CompleteKeepsTheClaimedRecord", s.completeKeepsClaim)
	t.Run("CompleteNeedsTheClaimedRecord", s.completeNeedsClaim)
	t.Run("ResponseShapes", s.responseShapes)
	t.Run("CompleteKeepsNoReference", s.completeKeepsNoReference)
	t.Run("ReturnedRecordsAreTheCallers", s.returnedRecordsAreTheCallers)
	t.Run("CopiedValueListsAreSeparate", s.copiedValueListsAreSeparate)
	t.Run("RawBodySHA256", s.rawBodySHA256)
	t.Run("ResponseNotKept", s.notKept)
	if s.cfg.lose != nil { // a store that keeps a response with its record cannot lose part of it
		t.Run("ResponseLost", s.responseLost)
	}
	if s.cfg.beside != nil { // a store that keeps a response with its record writes no part beside it
		t.Run("ResponsePartNotWritten", s.responsePartNotWritten)
	}
	for _, lt := range []struct {
		name string
		fn   func(*testing.T)
	}{{"LargeResponses", s.largeResponses}, {"LargeResponseTakeovers", s.largeTakeovers}, {"LargeCompletionRace", s.largeCompletionRace}, {"LargeHeaders", s.largeHeaders}} {
		t.Run(lt.name, func(t *testing.T) {
			if !s.cfg.large {
				t.Skip("idemtest: the harness opts out of multi-megabyte responses (WithoutLargeResponses)")
			}
			lt.fn(t)
		})
	}
	t.Run("CallerKeyspaceOnly", s.callerKeyspace)
	t.Run("UnsupportedWrite", s.unsupportedWrite)
	if s.cfg.tx != nil { // stores without transactions prove their typed refusal in UnsupportedWrite
		t.Run("TxWrites", s.txWrites)
	}
	if s.cfg.unavailable != nil { // a store with no backend to lose is never unavailable
		t.Run("UnavailableStoreErrors", s.unavailableStore)
	}
	t.Run("ConcurrentClaims", s.concurrentClaims)
	t.Run("ConcurrentReclaim", s.concurrentReclaim)
	t.Run("ConcurrentCompleteVsReclaim", s.concurrentCompleteVsReclaim)
}
