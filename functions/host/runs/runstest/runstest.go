// Package runstest is the conformance suite every run store (runs.RunStore
// with runs.LogStore) must pass. The same suite runs over runs.MemRuns and,
// through internal/dynamotest, over runs.DynamoRuns on DynamoDB Local, moto
// and dynalite, so the memory store every executor and API test trusts is
// held equal to the table the functions use.
//
// A store package runs it from a test:
//
//	func TestConformance(t *testing.T) {
//		runstest.Run(t, runstest.Harness{NewStore: func(t *testing.T) runstest.Store { return runs.NewMemRuns() }})
//	}
//
// The suite passes every time explicitly (stores never read a clock) and
// never sleeps. Its cases, by method:
//
//   - Create: a run reads back as written (version 1, epoch 0); an id taken
//     is ErrRunExists and changes nothing; a run without stamps or with
//     another tenant's id is refused and writes nothing; of racing creates
//     of one id exactly one wins; a lost answer's retry is ErrRunExists and
//     the run is there once; a run's RunOptions (configurable, tags,
//     metadata) read back byte for byte and no later write changes them,
//     a run without them has none; metadata filling the largest body the
//     host accepts (LargestBody) is stored and the run's later writes
//     still fit.
//   - Create/CancelWhileListed (Harness.NewHooked): a retry created
//     outside a Layer-1 claim, and a cancel of its id made while the
//     failed run lists it, at the moment a write of its run is sent: the
//     run is then never written live (cancelled by that cancel, or the
//     cancel finds it), in every write mode of the store.
//   - LinkRetry: a retry's Create lists it among the failed run's Retries
//     (a set, version left alone); LinkRetry again changes nothing; a
//     missing failed run is not an error.
//   - Get: ErrRunNotFound for no run.
//   - Transition: a compare-and-set on the status, returning the run as
//     stored (a version per change; a transition to running takes the run:
//     epoch + 1; a terminal one clears the wake and leaves Stale); a status
//     not in from is ErrStatusConflict with the current run; of racing
//     transitions exactly one wins; a lost answer's retry is
//     ErrStatusConflict with the run already at the target, one version
//     added.
//   - Finish: ends a running run (completed or failed) only under its
//     current claim epoch: an execution taken over (Adopt, Claim, Resume)
//     is ErrStatusConflict with the run running under the taker,
//     unchanged; the holder's end clears the wake and keeps the epoch; a
//     pending, cancelled or missing run is refused, and a status other
//     than completed or failed writes nothing; of an end racing takings,
//     it lands only if none came first; a lost answer's retry is
//     ErrStatusConflict with the run already ended, one version added.
//   - NoteFailure: counts atomically under racing callers; an ended run is
//     ErrStatusConflict and unchanged; a lost answer's retry counts again
//     (a count may be high, never low).
//   - Schedule, Due: a parked run is due from its wake time, earliest
//     first, up to the limit; an ended run is ErrStatusConflict; a lost
//     answer's retry leaves one wake.
//   - Park: Schedule of a running run only under its current claim
//     epoch: an execution taken over (Adopt, Claim) is ErrStatusConflict
//     with the run unparked and unchanged; the holder's park reads back
//     and is due from its time; a pending, ended or missing run is
//     refused; a lost answer's retry leaves one wake.
//   - Stale, Claim: Stale lists live runs without progress since the bound,
//     never ended ones, and listing again after a lost answer lists the
//     same; resumers passing at once take each listed run once; Claim
//     takes such a run (updatedAt now, epoch + 1)
//     and refuses one with progress since, a parked one, an ended one; of
//     racing claimers exactly one wins; a lost answer's retry is
//     ErrStatusConflict (the claim is progress) and the run is claimable
//     again only after the bound.
//   - Adopt: each call takes the run anew (epoch + 1), racing adopters each
//     get their own epoch; an ended run is ErrStatusConflict; a lost
//     answer's retry holds a later epoch and the earlier is fenced.
//   - Renew: under the current epoch it moves updatedAt and keeps the run
//     out of Stale; under an earlier epoch, or on an ended run, it is
//     ErrStatusConflict; a renewal racing a stale claim: exactly one of
//     them wins; a lost answer's retry succeeds again.
//   - AppendLog: appends under the fence (epoch and log length) only while
//     running; another epoch, another length or another status is
//     ErrStatusConflict and appends nothing; of racing executions (each
//     adopted) only the holder of the latest epoch appends; a lost answer's
//     retry is answered as applied and the events are there once; an
//     execution overtaken by Claim appends nothing.
//   - Breach: a pending or running run ends failed with the code and
//     message, the cap.breached event after its node log, the wake
//     cleared, out of Due and Stale, and the execution that held it is
//     refused its next append; a run that ended first is
//     ErrStatusConflict and unchanged; of breaches racing a completion
//     exactly one write wins and the log holds at most one cap.breached;
//     of breaches racing a keyed cancel exactly one wins (a cancel that
//     lost is handed the failed run, with no CancelledBy); a lost answer's retry is ErrStatusConflict with the run failed
//     under the code, the event there once.
//   - CreateScoped: a free scope is taken and the run created; the same
//     create again is ErrRunExists; a live holder (pending, running,
//     parked) refuses every other create (ErrScopeHeld naming it, no run
//     written); a holder that ended (completed, failed, cancelled, a
//     breached cap) is taken over; of racing creates of one scope (free,
//     or held by an ended run) exactly one wins; tenants never share a scope; a bad scopeId is
//     ErrBadScope; a lost answer's retry is ErrRunExists, the run there
//     once.
//   - Retention (a store with a retention, Harness.NewRetaining): every
//     end (completed, failed, cancelled, a breached cap, an execution's
//     Finish, from pending,
//     running or parked) carries the expiry end + retention in whole
//     seconds, returned, read back and stored (expiresAt, when the harness
//     reads items: Harness.StoredExpiry); a refused end changes it not; a
//     live run never carries one (pending, running, parked, claimed,
//     adopted, renewed, failures noted, log appended); of writers racing
//     to end a run the one end that wins sets it, and a run racing
//     writers keep live carries none; a lost answer's retry leaves the
//     first end's; with a backend counter an end is still one round trip;
//     a scope holder past its expiry (Harness.Expire) reads as missing,
//     the next create of its scope takes it over, and its id is fenced
//     from then on: a late Create of it is ErrRunExists, a late
//     CreateScoped ErrScopeHeld, and neither writes a run.
//   - Times: every time a store is handed (createdAt and updatedAt at
//     Create, each write's now, a node event's or cap.breached event's
//     time, a wake) is kept to the millisecond, as RunsTable keeps it, in
//     the run a write returns and the run read back alike; a node-log
//     append retried after a lost answer is still recognised as applied.
//   - Pause (PauseStore): pausing, draining, cutting and resuming (the
//     cases' own comments, pause.go); a drain whose execution stopped
//     mid-node is listed by Stale once its claim went unrenewed past the
//     bound, and ReleaseStalePause records its held run.paused once,
//     racing the node's end, the execution's renewal and park, a resume,
//     a cancel and other releases, and after a lost answer
//     (pausestale.go).
//   - RoundTrips: with a backend counter, every claim write that succeeds
//     (Transition, Claim, Adopt, Renew, AppendLog, Park, Finish, Breach,
//     ReleaseStalePause) and a Get cost one round trip each; a pause, a
//     resume and a drained node's end two.
package runstest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// Store is what the suite tests: a run store with a node log.
type Store interface {
	runs.RunStore
	runs.LogStore
	runs.PauseStore
}

