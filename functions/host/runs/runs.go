package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/idemkit/idemkit/idem/decided"
	"github.com/idemkit/idemkit/ledger/identity"
)

// Status is a run's lifecycle status.
type Status string

// Run statuses, in the OpenWOP v2 vocabulary (run-snapshot.schema.json):
// pending -> running -> completed | failed; cancelled from pending,
// running or paused; paused (StatusPaused, pause.go) from pending or
// running, back to running on a resume.
const (
	StatusPending   Status = "pending"
	StatusRunning   Status = "running"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
)

// statusSucceededV1 is what earlier versions of idemkit stored for a run
// that finished without error; ParseStatus reads it as StatusCompleted.
const statusSucceededV1 = "succeeded"

// ParseStatus returns the status a stored value means. Every value is
// returned unchanged except "succeeded", the completed status written by
// earlier versions of idemkit, which reads as StatusCompleted: a run stored
// before the move to the v2 vocabulary is served, streamed and treated as
// terminal exactly like one stored since.
func ParseStatus(s string) Status {
	if s == statusSucceededV1 {
		return StatusCompleted
	}
	return Status(s)
}

// Terminal reports whether s is final.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Run is one workflow run (an item of RunsTable, partition key pk = runId).
//
// Every run records the recipe stamps it was created with:
// activityIdentityRecipe and semanticRequestRecipe (the embedded
// identity.Stamps, set from identity.CurrentStamps() by NewRun). The
// executor derives the run's effect identities through these stamps
// (RecipeStamps.ActivityIdentity), never through the kit's current recipe,
// so a kit upgrade cannot silently re-key a run's recorded effects: a run
// stamped with a recipe this kit does not compute fails with
// ledger.ErrUnsupportedRecipe instead. RunStore.Create refuses a run
// without both stamps.
type Run struct {
	ID         string          `json:"runId"`
	Tenant     string          `json:"tenant"`
	WorkflowID string          `json:"workflowId"`
	Inputs     json.RawMessage `json:"inputs,omitempty"`
	Status     Status          `json:"status"`
	Error      string          `json:"error,omitempty"`
	// ErrorCode is the registry code a failed run ended with, set only by
	// Breach (run_timeout, loop_limit_exceeded); "" for every other end,
	// which the API reports under the host's own failure code.
	ErrorCode string `json:"errorCode,omitempty"`
	// CancelledBy is the Layer-1 record ID (a hash, never the key) of the
	// keyed cancel request that cancelled the run, written by Cancel in the
	// same conditional write as the status; for a cancel without an
	// Idempotency-Key, a random token of that request ("once:…"); "" for a
	// run not cancelled. A retry of that request (its
	// attempt that cancelled died before its answer was recorded) tells by
	// it that the cancel is its own, not another's. Not a tracked field.
	CancelledBy string `json:"-"`
	// CancelReason is the reason the cancel request gave (its body's
	// reason), written by Cancel in the same conditional write as the
	// status; "" when it gave none. Not a tracked field.
	CancelReason string `json:"cancelReason,omitempty"`
	// PausedBy and ResumedBy are the Layer-1 record IDs (or a request's
	// token, as CancelledBy) of the last pause and resume of the run,
	// written with its status by Pause and Unpause: a retry of either
	// request finds its own write. "" when never paused or resumed. Not
	// tracked fields.
	PausedBy  string `json:"-"`
	ResumedBy string `json:"-"`
	// PausePending is the run.paused event of a pause that lets the node
	// executing drain (DrainCurrentNode): held here until that node's
	// terminal event is appended (AppendLog appends both), or until the
	// run is resumed (Unpause appends it before run.resumed). A paused
	// run cancelled before either keeps it: its events show it before
	// the run's end. Nil otherwise. Not a tracked field.
	PausePending *LogEvent `json:"-"`
	CreatedAt    time.Time `json:"createdAt"`
	UpdatedAt    time.Time `json:"updatedAt"`
	// Failures counts the executions of the run that failed transiently and
	// were left to the stream's retries (RunStore.NoteFailure); LastError is
	// the latest one's error. Zero and "" for a run that never failed.
	Failures  int    `json:"failures,omitempty"`
	LastError string `json:"lastError,omitempty"`
	// Wake is set on a parked run: when it is due to be executed again (its
	// effect's next attempt, see RunStore.Schedule and Park) and where that
	// effect's retries stand. Zero when the run is not parked.
	Wake Wake `json:"wake,omitzero"`
	// RetryOf is the failed run this run retries (POST /runs/{runId}/retry);
	// "" for a run created by createRun. Fixed at creation.
	RetryOf string `json:"retryOf,omitempty"`
	// Retries are the runs started from this failed run by
	// POST /runs/{runId}/retry (their RetryOf is this run's id), sorted: a
	// set, each retry once. Written by the retry's Create (or LinkRetry),
	// never by a tracked change: listing a retry leaves Version alone.
	// Where the listing and the run are two writes (DynamoRuns without
	// the completion transaction) the listing comes first: an id listed
	// may name a run not written yet (its request under way, or stopped
	// and written by the retry of its key).
	Retries []string `json:"retries,omitempty"`
	// Version is the run's version: 1 at creation, +1 for every store write
	// that changes a tracked field (status, error, lastError, wake). It is
	// what a client decides a write against (decided.Header).
	// A run stored before versions were kept reads as 0 until its next
	// change.
	Version int64 `json:"version"`
	// History is the run's version log: element i holds the tracked fields
	// version i+1 set (FieldStatus, ...). Version == History.Current().
	History decided.VersionLog `json:"history,omitempty"`
	// Log is the run's node event log (node.started, node.completed,
	// node.failed), appended by the executor (LogStore.AppendLog); empty
	// for a run whose workflow has no node graph (see fork.go, nodelog.go).
	Log []LogEvent `json:"log,omitempty"`
	// Epoch is the executor claim's fencing token: each taking of the run
	// for an execution (a Transition to running, Claim, Adopt, Resume) adds
	// 1, and the taker holds the run while Epoch is still its own: it
	// renews the claim (Renew), appends to the node log (AppendLog), parks
	// the run (Park) and ends it completed or failed (Finish) only under
	// it, so an execution taken over by another writes nothing more to the
	// run's progress or end. (A breached cap ends the run whoever holds it,
	// Breach, as a cancel does.) 0 on a run never taken. Not a tracked
	// field: Version is left alone.
	Epoch int64 `json:"claimEpoch,omitempty"`
	// Fork is set on a run created by forkRun: its source, mode, fromSeq
	// and inherited history. Nil for any other run. Fixed at creation.
	Fork *Fork `json:"fork,omitempty"`
	// Options are the run's RunOptions (configurable, tags, metadata) as
	// createRun received them; zero for a run created without them. Fixed
	// at creation.
	Options Options `json:"runOptions,omitzero"`
	// ExpiresAt is when the run's record expires (whole seconds): its end
	// time + the store's retention, set by the write that ends the run
	// (retention.go). Zero on a live run and on a store that keeps runs
	// forever (the default). Not a tracked field, not served.
	ExpiresAt time.Time `json:"-"`
	identity.Stamps
}