// Harness is what a store package hands the suite.
type Harness struct {
	// NewStore returns an empty store (or one no other test writes to).
	// Called once per case. Required.
	NewStore func(t *testing.T) Store
	// Racers is how many goroutines each racing case starts. Default 16.
	Racers int
	// LoseNextAnswer, if set, makes the next backend call of op (the
	// store's write of the method under test: "PutItem", "UpdateItem")
	// apply and lose its answer, as a network does (for DynamoRuns, a
	// fault injected after send that the SDK retries). Each lost-answer
	// case arms it before its first call, which must be answered as its
	// write left the run (the store recognises its own landed write,
	// RED_TEAM 500; a Create's, ErrRunExists with the run as written,
	// which its caller takes for its own by the creation time), and
	// checks the caller's retry and the state. Default nil: the first call
	// is a plain call.
	LoseNextAnswer func(op string)
	// RoundTrips, if set, returns the backend round trips made since the
	// last ResetRoundTrips (a dynamotest.Counter's Total); the suite then
	// holds each claim write to its budget: a Transition, Claim, Adopt,
	// Renew (the heartbeat) and AppendLog that succeed cost one round trip
	// each, and a Get one.
	RoundTrips      func() int
	ResetRoundTrips func()
	// NewRetaining, if set, returns an empty store that keeps an ended run
	// for retention after its end (runs.MemRuns.Retention,
	// runs.DynamoRuns.Retention); the retention cases run over it. now is
	// the suite's clock, for a store that reads one to tell an expired run
	// (runs.MemRuns.Now): it stays before every expiry the cases stamp.
	// Default nil: they are not run.
	NewRetaining func(t *testing.T, retention time.Duration, now func() time.Time) Store
	// StoredExpiry, if set, reads the TTL attribute of run id as the store
	// keeps it (expiresAt, epoch seconds; ok false when absent), so the
	// retention cases check the stored item and not only the run read
	// back. Default nil: only the run read back is checked.
	StoredExpiry func(t *testing.T, st Store, id string) (sec int64, ok bool)
	// Expire, if set, does to run id of a retaining store what the
	// store's retention does once the run's expiry has passed and the
	// suite's clock (the now handed to NewRetaining) is past it: for
	// DynamoRuns, delete its item, as RunsTable's TTL does. Default nil:
	// the store tells an expired run by that clock alone (MemRuns.Now).
	Expire func(t *testing.T, st Store, id string)
	// NewHooked, if set, returns empty stores by name, one per write mode
	// the store has (DynamoRuns: its own conditional writes, and, where
	// the engine has transactions, Transactional), each calling before
	// just before each backend write of a run's item is sent (a PutItem
	// of a run, a TransactWriteItems holding one); the
	// Create/CancelWhileListed case runs over each. A store whose retry
	// listing and run are one step (MemRuns) never calls before. Default
	// nil: the case is not run.
	NewHooked func(t *testing.T, before func()) map[string]Store
}