// Wake is why and until when a run is parked: its effect's next attempt.
type Wake struct {
	// At is when the run is due (the effect's next attempt time).
	At time.Time `json:"at"`
	// Attempt is the number of attempts made, MaxAttempts the cap.
	Attempt     int `json:"attempt"`
	MaxAttempts int `json:"maxAttempts"`
	// Deadline is the end of the effect's retry time budget (zero: none).
	Deadline time.Time `json:"deadline,omitzero"`
}

// IsZero reports whether the run is not parked.
func (w Wake) IsZero() bool { return w.At.IsZero() }

// NewRun returns a new pending run of workflowID for tenant with a fresh
// runId (NewRunID), stamped with the kit's current recipes
// (identity.CurrentStamps) and created/updated at now (UTC), at version 1.
func NewRun(tenant, workflowID string, inputs json.RawMessage, now time.Time) Run {
	now = now.UTC()
	return Run{ID: NewRunID(tenant), Tenant: tenant, WorkflowID: workflowID, Inputs: inputs,
		Status: StatusPending, CreatedAt: now, UpdatedAt: now, Stamps: identity.CurrentStamps(),
		Version: 1, History: decided.VersionLog{version(FieldStatus, StatusPending)}}
}

// withFirstVersion returns r as Create stores it: a run given without a
// version log starts at version 1, logging its status.
func withFirstVersion(r Run) Run {
	if len(r.History) == 0 {
		r.History = decided.VersionLog{version(FieldStatus, r.Status)}
	}
	r.Version = r.History.Current()
	return r
}