// Run runs the whole suite, one subtest per case.
func Run(t *testing.T, h Harness) {
	if h.NewStore == nil {
		t.Fatal("runstest: Harness.NewStore is required")
	}
	if h.Racers <= 0 {
		h.Racers = 16
	}
	for _, c := range cases {
		if c.name == roundTripsCase && (h.RoundTrips == nil || h.ResetRoundTrips == nil) {
			continue // a store without a backend has no round trips to count
		}
		t.Run(c.name, func(t *testing.T) {
			c.fn(t, &env{st: h.NewStore(t), ctx: context.Background(), now: base, racers: h.Racers, loseNext: h.LoseNextAnswer, trips: h.RoundTrips, resetTrips: h.ResetRoundTrips})
		})
	}
	if h.NewHooked != nil {
		t.Run(cancelWhileListedCase, func(t *testing.T) { createCancelWhileListed(t, h.NewHooked) })
	}
	if h.NewRetaining == nil {
		return
	}
	for _, c := range retentionCases {
		if c.name == retentionOneWriteCase && (h.RoundTrips == nil || h.ResetRoundTrips == nil) {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			clk := &suiteClock{t: base.Add(time.Hour)}
			c.fn(t, &env{st: h.NewRetaining(t, retention, clk.Now), ctx: context.Background(), now: base, racers: h.Racers, loseNext: h.LoseNextAnswer,
				trips: h.RoundTrips, resetTrips: h.ResetRoundTrips, rawExpiry: h.StoredExpiry, clock: clk, expire: h.Expire})
		})
	}
}

// suiteClock is the clock a retaining store is handed: an hour past the
// suite's origin, before every expiry the cases stamp, until a case moves
// it past one (env.passExpiry).
type suiteClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *suiteClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *suiteClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// base is the suite's clock origin (whole milliseconds, as a table keeps
// times).
var base = time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)

type testCase struct {
	name string
	fn   func(t *testing.T, e *env)
}