// checkNew validates a run before Create: a tenant-bound runId of its
// tenant and both recipe stamps.
func checkNew(r Run) error {
	if !ValidRunID(r.ID) || RunTenant(r.ID) != r.Tenant {
		return fmt.Errorf("host: run id %q is not a runId of tenant %q", r.ID, r.Tenant)
	}
	if err := r.Stamps.Validate(); err != nil {
		return fmt.Errorf("host: run %s: %w", r.ID, err)
	}
	return nil
}

// ErrRunNotFound is returned when no run has the id.
var ErrRunNotFound = errors.New("host: run not found")

// ErrRunExists is returned by Create when the id is taken.
var ErrRunExists = errors.New("host: run already exists")

// RunExistsError is ErrRunExists (errors.Is) where Create has the run it
// found at the id without reading it again: DynamoRuns returns it when
// its refused PutItem returned the item there (ALL_OLD), or when it read
// that run to tell a retry's own run from another's. Where the store has
// no run to hand back, Create's error is ErrRunExists itself.
type RunExistsError struct {
	// Run is the run found at the id.
	Run Run
	// Listed reports that Create listed the id among the retries of the
	// run it retries (RetryOf) and left it there: the run found retries
	// that run too, so no LinkRetry of it is needed.
	Listed bool
}

func (e *RunExistsError) Error() string { return ErrRunExists.Error() }

// Unwrap makes a *RunExistsError match ErrRunExists.
func (e *RunExistsError) Unwrap() error { return ErrRunExists }

// MaxRetries is the most retries a failed run lists (Run.Retries) through
// Create: a run's item holds its list, and DynamoDB refuses an item past
// 400 KB. The API's retry cap (POST /runs/{runId}/retry) is this number.
const MaxRetries = 100

// ErrRetryLimit is returned (as a *RetryLimitError) by Create for a retry
// whose failed run already lists MaxRetries other retries.
var ErrRetryLimit = errors.New("host: the failed run lists the most retries it can")

// RetryLimitError is ErrRetryLimit with the number of retries the failed
// run lists (MaxRetries, or more on a run retried before the cap held).
type RetryLimitError struct {
	Retries int
}

func (e *RetryLimitError) Error() string {
	return fmt.Sprintf("host: the failed run lists %d retries, the most it can", e.Retries)
}

// Is makes a *RetryLimitError match ErrRetryLimit.
func (e *RetryLimitError) Is(target error) bool { return target == ErrRetryLimit }

// ErrStatusConflict is returned by Transition when the run is not in one of
// the expected statuses; the current run is returned alongside.
var ErrStatusConflict = errors.New("host: run status changed")