// cases lists every case, grouped by method (see the package doc).
var cases = []testCase{
	{"Create/ReadsBack", createReadsBack},
	{"Create/Exists", createExists},
	{"Create/Refused", createRefused},
	{"Create/Race", createRace},
	{"Create/LostAnswer", createLostAnswer},
	{"Create/KeepsOptions", createKeepsOptions},
	{"Create/LargestOptions", createLargestOptions},
	{"LinkRetry/Set", linkRetrySet},
	{"Get/NotFound", getNotFound},
	{"Transition/CompareAndSet", transitionCAS},
	{"Transition/Terminal", transitionTerminal},
	{"Transition/Race", transitionRace},
	{"Transition/LostAnswer", transitionLostAnswer},
	{"Cancel/LostAnswer", cancelLostAnswer},
	{"Finish/Fenced", finishFenced},
	{"Finish/Race", finishRace},
	{"Finish/LostAnswer", finishLostAnswer},
	{"NoteFailure/Counts", noteFailureCounts},
	{"NoteFailure/Race", noteFailureRace},
	{"NoteFailure/LostAnswer", noteFailureLostAnswer},
	{"Schedule/Due", scheduleDue},
	{"Schedule/LostAnswer", scheduleLostAnswer},
	{"Park/Fenced", parkFenced},
	{"Park/LostAnswer", parkLostAnswer},
	{"Stale/Lists", staleLists},
	{"Stale/Race", staleRace},
	{"Stale/LostAnswer", staleLostAnswer},
	{"Stale/LeavesParked", staleLeavesParked},
	{"Claim/CompareAndSet", claimCAS},
	{"Claim/Race", claimRace},
	{"Claim/LostAnswer", claimLostAnswer},
	{"Adopt/TakesAnew", adoptTakesAnew},
	{"Adopt/Race", adoptRace},
	{"Adopt/LostAnswer", adoptLostAnswer},
	{"Resume/TakesTheWake", resumeTakesTheWake},
	{"Resume/Race", resumeRace},
	{"Resume/LostAnswer", resumeLostAnswer},
	{"Renew/CompareAndSet", renewCAS},
	{"Renew/RaceWithClaim", renewRaceWithClaim},
	{"Renew/LostAnswer", renewLostAnswer},
	{"AppendLog/Fenced", appendFenced},
	{"AppendLog/Race", appendRace},
	{"AppendLog/LostAnswer", appendLostAnswer},
	{"AppendLog/OvertakenByClaim", appendOvertaken},
	{"Breach/Ends", breachEnds},
	{"Breach/Race", breachRace},
	{"Breach/RacesCancel", breachRacesCancel},
	{"Breach/LostAnswer", breachLostAnswer},
	{"Scope/Acquire", scopeAcquire},
	{"Scope/RefusedWhileLive", scopeRefusedWhileLive},
	{"Scope/TakeOver", scopeTakeOver},
	{"Scope/Race", scopeRace},
	{"Scope/TakeOverRace", scopeTakeOverRace},
	{"Scope/Tenants", scopeTenants},
	{"Scope/Bad", scopeBad},
	{"Scope/LostAnswer", scopeLostAnswer},
	{"Times/Millisecond", timesMillisecond},
	{"Pause/PausesAndResumes", pauseResumes},
	{"Pause/Drain", pauseDrain},
	{"Pause/Immediate", pauseImmediate},
	{"Pause/UndrainedResume", pauseUndrainedResume},
	{"Pause/Parked", pauseParked},
	{"Pause/Refused", pauseRefused},
	{"Pause/Race", pauseRace},
	{"Pause/RacesCompletion", pauseRacesCompletion},
	{"Pause/RacesCancel", pauseRacesCancel},
	{"Pause/ResumeRacesCancel", resumeRacesCancel},
	{"Pause/LostAnswer", pauseLostAnswer},
	{"Pause/LostAnswerNoWriter", pauseLostAnswerNoWriter},
	{"Pause/RetryAfterResume", pauseRetryAfterResume},
	{"Pause/NodeNotDraining", pauseNodeNotDraining},
	{"Pause/Limit", pauseLimit},
	{"Pause/StaleDrain", pauseStaleDrain},
	{"Pause/StaleDrainRace", pauseStaleDrainRace},
	{"Pause/StaleDrainLostAnswer", pauseStaleDrainLostAnswer},
	{"Pause/Guarded", pauseGuarded},
	{"Pause/GuardedRace", pauseGuardedRace},
	{"Cancel/AtVersion", cancelAt},
	{roundTripsCase, roundTrips},
}