// RunStore persists runs. Implementations: MemRuns (tests, embedding) and
// DynamoRuns (RunsTable).
//
// A call whose write the store applied and whose answer was lost on the
// way (DynamoRuns: its SDK sent the write again) is answered as that write
// left the run, as the lost answer would have been, and the write is
// applied once: never ErrStatusConflict for a change the call made itself
// (RED_TEAM 500). It is an error only where the store could not learn
// the write's fate (the SDK gave up); a caller's own retry after that
// error is another call, answered as the run then is.
type RunStore interface {
	// Create inserts r if no run has its id (ErrRunExists otherwise). A run
	// without both recipe stamps, or whose id is not a runId of its
	// tenant, is refused (an error wrapping ledger.ErrUnsupportedRecipe
	// for missing stamps) and nothing is written. A retry (r.RetryOf set)
	// is listed among the failed run's Retries by the same call, as
	// LinkRetry does; a Create that finds the id taken by a run that does
	// not retry r.RetryOf leaves it unlisted. The
	// listing is conditional, in one atomic step with the check, on the
	// failed run listing fewer than MaxRetries retries (or r already):
	// otherwise Create returns a *RetryLimitError (errors.Is
	// ErrRetryLimit) and writes no run, so of racing retries of one failed
	// run no more than the cap are listed, and no refused one is ever
	// written for an executor to take. Where the run and its listing are
	// two writes (DynamoRuns without the completion transaction), the
	// listing comes first: a Create whose run write then fails leaves r's
	// id listed and no run, and the same Create again (a re-execution of
	// the request, its run id fixed) passes the cap, r being listed, and
	// writes the run (cancelled, where a Cancel reached the id in
	// between: see Cancel). A Create that finds its id taken may hand
	// the run there back (*RunExistsError). Under the completion transaction the refusal is the
	// cancelled completion's cause (idem.TransactOr), for the handler to
	// answer (idem.OnConflict).
	Create(ctx context.Context, r Run) error
	// CreateScoped is Create for a run that holds the tenant's scope
	// scopeID (createRun with `OpenWOP-Dedup: enforce`): r is created only
	// if no live run of r.Tenant holds the scope, and then holds it, in
	// one atomic step: of racing creates of one scope exactly one creates
	// its run. A scope held by a run that has ended (completed, failed,
	// cancelled, timed out) is taken over by a compare-and-set naming that
	// holder; a scope held by r itself (a retry of the same create) is
	// r's. Under a re-execution of a Layer-1 claim (idem.ClaimInfo
	// attempt > 1 or reclaimed), whose run id is fixed (ClaimRunID), a run
	// already written at r's id is ErrRunExists whoever holds the scope
	// now: that run is the record's (its earlier execution's completion
	// was lost), even if it has ended and another run took the scope
	// over. A refusal is a *ScopeHeldError (errors.Is ErrScopeHeld) and
	// writes no run; a scopeID that is not ValidScopeID is ErrBadScope.
	// Tenants never share a scope.
	CreateScoped(ctx context.Context, r Run, scopeID string) error
	// LinkRetry lists retryID among the Retries of run failedID (a set:
	// listing it again changes nothing; the failed run's Version is left
	// alone). A missing failed run is not an error: nothing is written.
	// It is not capped (MaxRetries): it lists a retry whose run was
	// written by an earlier execution of its request, which passed the
	// cap then (an earlier version of DynamoRuns wrote a retry's run
	// before listing it).
	LinkRetry(ctx context.Context, failedID, retryID string) error
	// Get returns the run, or ErrRunNotFound.
	Get(ctx context.Context, id string) (Run, error)
	// Transition moves the run to status `to` (with errMsg) only if its
	// current status is one of from: a compare-and-set, so two executors or
	// a cancel racing an executor never both win. A transition to running
	// takes the run for the caller's execution (Epoch + 1). It returns the run as
	// stored afterwards; ErrStatusConflict (with the current run) when the
	// status was not in from; ErrRunNotFound when there is no run. A
	// transition to a terminal status also sets the run's expiry under the
	// store's retention (Run.ExpiresAt), in the same write.
	Transition(ctx context.Context, id string, from []Status, to Status, errMsg string, now time.Time) (Run, error)
	// Finish is the executor's end of a run it holds: Transition from
	// running to `to` (completed or failed) with errMsg, only if the run's
	// claim epoch is still epoch, in the same conditional write (one round
	// trip, as Transition). An execution taken over by another (its claim
	// lapsed and the stale-run pass took the run, a duplicate delivery
	// adopted it, a due pass resumed it) after its last node event is
	// refused, as its node-log appends and renewals are, and the run stays
	// the taker's to end. ErrStatusConflict (with the current run) when
	// the run is not running or another execution holds it; ErrRunNotFound
	// when there is none. A `to` that is not completed or failed is an
	// error and writes nothing. Like every terminal transition it clears
	// the wake and sets the run's expiry under the store's retention.
	Finish(ctx context.Context, id string, epoch int64, to Status, errMsg string, now time.Time) (Run, error)
	// Cancel is Transition(ctx, id, from, StatusCancelled, "", now) that
	// also records by as the run's CancelledBy and reason as its
	// CancelReason (each when not ""), in the same conditional write
	// (nothing is written when the status is not in from). Where a
	// retry's listing precedes its run's write (DynamoRuns without the
	// completion transaction), a Cancel from pending of an id no run
	// holds is ErrRunNotFound and records the cancel at the id: a retry
	// listed there and not yet written is then written cancelled by it
	// (its Create's *RunExistsError holds that run), never pending.
	Cancel(ctx context.Context, id string, from []Status, by, reason string, now time.Time) (Run, error)
	// NoteFailure atomically counts one failed execution of the run
	// (Run.Failures) and records errMsg as its LastError, and returns the
	// new count. The executor uses it to tell its last try from the others
	// (see execfn.Executor.MaxAttempts). ErrRunNotFound when there is no run;
	// ErrStatusConflict, changing nothing, when the run has already ended (a
	// late failure never moves a finished run's updatedAt or lastError) or
	// is paused (nothing drives it until it is resumed).
	NoteFailure(ctx context.Context, id, errMsg string, now time.Time) (failures int, err error)
	// Schedule parks a live (pending or running) run until at: Due lists it
	// from then on, until a terminal Transition clears it (or another
	// Schedule or Park moves it): the time is durable in the run record, so
	// nothing holds an invocation until then. The executor parks a run it
	// executes through Park, Schedule fenced on its claim epoch.
	// ErrStatusConflict, changing nothing, when the run has ended;
	// ErrRunNotFound when there is none.
	Schedule(ctx context.Context, id string, w Wake, now time.Time) error
	// Park is the executor's Schedule of a run it holds: Schedule only if
	// the run is running and its claim epoch is still epoch, in the same
	// conditional write (one round trip). An execution taken over by
	// another is refused, so it never parks (makes due, or keeps from the
	// stale-run pass) a run another execution drives. It returns the run
	// as stored afterwards; ErrStatusConflict (with the current run) when
	// the run is not running or another execution holds it;
	// ErrRunNotFound when there is none. Parking again (a caller's retry
	// after an error) leaves one wake. A park refused because the run was
	// paused (PauseStore) while this execution drained its node records
	// the pause's held run.paused (the node will not drain before a
	// resume): one more write, on that refusal only.
	Park(ctx context.Context, id string, epoch int64, w Wake, now time.Time) (Run, error)
	// Due returns up to limit ids of parked runs whose WakeAt is at or
	// before now, earliest first. It may be eventually consistent (a GSI):
	// the caller re-reads each run.
	Due(ctx context.Context, now time.Time, limit int) ([]string, error)
	// Stale returns up to limit ids of live (pending or running) runs
	// whose updatedAt is at or before before: runs that made no progress
	// since, whose stream delivery may have been lost (stale.go). It lists
	// too the paused runs whose run.paused is held for the node their
	// execution drains (PauseStore.Pause) with no renewal since: the
	// caller's Claim refuses them (not live) and it records their event
	// (PauseStore.ReleaseStalePause). It never lists a parked run, which
	// is Due's until Resume takes it, however long ago it parked: parked
	// runs never fill the limit ahead of the runs a pass is for. It may be
	// eventually consistent (a GSI): the caller claims each run (Claim),
	// which re-checks everything.
	Stale(ctx context.Context, before time.Time, limit int) ([]string, error)
	// Claim takes a stale run for one execution: a compare-and-set that
	// moves updatedAt to now only if the run is live, not parked and its
	// updatedAt is still at or before before. It returns the run as stored
	// afterwards. Because the claim itself is progress, a second claimer
	// (another resumer) holding the same view gets ErrStatusConflict, and
	// so does one whose run moved meanwhile (a live executor's transition,
	// a failure noted, a park, an end); the run is not claimable again
	// until it has been without progress for the bound once more.
	// ErrRunNotFound when there is no run.
	//
	// The claim also takes the run for the claimer's execution: Epoch + 1
	// (see Run.Epoch), so an execution it overtakes is fenced.
	Claim(ctx context.Context, id string, before, now time.Time) (Run, error)
	// Adopt takes a live (pending or running) run for a new execution of
	// it whoever held it: Epoch + 1 and updatedAt = now, whatever the
	// run's last progress. It is how an execution that is not the
	// stale-run pass's (a duplicate or retried stream delivery, a parked
	// run's resume) resumes a running run: an execution still under way is
	// fenced from then on and writes nothing more. It returns the run as
	// stored afterwards; ErrStatusConflict (with the current run) when the
	// run has ended; ErrRunNotFound when there is none. Every call takes
	// the run anew: a caller's retry after an error holds a later epoch.
	Adopt(ctx context.Context, id string, now time.Time) (Run, error)
	// Resume takes a parked run whose wake time has come (Due lists it)
	// for the execution of its next attempt, in one compare-and-set: only
	// if the run is live, parked and its wake time is at or before now,
	// it clears the wake (the run is no longer due, nor shown as waiting
	// for a retry), sets updatedAt = now and Epoch + 1 (an execution still
	// under way is fenced). So of due passes racing for a run exactly one
	// takes it, and a later pass does not take it again while its
	// execution lives: from then on it is a running run like any other,
	// renewed by its executor's heartbeat and found by the stale-run pass
	// (Stale, Claim) if that executor stops. It returns the run as stored
	// afterwards; ErrStatusConflict (with the current run) when the run is
	// not parked, not yet due or has ended; ErrRunNotFound when there is
	// none.
	Resume(ctx context.Context, id string, now time.Time) (Run, error)
	// Renew is the heartbeat of the execution holding the run's claim
	// epoch: a compare-and-set that moves updatedAt to now only if the run
	// is live and its Epoch is still epoch, so the stale-run pass (Stale,
	// Claim) never takes a run whose executor lives, however long a node
	// runs (also while a pause lets its node drain: Pause). It returns
	// the run as stored afterwards; ErrStatusConflict (with the current
	// run) when the run was taken by another execution, was paused
	// otherwise or has ended: the caller stops; ErrRunNotFound when there is none.
	// Renewing again (a caller's retry after an error) is harmless.
	Renew(ctx context.Context, id string, epoch int64, now time.Time) (Run, error)
	// Breach ends a live (pending or running) run failed because one of
	// its caps was breached (its run timeout, its loop iterations), in one
	// compare-and-set write: ev (the cap.breached event, EventCapBreached)
	// appended to its node log, the status failed with errMsg and the
	// registry code (Run.ErrorCode), the wake cleared. Whoever holds the
	// run's claim: an execution still under way is refused its next
	// node-log append and stops. So of executors racing past a deadline
	// exactly one records the breach and the end, and a run that ended
	// first (completed, failed, cancelled) is never failed after:
	// ErrStatusConflict with the run as it is. A caller's retry after an
	// error finds the run failed with code (ErrStatusConflict) when the
	// first call's write landed. ErrRunNotFound
	// when there is no run.
	Breach(ctx context.Context, id string, ev LogEvent, code, errMsg string, now time.Time) (Run, error)
}

// MemRuns is an in-memory RunStore (tests, examples, embedding), safe for
// concurrent use. OnInsert stands in for the runs table's stream.
type MemRuns struct {
	mu   sync.Mutex
	runs map[string]Run
	// scopes are the run scopes' holders (CreateScoped), by scopeKey.
	scopes map[string]memScope
	// fenced are the run ids a scope takeover fenced (DynamoRuns'
	// tombstones): never created, never read as runs. Kept forever.
	fenced map[string]bool
	// OnInsert, if set, is called (outside the lock) after each Create.
	OnInsert func(Run)
	// Retention is how long an ended run is kept after its end
	// (Run.ExpiresAt, retention.go); a run past it reads as missing.
	// Default 0: kept forever.
	Retention time.Duration
	// Now is the clock that tells an expired run (only read when
	// Retention is set). Default: the system clock.
	Now func() time.Time
}

// NewMemRuns returns an empty MemRuns.
func NewMemRuns() *MemRuns { return &MemRuns{runs: map[string]Run{}} }

// Create implements RunStore.
func (m *MemRuns) Create(_ context.Context, r Run) error {
	if err := checkNew(r); err != nil {
		return err
	}
	m.mu.Lock()
	return m.createLocked(r)
}

// createLocked inserts r, called with m.mu held; it unlocks m.mu.
func (m *MemRuns) createLocked(r Run) error {
	if _, ok := m.lookupLocked(r.ID); ok || m.fenced[r.ID] {
		m.mu.Unlock()
		return ErrRunExists
	}
	if r.RetryOf != "" {
		if f, ok := m.lookupLocked(r.RetryOf); ok && len(f.Retries) >= MaxRetries && !slices.Contains(f.Retries, r.ID) {
			m.mu.Unlock()
			return &RetryLimitError{Retries: len(f.Retries)}
		}
	}
	r = withFirstVersion(r)
	r.CreatedAt, r.UpdatedAt = tableTime(r.CreatedAt), tableTime(r.UpdatedAt)
	r.Wake.At, r.Wake.Deadline = tableTime(r.Wake.At), tableTime(r.Wake.Deadline)
	if len(r.Log) > 0 {
		r.Log = tableTimes(r.Log)
	}
	if !r.Status.Terminal() {
		// A live run never carries an expiry (as DynamoRuns' item never
		// does): one copied from an ended run's value is dropped.
		r.ExpiresAt = time.Time{}
	}
	m.runs[r.ID] = r
	if r.RetryOf != "" {
		m.linkRetryLocked(r.RetryOf, r.ID)
	}
	cb := m.OnInsert
	m.mu.Unlock()
	if cb != nil {
		cb(r)
	}
	return nil
}

// LinkRetry implements RunStore.
func (m *MemRuns) LinkRetry(_ context.Context, failedID, retryID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.linkRetryLocked(failedID, retryID)
	return nil
}

func (m *MemRuns) linkRetryLocked(failedID, retryID string) {
	f, ok := m.lookupLocked(failedID)
	if !ok {
		return
	}
	i := sort.SearchStrings(f.Retries, retryID)
	if i < len(f.Retries) && f.Retries[i] == retryID {
		return
	}
	f.Retries = append(slices.Clone(f.Retries[:i]), append([]string{retryID}, f.Retries[i:]...)...)
	m.runs[failedID] = f
}

// Get implements RunStore.
func (m *MemRuns) Get(_ context.Context, id string) (Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.lookupLocked(id)
	if !ok {
		return Run{}, ErrRunNotFound
	}
	return r, nil
}

// Transition implements RunStore.
func (m *MemRuns) Transition(_ context.Context, id string, from []Status, to Status, errMsg string, now time.Time) (Run, error) {
	return m.transition(id, from, to, errMsg, "", "", now)
}

// Cancel implements RunStore.
func (m *MemRuns) Cancel(_ context.Context, id string, from []Status, by, reason string, now time.Time) (Run, error) {
	return m.transition(id, from, StatusCancelled, "", by, reason, now)
}

// Finish implements RunStore.
func (m *MemRuns) Finish(_ context.Context, id string, epoch int64, to Status, errMsg string, now time.Time) (Run, error) {
	if err := checkFinish(to); err != nil {
		return Run{}, err
	}
	return m.transitionIf(id, func(r Run) bool { return r.Status == StatusRunning && r.Epoch == epoch }, to, errMsg, "", "", now)
}

// transition is Transition, recording by as CancelledBy and reason as
// CancelReason when they are set.
func (m *MemRuns) transition(id string, from []Status, to Status, errMsg, by, reason string, now time.Time) (Run, error) {
	return m.transitionIf(id, func(r Run) bool { return statusIn(r.Status, from) }, to, errMsg, by, reason, now)
}

// transitionIf is transition when the run as stored satisfies may.
func (m *MemRuns) transitionIf(id string, may func(Run) bool, to Status, errMsg, by, reason string, now time.Time) (Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.lookupLocked(id)
	if !ok {
		return Run{}, ErrRunNotFound
	}
	if !may(r) {
		return r, ErrStatusConflict
	}
	r.Status, r.Error, r.UpdatedAt = to, errMsg, tableTime(now)
	if by != "" {
		r.CancelledBy = by
	}
	if reason != "" {
		r.CancelReason = reason
	}
	if to == StatusRunning {
		r.Epoch++
	}
	if to.Terminal() {
		r.Wake = Wake{}
		r.ExpiresAt = expiry(m.Retention, now)
	}
	r.History = appendVersion(r.History, terminalVersion(to, errMsg))
	r.Version = r.History.Current()
	m.runs[id] = r
	return r, nil
}

// Schedule implements RunStore.
func (m *MemRuns) Schedule(_ context.Context, id string, w Wake, now time.Time) error {
	_, err := m.schedule(id, func(r Run) bool { return live(r.Status) }, w, now)
	return err
}

// schedule is Schedule when the run as stored satisfies may.
func (m *MemRuns) schedule(id string, may func(Run) bool, w Wake, now time.Time) (Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.lookupLocked(id)
	if !ok {
		return Run{}, ErrRunNotFound
	}
	if !may(r) {
		return r, ErrStatusConflict
	}
	w.At, w.Deadline = tableTime(w.At), tableTime(w.Deadline)
	r.Wake, r.UpdatedAt = w, tableTime(now)
	r.History = appendVersion(r.History, version(fieldWake, w))
	r.Version = r.History.Current()
	m.runs[id] = r
	return r, nil
}

// Due implements RunStore.
func (m *MemRuns) Due(_ context.Context, now time.Time, limit int) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var due []Run
	for _, r := range m.runs {
		if !r.Wake.IsZero() && !r.Wake.At.After(now) {
			due = append(due, r)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].Wake.At.Before(due[j].Wake.At) })
	ids := make([]string, 0, len(due))
	for _, r := range due {
		if limit > 0 && len(ids) >= limit {
			break
		}
		ids = append(ids, r.ID)
	}
	return ids, nil
}

// NoteFailure implements RunStore.
func (m *MemRuns) NoteFailure(_ context.Context, id, errMsg string, now time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.lookupLocked(id)
	if !ok {
		return 0, ErrRunNotFound
	}
	if !live(r.Status) {
		return 0, ErrStatusConflict
	}
	r.Failures++
	r.LastError, r.UpdatedAt = errMsg, tableTime(now)
	r.History = appendVersion(r.History, version(fieldLastError, errMsg))
	r.Version = r.History.Current()
	m.runs[id] = r
	return r.Failures, nil
}

// Len returns the number of runs.
func (m *MemRuns) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.runs)
}

// checkFinish refuses a Finish to a status that is not completed or
// failed.
func checkFinish(to Status) error {
	if to != StatusCompleted && to != StatusFailed {
		return fmt.Errorf("host: Finish ends a run completed or failed, not %q", to)
	}
	return nil
}

// tableTime is t as a run store keeps it: UTC, to the millisecond, the
// precision of RunsTable's createdAt, updatedAt and wake times. MemRuns
// keeps every time at it too, so a run reads the same from either store.
// The zero time stays zero.
func tableTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Millisecond)
}

func statusIn(s Status, set []Status) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}
