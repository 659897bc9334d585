// Package execfn is the executor function's handler: triggered by the runs
// table's stream, it runs each new run's workflow nodes through the ledger.
//
// Guarantees:
//   - Only INSERT records start runs; MODIFY and REMOVE are ignored, so the
//     executor's own status writes never retrigger it.
//   - Duplicate stream deliveries and batch retries are harmless: a run is
//     started only by the compare-and-set pending -> running, whose answer
//     is the run as stored (an INSERT record's image stands in for a read:
//     a new run costs the runs table its two transitions and nothing else),
//     a run found terminal (or cancelled) is skipped, and its nodes'
//     effects go through ledger.Do, so a node re-executed on
//     resume (from its start; activity identity v2, which keeps its effect identities
//     stable) gets the recorded outcome and fires nothing again.
//   - Status changes are compare-and-set on the current status: a cancel
//     racing the executor, or two executors of one run, never both win.
//   - A record that fails transiently (an effect in flight elsewhere, a
//     lost lease, a store error) is reported in BatchItemFailures so the
//     event source mapping retries it (bisecting on error, bounded retries,
//     then the on-failure destination).
//   - A run is never silently stranded by the retry bound: each failed
//     execution is counted on the run (Run.Failures, Run.LastError, shown
//     by getRun), and the execution that is the stream's LAST try
//     (MaxAttempts) ends the run "failed" ("executor: gave up after N
//     attempts: ...") instead of handing the record to the on-failure
//     queue. Only a run whose failures could not even be counted (the runs
//     table itself unavailable) reaches the queue, and it stays "running"
//     with its last counted error visible. An execution that runs out of
//     the invocation's time ends two seconds before its deadline
//     (endMargin), so it too is counted, dealt with by the last try, and
//     answered before Lambda would time the invocation out. A last try
//     whose execution held the run gives it up only while it still holds
//     it (RunStore.Finish under its claim epoch): a run another execution
//     took meanwhile (a duplicate delivery, the stale-run pass) is that
//     one's to end, and the last try's record is done (logged at INFO).
//   - The last try does not give up on an effect that is merely in flight
//     elsewhere when its claim will end in time: when the failure is a
//     *ledger.InFlightError whose RetryAfter (plus one second of slack for
//     its rounding) fits in the invocation's remaining time (the context
//     deadline minus LastTryMargin and endMargin; without a deadline, at
//     most 15 minutes), the executor waits it out (Sleep, honouring ctx)
//     and executes the run once more, with LastTryMargin to run in. An executor that crashed after sending
//     has left its claim firing; once the claim expires the ledger reclaims
//     it (the stalled attempt becomes escaped) and the new attempt sends the
//     SAME provider key, so a provider that deduplicates on Idempotency-Key
//     performs the effect once and the run ends "completed". Only if that
//     execution fails too (or the wait does not fit, or ctx ends) is the
//     run failed. A claim that is still live after the wait (its holder is
//     alive and heartbeating) is never taken over: the ledger answers in
//     flight again and the run is given up, nothing fired. Nor does the
//     last try give up on an effect attempt it lost (ledger.ErrLeaseLost:
//     another executor took it over, maybe recording the effect's outcome,
//     or its renewals failed), nor on one whose outcome the effects table
//     failed to record (ledger.ErrOutcomeNotRecorded: the effect may have
//     happened): it executes the run once more, which replays a recorded
//     outcome, and waits out an attempt still in flight as above. Any
//     other error of the last try fails the run.
//   - An effect whose next attempt is scheduled later (a provider's
//     Retry-After, a backoff: *ledger.RetryLaterError) parks the run: its
//     wake time is written to the run record (RunStore.Park) and the
//     invocation ends, nothing sleeps. ResumeDue (the function's minute
//     schedule, or `idemkit dev` at each wake time its executor reports,
//     Executor.Parked, and at least every 30 s) executes the parked runs
//     that are due. The schedule is durable in both the effect record (no
//     attempt fires before it, whoever calls) and the run record, so an
//     executor that crashes between attempts loses nothing: the run stays
//     parked (or its stream record is retried) and the next pass resumes
//     it on time. A park the runs table refused on the stream's last try
//     is written again under the claim epoch the execution held (as a
//     refused end is); only a park refused once more fails the run.
//   - No acknowledged run is stranded by a lost stream delivery: the
//     schedule's ResumeStale pass claims (compare-and-set) every live,
//     unparked run without progress for StaleAfter and drives it to a
//     terminal status, counting its failures like stream tries. Nor is a
//     pause's run.paused left held by an execution that stopped while its
//     node drained: the same pass records it once that execution's claim
//     went unrenewed for StaleAfter (the run stays paused).
//   - A live run is never overtaken: the execution driving a run holds a
//     claim on it (the run's claim epoch, taken by the transition to
//     running, the stale-run claim, or RunStore.Adopt when it resumes a
//     running run) and renews it every Heartbeat while its nodes run, so
//     a slow node of any length keeps its run out of the stale-run pass
//     while its executor lives. Every node-log append is a compare-and-set
//     on that claim and on the log's length, and so is the execution's end
//     of the run (completed or failed, RunStore.Finish: the claim and the
//     status in one condition of the one write), so an execution another
//     took over (its executor paused past StaleAfter, or two deliveries
//     overlapping) writes nothing more and stops: the node log never holds
//     an event twice, and a run is ended only by the execution holding it
//     (the overtaken one logs at INFO, "run taken by another execution
//     before it ended", and its record is done: not retried, no failure
//     counted). A webhook request it has already sent is not cut
//     when it finds its claim taken (or its run cancelled): the request
//     finishes and its outcome is recorded, so the execution that took the
//     run over replays it instead of sending it again (an escaped attempt).
package execfn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/functions/host/webhook"
	sysclock "github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/keyhash"
	"github.com/idemkit/idemkit/ledger"
)

// Executor runs workflows. Safe for concurrent use.
type Executor struct {
	// Runs stores runs. Required.
	Runs runs.RunStore
	// Webhook delivers the webhook node. Required for webhook runs.
	Webhook *webhook.Webhook
	// Logger receives one line per run decision. Default slog.Default().
	Logger *slog.Logger
	// MaxAttempts is how many times the stream delivers a failing run's
	// record: 1 + the event source mapping's MaximumRetryAttempts (the
	// functions set it from STREAM_MAX_RETRIES; `idemkit dev` from its
	// poller). At the MaxAttempts-th counted failure the run ends "failed"
	// and the record is not retried. Duplicate deliveries count too, so a
	// run may be given up early, never late. Default 0: never give up (a run
	// whose record exhausts its retries stays "running").
	MaxAttempts int
	// LastTryMargin is the time the last try keeps in reserve, out of the
	// invocation's remaining time (ctx deadline), for the execution that
	// follows waiting out an in-flight effect: the wait happens only when
	// RetryAfter + 1 s + LastTryMargin fits before the execution's end
	// (endMargin, two seconds, before the deadline), so that execution
	// has LastTryMargin whatever its value. It should cover one delivery
	// (the webhook's tries). Default 30 s.
	LastTryMargin time.Duration
	// Parked, when set, is called with a run's wake time each time this
	// executor has parked the run (its Schedule write succeeded), so a
	// scheduler driving ResumeDue can pass when a run is due instead of
	// polling (`idemkit dev`). It must not block. The schedule itself is
	// the run record's: a run parked by another process, or whose call was
	// lost, is still due there.
	Parked func(wakeAt time.Time)
	// Fixture delivers a side-effecting node of a graph workflow that names
	// no inputs.url, to FixtureURL (the host's own fixture destination,
	// e.g. `idemkit dev`'s loopback receiver). Default nil: Webhook. With no
	// FixtureURL such a node fails.
	Fixture    *webhook.Webhook
	FixtureURL string
	// NoopEffect runs conformance-noop as webhook.NoopEffectGraph: one
	// side-effecting node posting to FixtureURL. Default false: a noop run
	// has no nodes. Only `idemkit dev --conformance-seams` sets it.
	NoopEffect bool
	// StaleAfter is how long a live (pending or running), unparked run may
	// go without progress before ResumeStale claims and drives it (the
	// functions set it from RUN_STALE_SECONDS). An executor driving a run
	// renews its claim every Heartbeat, so a slow node of any length is
	// never overtaken while its executor lives; only a run whose executor
	// stopped renewing for StaleAfter is taken, and the execution it
	// overtakes (if it still runs) is fenced: its node-log appends and
	// renewals are refused. Default 0: DefaultStaleAfter.
	StaleAfter time.Duration
	// Heartbeat is how often an executor driving a run renews its claim on
	// it (RunStore.Renew), so the stale-run pass never takes a run whose
	// executor lives, however long a node runs. Default 0: StaleAfter/3.
	Heartbeat time.Duration
	// Metrics receives the executor's start lag (MetricStartLag) each time
	// a run is started, a count (MetricStaleRuns) for each stale run the
	// stale-run pass claims, a count (MetricCapsBreached) for each run
	// ended on a breached cap, and a count (MetricRetriedRuns) for each
	// failed execution whose stream record is handed back for a retry.
	// Default nil: none.
	Metrics Metrics
	// Test holds the hooks only tests and `idemkit dev` set. Default zero.
	Test TestConfig

	// unrecorded holds the runs this executor found interrupted
	// (TestConfig.Booted) whose workflow.restored is not recorded yet.
	unrecorded restoreMarks
}

// TestConfig holds an Executor's hooks for tests and for `idemkit dev`
// (its durability seam under --conformance-seams); the deployed function
// leaves it zero.
type TestConfig struct {
	// Clock is the executor's clock: run times (Now), the last try's wait
	// and the delay node (Sleep), the claim heartbeat's ticker
	// (NewTicker). Default the system clock. (The ledger and the webhook
	// client keep their own clocks.)
	Clock ledger.Clock
	// Booted is when this executor's process started. A running run last
	// updated before it was being driven by an earlier process (killed or
	// restarted), so when this executor resumes it, it first records
	// workflow.restored in the run's log. Default zero: only the stale-run
	// pass records it (a deployed environment has concurrent peers, so
	// its own start says nothing about another's death).
	Booted time.Time
	// Held, when it reports true for a run (ctx is the start's: a hook
	// may let its own start through), keeps the executor from starting
	// it: the stream record is retried later without counting a failure
	// (the durability seam's accepted-but-undispatched work). Default nil.
	Held func(ctx context.Context, runID string) bool
	// NodeStarted, when set, is called once a node.started of a run is
	// recorded (the durability seam kills the process there). Default nil.
	NodeStarted func(runID, nodeID string)
}

// ErrRunsQuery is wrapped by the error of ResumeDue or ResumeStale when
// the runs table could not be queried for the runs to resume (nothing of
// the pass ran); HandleInvoke then fails the schedule's invocation.
var ErrRunsQuery = errors.New("executor: the runs table could not be queried")

// errHeld is Execute's answer for a run TestConfig.Held holds.
var errHeld = errors.New("executor: the run is held by a test hook")

// Metrics receives the executor's measurements (bounded dimensions only,
// never tenants or ids). *emf.Recorder implements it. Implementations must
// be safe for concurrent use.
type Metrics interface {
	Milliseconds(name string, ms float64, dims map[string]string)
	Count(name string, n float64, dims map[string]string)
}

// The executor's metrics (CloudWatch EMF, namespace METRICS_NAMESPACE).
const (
	// MetricStartLag is how long a run waited between its creation
	// (createdAt) and its start (the compare-and-set pending -> running), in
	// milliseconds: how far execution lags behind creation. Dimension
	// DimTrigger: TriggerStream (its stream record) or TriggerStale (the
	// stale-run pass).
	MetricStartLag = "idemkit.executor.start_lag"
	// MetricStaleRuns counts the live runs the stale-run pass (ResumeStale)
	// claimed because they had made no progress for StaleAfter
	// (RUN_STALE_SECONDS): each is a run whose stream delivery was lost or
	// given up, or whose executor died. No dimensions. Any is worth a look:
	// the pass drives them to an end, but they ran late.
	MetricStaleRuns = "idemkit.executor.stale_runs_total"
	// MetricCapsBreached counts the runs the executor ended failed because
	// they breached one of their own caps (configurable.run): dimension
	// DimKind, KindRunDuration (run_timeout) or KindLoopIterations
	// (loop_limit_exceeded). Counted once per run, by the execution whose
	// write ended it; a run whose ending write's answer was lost (the write
	// landed, the executor saw an error and then found the run ended) is
	// not counted, so the figure can fall short, never over. The caller
	// set the cap, so this is not an operator's alarm; a rise is worth
	// telling the callers.
	MetricCapsBreached = "idemkit.executor.caps_breached_total"
	// MetricRetriedRuns counts the runs whose execution from a stream record
	// failed and whose record was handed back to the stream for a retry
	// (HandleRecords; the records behind it in the batch are handed back
	// too, uncounted). No dimensions. The invocation itself succeeds (a
	// partial batch response), so Lambda's Errors metric never shows these:
	// this count is how an operator sees runs failing on a store outage,
	// throttling or a provider that keeps failing. A run that fails every
	// try ends failed on its last one (MaxAttempts), counted each time
	// before it.
	MetricRetriedRuns = "idemkit.executor.retried_runs_total"
	// MetricGivenUpRuns counts the runs the stream's last try (MaxAttempts,
	// StreamMaxRetries + 1) or the stale-run pass's ended failed because
	// their execution kept failing ("executor: gave up after N attempts"):
	// runs the host failed, not their workflows. No dimensions. Counted
	// once per run, by the write that ended it. With StreamMaxRetries 0 a
	// run's first failure is its last try, and MetricRetriedRuns never
	// counts it: this is the one metric of it. Any is worth a page.
	MetricGivenUpRuns = "idemkit.executor.given_up_runs_total"
	// MetricResumePasses counts the invocations of the minute schedule
	// (ResumeEvent), one as each pass begins, whatever it then finds or
	// fails at (a failed pass is the errors alarm's). No dimensions. It is
	// written every minute on an idle stack too: a gap means the schedule
	// did not invoke the function (its rule disabled, its invoke
	// permission removed, its invocations throttled until dropped), and
	// parked runs, and runs whose executor died, are not resumed meanwhile.
	MetricResumePasses = "idemkit.executor.resume_passes_total"

	// DimTrigger is MetricStartLag's one dimension: what started the run.
	DimTrigger = "trigger"
	// TriggerStream: the run's stream record (its INSERT).
	TriggerStream = "stream"
	// TriggerStale: the stale-run pass.
	TriggerStale = "stale"
	// DimKind is MetricCapsBreached's one dimension: the cap.breached kind.
	DimKind = "kind"
)

const (
	// defaultLastTryMargin is LastTryMargin's default.
	defaultLastTryMargin = 30 * time.Second
	// noDeadlineBudget bounds the last try's wait when ctx has no deadline
	// (e.g. `idemkit dev`'s pollers): Lambda's longest invocation.
	noDeadlineBudget = 15 * time.Minute
	// retryAfterSlack is added to InFlightError.RetryAfter, which the
	// ledger rounds to whole seconds (possibly down).
	retryAfterSlack = time.Second
	// endMargin is the time a stream record's execution leaves free
	// before the invocation's deadline (executing): an execution cut
	// there still has its failure counted on the run (and, on the last
	// try, the run ended) and the partial batch response returned before
	// Lambda times the invocation out.
	endMargin = 2 * time.Second
)

// executing returns the context a run's execution runs under (a stream
// record's, one the last try runs again, a stale run's):
// ctx, ending endMargin before ctx's deadline (none without one), so that
// an execution that runs as long as it may (a hanging receiver, nodes
// longer than the invocation) ends in time for giveUp's writes under ctx
// and the response. Cut at the deadline itself, neither would be made:
// Lambda ends the invocation as timed out, the failure is never counted,
// and a run whose every try so ends is handed to the failure queue still
// "running" instead of being ended by its last try.
func executing(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(ctx, dl.Add(-endMargin))
	}
	return ctx, func() {}
}

// storeCalls returns the context the give-up's own store calls (the count
// of a failed try, the last try's end, park or breach written again) and
// the scheduled pass run under: ctx, ending half endMargin before ctx's deadline (none without
// one). The SDK's client bounds no call by a time of its own, so a call
// that never answers (a connection that hangs) under ctx itself ran to
// the invocation's deadline, where Lambda ends it as timed out: the
// stream delivers the whole batch again, the records before it handled
// again, and the scheduled pass logs nothing. Cut here, it fails as any
// store error does (the record is retried by its sequence number, the
// pass goes on) in time for the answer (RED_TEAM 452).
func storeCalls(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(ctx, dl.Add(-endMargin/2))
	}
	return ctx, func() {}
}

// noTimeLeft reports whether ctx's deadline leaves no time to execute a
// run (executing's context would be done at once): one started there
// would fail at once and have a try counted that never ran.
func noTimeLeft(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && time.Until(dl) <= endMargin
}

// clock is Test.Clock, or the system clock.
func (x *Executor) clock() ledger.Clock {
	if x.Test.Clock != nil {
		return x.Test.Clock
	}
	return sysclock.System{}
}

func (x *Executor) sleep(ctx context.Context, d time.Duration) error { return x.clock().Sleep(ctx, d) }

func (x *Executor) now() time.Time { return x.clock().Now() }

func (x *Executor) log() *slog.Logger {
	if x.Logger != nil {
		return x.Logger
	}
	return slog.Default()
}

// HandleLambda is the Lambda handler (ReportBatchItemFailures).
func (x *Executor) HandleLambda(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var out events.DynamoDBEventResponse
	recs := make([]stream.StreamRecord, 0, len(ev.Records))
	for _, r := range ev.Records {
		sr, err := stream.FromLambda(r)
		if err != nil {
			x.log().ErrorContext(ctx, "executor: undecodable stream record", slog.String("event_id", r.EventID), keyhash.ErrAttr(err))
			continue // poison record: retrying cannot help
		}
		recs = append(recs, sr)
	}
	// A stream's partial batch response names a record by its sequence
	// number (where the mapping checkpoints), not by its eventID.
	seq := make(map[string]string, len(ev.Records))
	for _, r := range ev.Records {
		seq[r.EventID] = r.Change.SequenceNumber
	}
	for _, id := range x.HandleRecords(ctx, recs) {
		if seq[id] == "" {
			return events.DynamoDBEventResponse{}, errNoSequence // the whole batch again
		}
		out.BatchItemFailures = append(out.BatchItemFailures, events.DynamoDBBatchItemFailure{ItemIdentifier: seq[id]})
	}
	return out, nil
}

// errNoSequence fails a batch whose record to retry has no sequence number
// to name it by.
var errNoSequence = errors.New("executor: a stream record to retry has no sequence number")

// HandleRecords processes stream records in order and returns the event ids
// of the records to retry. As with Lambda's partial batch responses, the
// first failure stops the batch: it and every later record are returned.
func (x *Executor) HandleRecords(ctx context.Context, recs []stream.StreamRecord) (retry []string) {
	for i, r := range recs {
		if r.EventName != "INSERT" && !resumed(r) {
			continue
		}
		run, ok := runs.RunFromItem(r.NewImage)
		if !ok {
			continue
		}
		if noTimeLeft(ctx) {
			// No time left to execute it (a record after one that
			// used the invocation up): retried, no failure counted,
			// as a try never made.
			x.log().InfoContext(ctx, "executor: no time left to start the run; it is retried", slog.String("run_id", run.ID))
			for _, rest := range recs[i:] {
				retry = append(retry, rest.EventID)
			}
			return retry
		}
		ectx, cancel := executing(ctx)
		err := x.start(ectx, run)
		cancel()
		if err != nil {
			if errors.Is(err, errHeld) {
				for _, rest := range recs[i:] {
					retry = append(retry, rest.EventID)
				}
				return retry
			}
			if x.giveUp(ctx, run.ID, err) {
				continue
			}
			if stopped(ctx) {
				x.log().InfoContext(ctx, "executor: stopped before the run ended; it is retried", slog.String("run_id", run.ID))
			} else {
				x.log().WarnContext(ctx, "executor: run will be retried", slog.String("run_id", run.ID), keyhash.ErrAttr(err))
				if x.Metrics != nil {
					x.Metrics.Count(MetricRetriedRuns, 1, nil)
				}
			}
			for _, rest := range recs[i:] {
				retry = append(retry, rest.EventID)
			}
			return retry
		}
	}
	return nil
}

// resumed reports whether r is the change of a run from paused to running
// (resumeRun: runs.PauseStore.Unpause), which the executor continues as it
// starts a new run: the run is adopted (Execute) and driven on from its
// log.
func resumed(r stream.StreamRecord) bool {
	if r.EventName != "MODIFY" {
		return false
	}
	was, ok := runs.RunFromItem(r.OldImage)
	if !ok || was.Status != runs.StatusPaused {
		return false
	}
	now, ok := runs.RunFromItem(r.NewImage)
	return ok && now.Status == runs.StatusRunning
}

// stopped reports whether the executor's own context was cancelled (idemkit
// dev shutting down), as opposed to a run's execution failing; an
// execution that runs out of time (executing: endMargin before the
// invocation's deadline) ends with context.DeadlineExceeded instead,
// which still counts as a failed try.
func stopped(ctx context.Context) bool { return errors.Is(ctx.Err(), context.Canceled) }

// giveUp counts a failed execution of the run and, when it was the
// stream's last try (MaxAttempts), ends a run whose breached cap could not
// be recorded on the breach (cap.breached, failed with the registry code),
// or else first waits out an effect in flight elsewhere when that fits
// (waitOut); otherwise, if the execution after the wait fails too, or the
// breach is refused again, it ends the run failed; it reports whether the
// record is done (no retry). A run that has ended, or is gone (it ended
// and its retention passed), has no failure to count: the record is done.
// When the failed execution held the run (a *heldError), the run is
// failed only under that execution's claim epoch: taken by another
// execution since, it is left to that one and the record is done.
func (x *Executor) giveUp(ctx context.Context, runID string, cause error) bool {
	if stopped(ctx) {
		// The executor was stopped, not the run: no failure is counted
		// against it, so stopping and starting again never uses up its
		// tries; its record is retried.
		return false
	}
	// The give-up's store calls are cut before the deadline (storeCalls);
	// waitOut keeps ctx for its wait's budget and its executions.
	wctx := ctx
	ctx, cancel := storeCalls(ctx)
	defer cancel()
	msg := truncate(cause.Error())
	n, err := x.Runs.NoteFailure(ctx, runID, msg, x.now())
	switch {
	case errors.Is(err, runs.ErrStatusConflict):
		return true // the run has already ended (e.g. cancelled): nothing left to retry
	case errors.Is(err, runs.ErrRunNotFound):
		// It ended and its retention has passed since (the stream's
		// record, or the stale-run pass's claim, says it was written):
		// nothing is left to count, end or retry, as for a run that ended.
		x.log().InfoContext(ctx, "executor: run gone before its failure was counted", slog.String("run_id", runID), keyhash.ErrAttr(cause))
		return true
	}
	if err != nil {
		x.log().ErrorContext(ctx, "executor: could not count the failure", slog.String("run_id", runID), keyhash.ErrAttr(err))
		return false
	}
	if x.MaxAttempts <= 0 || n < x.MaxAttempts {
		return false
	}
	last := cause // the error of the latest execution of the run
	var unwritten *breachUnwritten
	if errors.As(cause, &unwritten) {
		// The run breached a cap: its last try ends it on the breach
		// (cap.breached, the registry code), not as a failure of the
		// host. Refused again, it is failed below all the same: a run
		// always reaches a terminal status.
		err := x.breach(ctx, runID, unwritten.b)
		if err == nil {
			return true
		}
		x.log().ErrorContext(ctx, "executor: could not end the run on its breached cap", slog.String("run_id", runID), keyhash.ErrAttr(err))
		msg = truncate(err.Error())
	} else if parked, done, err := x.parkAsExecuted(ctx, runID, cause); parked {
		// The execution's effect is to be tried later and only the write
		// of the run's wake was refused: its last try parks the run again,
		// under the claim epoch it held, rather than failing a run whose
		// delivery has tries left.
		if done {
			return true
		}
		msg = truncate(err.Error())
	} else if ended, done, err := x.endAsExecuted(ctx, runID, cause); ended {
		// The execution ran the run to its end and only the write of that
		// end was refused: its last try writes that end again, under the
		// claim epoch it held, rather than failing a run whose nodes (and
		// effects) completed.
		if done {
			return true
		}
		msg = truncate(err.Error())
	} else if waited, err := x.waitOut(wctx, runID, cause); waited {
		if err == nil {
			x.log().InfoContext(ctx, "executor: last try completed the run after waiting out an in-flight effect", slog.String("run_id", runID))
			return true
		}
		msg = truncate(err.Error())
		if errors.As(err, new(*heldError)) {
			last = err
		}
		// The execution once more ran the run to its end, or to a park,
		// and the write of that end or wake was refused: it is written
		// again, as for the first execution's.
		if parked, done, perr := x.parkAsExecuted(ctx, runID, err); parked {
			if done {
				return true
			}
			msg = truncate(perr.Error())
		} else if ended, done, ferr := x.endAsExecuted(ctx, runID, err); ended {
			if done {
				return true
			}
			msg = truncate(ferr.Error())
		}
	}
	final := truncate(fmt.Sprintf("executor: gave up after %d attempts: %s", n, msg))
	var held *heldError
	var r runs.Run
	if errors.As(last, &held) {
		// The failed execution held the run: it ends it only while it
		// still does (another execution may have taken it since).
		r, err = x.Runs.Finish(ctx, runID, held.epoch, runs.StatusFailed, final, x.now())
	} else {
		// It failed before taking the run: it ends it only while no
		// execution holds it, pending. A running run is another
		// execution's (a second delivery started it, a pass took it;
		// RED_TEAM 330), or its own start landed with the answer lost,
		// which no execution then drives and the stale-run pass takes:
		// either way an execution that holds the run ends it.
		r, err = x.Runs.Transition(ctx, runID, []runs.Status{runs.StatusPending}, runs.StatusFailed, final, x.now())
	}
	switch {
	case err == nil:
		x.log().ErrorContext(ctx, "executor: run failed after its last try", slog.String("run_id", runID), slog.Int("attempts", n))
		if x.Metrics != nil {
			x.Metrics.Count(MetricGivenUpRuns, 1, nil)
		}
		return true
	case errors.Is(err, runs.ErrStatusConflict) && r.Status == runs.StatusRunning:
		epoch := int64(0) // it never held the run
		if held != nil {
			epoch = held.epoch
		}
		x.logTaken(ctx, runID, "was given up; that one ends it", epoch, r.Epoch)
		return true
	case errors.Is(err, runs.ErrStatusConflict):
		x.log().InfoContext(ctx, "executor: run ended meanwhile", slog.String("run_id", runID), slog.String("status", string(r.Status)))
		return true
	case errors.Is(err, runs.ErrRunNotFound):
		x.log().InfoContext(ctx, "executor: run gone before it was given up", slog.String("run_id", runID))
		return true
	}
	x.log().ErrorContext(ctx, "executor: could not fail the run", slog.String("run_id", runID), keyhash.ErrAttr(err))
	return false
}

// endAsExecuted is the last try's write, again, of the end an execution
// ran its run to (cause a *finishUnwritten under a *heldError: completed,
// or failed on a node) and whose write the store refused, under the claim
// epoch that execution held. It reports ended false, and does nothing,
// for any other cause; done when the end is written, or the run ended or
// was taken meanwhile (the record is done); otherwise err, the refusal.
func (x *Executor) endAsExecuted(ctx context.Context, runID string, cause error) (ended, done bool, err error) {
	var fu *finishUnwritten
	var held *heldError
	if !errors.As(cause, &fu) || !errors.As(cause, &held) {
		return false, false, nil
	}
	r, err := x.Runs.Finish(ctx, runID, held.epoch, fu.to, fu.msg, x.now())
	switch {
	case err == nil:
		x.log().InfoContext(ctx, "executor: last try ended the run as its execution did", slog.String("run_id", runID), slog.String("status", string(fu.to)))
		return true, true, nil
	case errors.Is(err, runs.ErrStatusConflict), errors.Is(err, runs.ErrRunNotFound):
		x.log().InfoContext(ctx, "executor: run ended or taken meanwhile", slog.String("run_id", runID), slog.String("status", string(r.Status)))
		return true, true, nil
	}
	x.log().ErrorContext(ctx, "executor: could not end the run as its execution did", slog.String("run_id", runID), keyhash.ErrAttr(err))
	return true, false, err
}

// waitOut is the last try's second chance: when cause is an effect in
// flight elsewhere whose claim ends within the invocation's remaining time
// (see Executor.LastTryMargin), it waits the claim out and executes the run
// once more, reporting waited and that execution's error. When cause is an
// effect attempt this try lost (ledger.ErrLeaseLost: taken over, its
// outcome maybe recorded by the executor that took it) or fired without
// its outcome recorded (ledger.ErrOutcomeNotRecorded: a store error after
// the call), it executes the run once more first, and waits out the
// effect if that execution finds it in flight. When a node event could
// not be appended to the run's log (a store error: the node's effect may
// have been delivered), it does the same under the claim epoch the failed
// execution held, only while that execution still holds the run. It reports waited false (nothing done) for any other cause, a
// wait that does not fit, or a wait cut short by ctx.
func (x *Executor) waitOut(ctx context.Context, runID string, cause error) (waited bool, err error) {
	var inf *ledger.InFlightError
	lost, unrecorded := errors.Is(cause, ledger.ErrLeaseLost), errors.Is(cause, ledger.ErrOutcomeNotRecorded)
	var held *heldError
	if !lost && !unrecorded && errors.As(cause, new(*logUnwritten)) && errors.As(cause, &held) {
		// A node event was not appended (a store error): the node's
		// effect may have been delivered, and what it came to is in the
		// ledger. While this execution still holds the run (its claim
		// epoch), the run is executed once more under that claim, as the
		// next try would execute it: a recorded outcome is replayed and
		// its node event appended. A run another execution took since is
		// that one's (the give-up leaves it); one that ended is left.
		gctx, cancel := storeCalls(ctx)
		run, err := x.Runs.Get(gctx, runID)
		cancel()
		if err != nil || run.Status != runs.StatusRunning || run.Epoch != held.epoch {
			return false, nil
		}
		x.log().InfoContext(ctx, "executor: last try executes again after its node event was not recorded", slog.String("run_id", runID))
		ectx, cancel := executing(ctx)
		err = x.proceed(ectx, run)
		cancel()
		if err == nil || !errors.As(err, &inf) {
			return true, err
		}
		cause = err
	}
	if (lost || unrecorded) && !errors.As(cause, &inf) {
		// This try's attempt was taken over by another executor (which
		// may have recorded the effect's outcome already), its lease
		// could not be renewed, or its outcome could not be written (the
		// effect may have happened; the attempt is left firing): what the
		// effect came to is in the ledger, not in this error. The run is
		// executed once more, as the next try would be: a recorded
		// outcome is replayed, and an attempt still in flight is waited
		// out below (its reclaim fires under the same provider key).
		if lost {
			x.log().InfoContext(ctx, "executor: last try executes again after its effect attempt was lost", slog.String("run_id", runID))
		} else {
			x.log().InfoContext(ctx, "executor: last try executes again after its effect's outcome was not recorded", slog.String("run_id", runID))
		}
		ectx, cancel := executing(ctx)
		err := x.Execute(ectx, runID)
		cancel()
		if err == nil || !errors.As(err, &inf) {
			return true, err
		}
		cause = err
	}
	if !errors.As(cause, &inf) {
		return false, nil
	}
	wait := inf.RetryAfter + retryAfterSlack
	budget := noDeadlineBudget
	if left, ok := sysclock.Remaining(ctx); ok {
		margin := x.LastTryMargin
		if margin <= 0 {
			margin = defaultLastTryMargin
		}
		// The execution after the wait ends endMargin before the
		// deadline (executing): the wait keeps LastTryMargin for it
		// before that end, not before the deadline itself.
		budget = left - margin - endMargin
	}
	if wait > budget {
		x.log().WarnContext(ctx, "executor: last try cannot wait out the in-flight effect", slog.String("run_id", runID),
			slog.Int64("retry_after_ms", inf.RetryAfter.Milliseconds()), slog.Int64("budget_ms", budget.Milliseconds()))
		return false, nil
	}
	x.log().InfoContext(ctx, "executor: last try waits out an in-flight effect", slog.String("run_id", runID), slog.Int64("wait_ms", wait.Milliseconds()))
	if err := x.sleep(ctx, wait); err != nil {
		return false, nil
	}
	ectx, cancel := executing(ctx)
	defer cancel()
	return true, x.Execute(ectx, runID)
}

// truncate bounds an error message stored on a run to 512 bytes of valid
// UTF-8.
func truncate(msg string) string {
	if len(msg) > 512 {
		return strings.ToValidUTF8(msg[:512], "")
	}
	return msg
}

// Execute runs the run's workflow to a terminal status. It returns an error
// only when the run should be retried later; permanent node failures end the
// run "failed" and return nil.
func (x *Executor) Execute(ctx context.Context, runID string) error {
	run, err := x.Runs.Get(ctx, runID)
	if errors.Is(err, runs.ErrRunNotFound) {
		return nil // never committed, or past retention
	}
	if err != nil {
		return err
	}
	if run.Status.Terminal() {
		return nil // duplicate delivery of a finished (or cancelled) run
	}
	if run.Status == runs.StatusPending {
		return x.begin(ctx, runID)
	}
	return x.adopt(ctx, runID)
}

// adopt takes a running run for this execution (RunStore.Adopt: a new
// claim epoch, so an execution of it still under way elsewhere is fenced
// and writes nothing more) and resumes it. A run that ended meanwhile, or
// no longer exists, is left alone.
func (x *Executor) adopt(ctx context.Context, runID string) error {
	return x.take(ctx, runID, x.Runs.Adopt)
}

// wake takes a due parked run for this execution (RunStore.Resume: the
// wake cleared in the same compare-and-set, so no later due pass takes it
// again while this execution lives) and resumes it. A run another pass
// took first, that is no longer due, has ended or no longer exists is left
// alone.
func (x *Executor) wake(ctx context.Context, runID string) error {
	return x.take(ctx, runID, x.Runs.Resume)
}

// take takes a running run for this execution with takeRun (Adopt or
// Resume: a new claim epoch, so an execution of it still under way
// elsewhere is fenced) and resumes it.
func (x *Executor) take(ctx context.Context, runID string, takeRun func(context.Context, string, time.Time) (runs.Run, error)) error {
	// Under TestConfig.Booted (idemkit dev), a running run last updated
	// before this process started was interrupted by the previous one: it
	// is recorded as restored once adopted. Adopting moves its update
	// time, so the run is read before, and the finding is kept until the
	// event is recorded: a retry after a failed record, or a delivery that
	// reads the run after another adopted it, records it still.
	interrupted := false
	if !x.Test.Booted.IsZero() {
		before, err := x.Runs.Get(ctx, runID)
		switch {
		case errors.Is(err, runs.ErrRunNotFound):
			return nil
		case err != nil:
			return err // whether it was interrupted is unknown: retried later
		case before.Status == runs.StatusRunning && before.UpdatedAt.Before(x.Test.Booted):
			x.unrecorded.mark(runID)
		}
		interrupted = x.unrecorded.has(runID)
	}
	run, err := takeRun(ctx, runID, x.now())
	switch {
	case errors.Is(err, runs.ErrRunNotFound), errors.Is(err, runs.ErrStatusConflict):
		x.unrecorded.clear(runID)
		return nil
	case err != nil:
		return err
	}
	if interrupted {
		if r, err := x.restore(ctx, run); errors.Is(err, runs.ErrStatusConflict) {
			return nil // ended or taken meanwhile (by a delivery that records it)
		} else if err != nil {
			return &heldError{epoch: run.Epoch, err: err} // taken: given up only under this claim
		} else {
			run = r
		}
		x.unrecorded.clear(runID)
	}
	if run.Status == runs.StatusPending {
		// Taken before it started (a run parked while pending): it starts
		// through the compare-and-set pending -> running.
		return x.begin(ctx, runID)
	}
	return x.proceed(ctx, run)
}

// start executes the run an INSERT record announced. The record's image is
// the run as created, so for a pending run the read Execute begins with
// would only confirm what the image says: start goes straight to the
// compare-and-set pending -> running (begin), whose answer is
// authoritative either way (the run as written, or the run as stored when
// the status was no longer pending). Any other image status is re-read
// (Execute).
func (x *Executor) start(ctx context.Context, image runs.Run) error {
	if image.Status != runs.StatusPending {
		return x.Execute(ctx, image.ID)
	}
	return x.begin(ctx, image.ID)
}

// triggerKey carries the start lag's "trigger" dimension on ctx.
type triggerKey struct{}

// started reports a run's start lag (MetricStartLag).
func (x *Executor) started(ctx context.Context, run runs.Run) {
	if x.Metrics == nil || run.CreatedAt.IsZero() {
		return
	}
	trigger, _ := ctx.Value(triggerKey{}).(string)
	if trigger == "" {
		trigger = TriggerStream
	}
	lag := max(x.now().Sub(run.CreatedAt), 0)
	x.Metrics.Milliseconds(MetricStartLag, float64(lag.Milliseconds()), map[string]string{DimTrigger: trigger})
}

// begin moves a pending run to running (taking it for this execution: a
// new claim epoch) and executes it. When the run was no longer pending:
// another delivery started it (running) and it is adopted and resumed
// (nodes re-execute from their start and the ledger dedups their
// effects); it finished or was cancelled meanwhile, or no longer exists
// (past retention), and nothing is done.
func (x *Executor) begin(ctx context.Context, runID string) error {
	if x.Test.Held != nil && x.Test.Held(ctx, runID) {
		return errHeld
	}
	run, err := x.Runs.Transition(ctx, runID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", x.now())
	switch {
	case errors.Is(err, runs.ErrRunNotFound):
		return nil
	case errors.Is(err, runs.ErrStatusConflict):
		if run.Status != runs.StatusRunning {
			return nil // cancelled (or finished) meanwhile
		}
		return x.adopt(ctx, runID)
	case err != nil:
		return err
	default:
		x.started(ctx, run)
	}
	return x.proceed(ctx, run)
}

// logTaken logs, at INFO, that run runID was taken by another execution
// (claim epoch current) before this one, holding epoch held, ended,
// parked or gave it up (what): that one now drives it, and this one's
// record is done.
func (x *Executor) logTaken(ctx context.Context, runID, what string, held, current int64) {
	x.log().InfoContext(ctx, "executor: run taken by another execution before it "+what, slog.String("run_id", runID),
		slog.Int64("claim_epoch", held), slog.Int64("current_claim_epoch", current))
}

// heldError is the error of an execution that held its run under the
// claim epoch epoch when it failed (proceed): the give-up of the stream's
// last try (giveUp) ends the run only while that epoch still holds it.
type heldError struct {
	epoch int64
	err   error
}

func (e *heldError) Error() string { return e.err.Error() }
func (e *heldError) Unwrap() error { return e.err }

// proceed runs a started run's nodes under its claim (run.Epoch, renewed
// by a heartbeat while they run) and records how they ended: parked until
// its effect's next attempt, completed, or failed; a run whose execution
// ends at or past its deadline (runTimeoutMs), however it ended, or that
// breached a cap, fails on the breach (breach). An execution whose
// claim another took (the heartbeat or a node-log append refused) stops
// and records nothing. Its error (the run to be retried) is a *heldError
// naming the claim epoch it held.
func (x *Executor) proceed(ctx context.Context, run runs.Run) error {
	if err := x.drive(ctx, run); err != nil {
		return &heldError{epoch: run.Epoch, err: err}
	}
	return nil
}

// drive is proceed's execution.
func (x *Executor) drive(ctx context.Context, run runs.Run) error {
	runID, rc := run.ID, capsOf(run)
	if b := x.overdue(rc, ""); b != nil {
		return x.breach(ctx, runID, b) // past its runTimeoutMs: no node starts
	}
	hctx, hb := x.startHeartbeat(ctx, run)
	nodeErr := x.runNodes(hctx, run, rc)
	if hb.stop() {
		x.log().WarnContext(ctx, "executor: run taken by another execution, this one stops", slog.String("run_id", runID))
		return nil
	}
	var later *ledger.RetryLaterError
	var capped *capBreach
	if !errors.As(nodeErr, &capped) && !errors.Is(nodeErr, errRunEnded) {
		// A run whose execution ends after its deadline ends timed out,
		// however the execution ended: completed, failed, an effect to
		// be tried later (not parked past the deadline), or a transient
		// failure (not retried, nor failed on the last try, as another).
		capped = x.overdue(rc, "")
	}
	switch {
	case capped != nil:
		return x.breach(ctx, runID, capped)
	case errors.As(nodeErr, &later):
		return x.park(ctx, run, rc, later)
	case errors.Is(nodeErr, errRunEnded):
		return nil // cancelled meanwhile: nothing more to record
	case nodeErr == nil:
		return x.finish(ctx, run, runs.StatusCompleted, "")
	case permanent(nodeErr):
		return x.finish(ctx, run, runs.StatusFailed, nodeErr.Error())
	default:
		return nodeErr
	}
}

// permanent reports node errors that end the run failed: a recorded effect
// failure, exhausted webhook retries, an effect record at its attempt cap
// (ledger.Config.MaxAttempts: nothing will ever fire again), an invalid
// identity, a run whose
// recipe stamps this kit does not compute (its identities are never
// recomputed under another recipe).
func permanent(err error) bool {
	var nf *NodeFailedError
	return errors.As(err, &nf) || errors.Is(err, runs.ErrForkUnreadable) || errors.Is(err, ledger.ErrEffectFailed) || errors.Is(err, webhook.ErrRetriesExhausted) ||
		errors.Is(err, ledger.ErrInvalidIdentity) || errors.Is(err, ledger.ErrMismatch) ||
		errors.Is(err, ledger.ErrUnsupportedRecipe) || errors.Is(err, ledger.ErrAttemptsExhausted)
}

// park schedules the run to be executed again when its effect's next
// attempt is due, or at the run's deadline (runTimeoutMs) when that comes
// first: the resume then ends it timed out. It parks the run only while
// this execution holds it (RunStore.Park under run.Epoch): a run another
// execution took is left to that one (logged at INFO, no retry).
func (x *Executor) park(ctx context.Context, run runs.Run, rc runCaps, later *ledger.RetryLaterError) error {
	runID, wakeAt := run.ID, wakeBy(rc, later.At)
	w := runs.Wake{At: wakeAt, Attempt: later.Attempt, MaxAttempts: later.MaxAttempts, Deadline: later.Deadline}
	cur, err := x.Runs.Park(ctx, runID, run.Epoch, w, x.now())
	switch {
	case errors.Is(err, runs.ErrStatusConflict) && cur.Status == runs.StatusRunning:
		// Taken by another execution (its claim epoch): that one drives
		// the run, and parks it if its effect is to be tried later.
		x.logTaken(ctx, runID, "was parked; this one stops", run.Epoch, cur.Epoch)
		return nil
	case errors.Is(err, runs.ErrStatusConflict), errors.Is(err, runs.ErrRunNotFound):
		return nil // ended meanwhile (e.g. cancelled)
	case err != nil:
		return &parkUnwritten{wake: w, err: err}
	}
	x.parked(ctx, runID, w)
	return nil
}

// parked logs a run parked until w and tells Parked.
func (x *Executor) parked(ctx context.Context, runID string, w runs.Wake) {
	x.log().InfoContext(ctx, "executor: run parked until its next effect attempt", slog.String("run_id", runID),
		slog.Time("wake_at", w.At), slog.Int("attempt", w.Attempt), slog.Int("max_attempts", w.MaxAttempts))
	if x.Parked != nil {
		x.Parked(w.At)
	}
}

// parkUnwritten is the error of an execution whose effect is to be tried
// later (a *ledger.RetryLaterError: a provider's Retry-After, a backoff)
// and whose park (RunStore.Park) the store refused transiently: the
// execution is retried, and the last try parks the run as the execution
// would have, by the same Park tried again under the claim epoch it held
// (giveUp), failing it as given up only when refused once more. So a run
// whose delivery has tries left is never ended "failed" for a refused
// write of its wake alone.
type parkUnwritten struct {
	wake runs.Wake
	err  error
}

func (e *parkUnwritten) Error() string { return "executor: park the run: " + e.err.Error() }
func (e *parkUnwritten) Unwrap() error { return e.err }

// parkAsExecuted is the last try's write, again, of the park an execution
// came to (cause a *parkUnwritten under a *heldError) and whose write the
// store refused, under the claim epoch that execution held. It reports
// parked false, and does nothing, for any other cause; done when the run
// is parked, or ended or was taken meanwhile (the record is done);
// otherwise err, the refusal.
func (x *Executor) parkAsExecuted(ctx context.Context, runID string, cause error) (parked, done bool, err error) {
	var pu *parkUnwritten
	var held *heldError
	if !errors.As(cause, &pu) || !errors.As(cause, &held) {
		return false, false, nil
	}
	r, err := x.Runs.Park(ctx, runID, held.epoch, pu.wake, x.now())
	switch {
	case err == nil:
		x.parked(ctx, runID, pu.wake)
		return true, true, nil
	case errors.Is(err, runs.ErrStatusConflict), errors.Is(err, runs.ErrRunNotFound):
		x.log().InfoContext(ctx, "executor: run ended or taken meanwhile", slog.String("run_id", runID), slog.String("status", string(r.Status)))
		return true, true, nil
	}
	x.log().ErrorContext(ctx, "executor: could not park the run as its execution did", slog.String("run_id", runID), keyhash.ErrAttr(err))
	return true, false, err
}

// DefaultResumeBatch is how many due runs one ResumeDue pass executes.
const DefaultResumeBatch = 100

// ResumeDue executes the parked runs whose wake time has come (up to
// DefaultResumeBatch per pass, earliest first) and returns how many it
// found due. Each is taken with RunStore.Resume, which clears its wake:
// a later pass never takes a run whose resumed execution is under way
// (it would fence that execution and run its open node again). A run
// whose execution then fails, or whose executor stops, is a running run
// like any other: the stale-run pass resumes it once it has made no
// progress for StaleAfter, counting the failure. The first error is
// returned after the pass.
// When the due runs cannot be queried, nothing runs and the error wraps
// ErrRunsQuery. Run it on a schedule (template.yaml: every minute) or a
// ticker.
func (x *Executor) ResumeDue(ctx context.Context) (int, error) {
	ids, err := x.Runs.Due(ctx, x.now(), DefaultResumeBatch)
	if err != nil {
		return 0, fmt.Errorf("%w: due runs: %w", ErrRunsQuery, err)
	}
	var first error
	for _, id := range ids {
		if err := x.wake(ctx, id); err != nil {
			if first == nil {
				first = err
			}
			if stopped(ctx) {
				// The executor was stopped: the run stays parked and due,
				// and a later pass executes it; the pass ends here.
				x.log().InfoContext(ctx, "executor: stopped before the due run ended; a later pass executes it", slog.String("run_id", id))
				return len(ids), first
			}
			x.log().WarnContext(ctx, "executor: due run stays parked", slog.String("run_id", id), keyhash.ErrAttr(err))
		}
	}
	return len(ids), first
}

// DefaultStaleAfter is StaleAfter's default: Lambda's longest invocation.
const DefaultStaleAfter = 15 * time.Minute

// ResumeStale drives the runs whose creation was acknowledged but whose
// stream delivery was lost or given up (a store outage longer than the
// stream's retries, a crash between reading a record and handling it): it
// lists the live, unparked runs without progress for StaleAfter
// (RunStore.Stale, up to DefaultResumeBatch), claims each with a
// compare-and-set (RunStore.Claim: a run another resumer or an executor
// moved meanwhile is skipped), and executes it exactly as a stream delivery
// would: a pending run through the compare-and-set pending -> running, a
// running one resumed from its nodes' start (the ledger returns recorded
// effects, fires nothing twice). A paused run whose run.paused was held
// for the node its execution drained, and whose claim that execution
// stopped renewing for StaleAfter, is listed too: Claim refuses it, and
// the pass records its run.paused (releaseStalePause) and leaves it
// paused, neither claimed nor counted. A failing execution is counted on the run
// like a stream try (the MaxAttempts-th ends it failed), so a stranded run
// always reaches a terminal status. It returns how many runs it claimed and
// the first error; when the stale runs cannot be queried, nothing runs and
// the error wraps ErrRunsQuery.
func (x *Executor) ResumeStale(ctx context.Context) (int, error) {
	after := x.StaleAfter
	if after <= 0 {
		after = DefaultStaleAfter
	}
	now := x.now()
	before := now.Add(-after)
	ids, err := x.Runs.Stale(ctx, before, DefaultResumeBatch)
	if err != nil {
		return 0, fmt.Errorf("%w: stale runs: %w", ErrRunsQuery, err)
	}
	var first error
	n := 0
	for _, id := range ids {
		if noTimeLeft(ctx) {
			// No time left to drive another run: a later pass
			// claims it, no failure counted.
			return n, first
		}
		run, err := x.Runs.Claim(ctx, id, before, x.now())
		switch {
		case errors.Is(err, runs.ErrStatusConflict):
			// Progressed, parked, ended or claimed meanwhile; or paused
			// while its node drained, by an execution that stopped.
			if err := x.releaseStalePause(ctx, run, before, after); err != nil && first == nil {
				first = err
			}
			continue
		case errors.Is(err, runs.ErrRunNotFound):
			continue // ended and gone meanwhile
		case err != nil:
			if first == nil {
				first = err
			}
			continue
		}
		n++
		if x.Metrics != nil {
			x.Metrics.Count(MetricStaleRuns, 1, nil)
		}
		x.log().WarnContext(ctx, "executor: resuming a run without progress", slog.String("run_id", id),
			slog.String("status", string(run.Status)), slog.Int64("stale_after_ms", after.Milliseconds()))
		if run.Status == runs.StatusRunning {
			// Its execution was interrupted: the log says it was resumed
			// before anything else is written. A run whose event could not
			// be recorded is not resumed; the failure is counted like an
			// execution's, and a later pass claims it again.
			r, err := x.restore(ctx, run)
			if errors.Is(err, runs.ErrStatusConflict) {
				continue // ended or taken meanwhile
			}
			if err != nil {
				x.log().WarnContext(ctx, "executor: could not record the stale run as restored; a later pass resumes it", slog.String("run_id", id), keyhash.ErrAttr(err))
				// The pass held the run by its claim: the give-up ends it
				// only while that claim holds (RED_TEAM 330).
				err = &heldError{epoch: run.Epoch, err: err}
				if !x.giveUp(ctx, id, err) && first == nil {
					first = err
				}
				continue
			}
			run = r
		}
		ectx, cancel := executing(context.WithValue(ctx, triggerKey{}, TriggerStale))
		err = x.resume(ectx, run)
		cancel()
		if err != nil && !x.giveUp(ctx, id, err) {
			if first == nil {
				first = err
			}
			if stopped(ctx) {
				// The executor was stopped, not the run: it stays live
				// and a later pass resumes it; the pass ends here.
				x.log().InfoContext(ctx, "executor: stopped before the stale run ended; a later pass resumes it", slog.String("run_id", id))
				return n, first
			}
			x.log().WarnContext(ctx, "executor: stale run stays live", slog.String("run_id", id), keyhash.ErrAttr(err))
		}
	}
	return n, first
}

// releaseStalePause records the held run.paused of run, as the stale-run
// pass's Claim refused it, when it is paused with that event held for the
// node its execution drained and its claim went unrenewed since before
// (StaleAfter, after): that execution stopped mid-node (it died, or ended
// on a transient failure, which NoteFailure does not count on a paused
// run), so the node will not drain and, but for this, the run's events
// would show no run.paused until a resume (RED_TEAM 388). The run stays
// paused (runs.PauseStore.ReleaseStalePause, one write): it is not
// claimed, driven nor counted as a stale run. A run any other write moved
// meanwhile (the node drained, the execution renewed, a resume, a cancel,
// another pass's release) is left as it is.
func (x *Executor) releaseStalePause(ctx context.Context, run runs.Run, before time.Time, after time.Duration) error {
	if run.Status != runs.StatusPaused || run.PausePending == nil || run.UpdatedAt.After(before) {
		return nil
	}
	ps, ok := x.Runs.(runs.PauseStore)
	if !ok {
		return nil // a store without pauses holds none
	}
	_, err := ps.ReleaseStalePause(ctx, run, before, x.now())
	switch {
	case err == nil:
		x.log().WarnContext(ctx, "executor: recorded the pause of a run whose execution stopped before its node drained", slog.String("run_id", run.ID),
			slog.Int64("stale_after_ms", after.Milliseconds()))
		return nil
	case errors.Is(err, runs.ErrStatusConflict), errors.Is(err, runs.ErrRunNotFound):
		return nil
	}
	x.log().WarnContext(ctx, "executor: could not record the pause of a stale paused run; a later pass does", slog.String("run_id", run.ID), keyhash.ErrAttr(err))
	return err
}

// resume executes a run the stale-run pass claimed: a pending one through
// the compare-and-set pending -> running, a running one from its nodes'
// start under the claim's epoch.
func (x *Executor) resume(ctx context.Context, claimed runs.Run) error {
	if claimed.Status == runs.StatusPending {
		return x.begin(ctx, claimed.ID)
	}
	return x.proceed(ctx, claimed)
}

// ResumeEvent is the input of the function's schedule (template.yaml
// ResumeDue: {"resumeDue": true}).
type ResumeEvent struct {
	ResumeDue bool `json:"resumeDue"`
}

// HandleInvoke is the Lambda handler of both triggers: the runs stream (a
// DynamoDB event, see HandleLambda) and the minute schedule (ResumeEvent:
// a ResumeDue pass, then a ResumeStale pass).
func (x *Executor) HandleInvoke(ctx context.Context, raw json.RawMessage) (any, error) {
	var probe struct {
		Records   json.RawMessage `json:"Records"`
		ResumeDue bool            `json:"resumeDue"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("executor: undecodable event: %w", err)
	}
	if probe.ResumeDue && len(probe.Records) == 0 {
		// A run that stays parked (or live) is retried at the next pass:
		// not a failure of the schedule's invocation. A query of the runs
		// table that fails is: nothing of the pass ran, and the failed
		// invocation is what the executor-errors alarm sees.
		if x.Metrics != nil {
			x.Metrics.Count(MetricResumePasses, 1, nil)
		}
		// The pass's calls end before the invocation's deadline
		// (storeCalls): one that never answers fails the pass, logged,
		// instead of timing the invocation out (RED_TEAM 452).
		pctx, cancel := storeCalls(ctx)
		defer cancel()
		var failed []error
		n, err := x.ResumeDue(pctx)
		if errors.Is(err, ErrRunsQuery) {
			failed = append(failed, err)
		}
		x.log().InfoContext(ctx, "executor: resumed due runs", slog.Int("runs", n))
		stale, err := x.ResumeStale(pctx)
		switch {
		case errors.Is(err, ErrRunsQuery):
			failed = append(failed, err)
		case err != nil:
			x.log().WarnContext(ctx, "executor: stale-run pass", keyhash.ErrAttr(err))
		}
		x.log().InfoContext(ctx, "executor: resumed stale runs", slog.Int("runs", stale))
		if err := errors.Join(failed...); err != nil {
			x.log().ErrorContext(ctx, "executor: the runs table could not be queried; the next pass retries", keyhash.ErrAttr(err))
			return nil, err
		}
		return map[string]int{"resumed": n, "stale": stale}, nil
	}
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		return nil, fmt.Errorf("executor: undecodable stream event: %w", err)
	}
	return x.HandleLambda(ctx, ev)
}

// finish ends the run this execution holds (run.Epoch) completed or
// failed, in one compare-and-set on its status and claim epoch
// (RunStore.Finish). A run that ended meanwhile (a cancel, a breach) or is
// gone is left as it is; so is a run another execution took over after
// this one's last node event (its claim lapsed, or a duplicate delivery
// adopted it): that execution holds it and ends it, so this one stops,
// logging at INFO, and its record is done (no retry, no failure counted).
func (x *Executor) finish(ctx context.Context, run runs.Run, to runs.Status, msg string) error {
	runID := run.ID
	msg = truncate(msg)
	r, err := x.Runs.Finish(ctx, runID, run.Epoch, to, msg, x.now())
	switch {
	case errors.Is(err, runs.ErrStatusConflict) && r.Status == runs.StatusRunning:
		x.logTaken(ctx, runID, "ended; this one stops", run.Epoch, r.Epoch)
		return nil
	case errors.Is(err, runs.ErrStatusConflict):
		x.log().InfoContext(ctx, "executor: run changed before it finished", slog.String("run_id", runID), slog.String("status", string(r.Status)))
		return nil
	case errors.Is(err, runs.ErrRunNotFound):
		// It ended meanwhile (a cancel) and its retention has passed since:
		// nothing is left to end, as for a run that ended.
		x.log().InfoContext(ctx, "executor: run gone before it finished", slog.String("run_id", runID))
		return nil
	}
	if err != nil {
		return &finishUnwritten{to: to, msg: msg, err: err}
	}
	x.log().InfoContext(ctx, "executor: run finished", slog.String("run_id", runID), slog.String("status", string(to)))
	return nil
}

// finishUnwritten is the error of an execution that ran its run to its end
// (completed, or failed on a node) and whose end (RunStore.Finish) the
// store refused transiently: the execution is retried, and the last try
// ends the run as the execution ended, by the same Finish tried again
// (giveUp), and fails it as given up only when refused once more. So a run
// whose effects were delivered is never ended "failed" for a refused write
// of its completion alone.
type finishUnwritten struct {
	to  runs.Status
	msg string
	err error
}

func (e *finishUnwritten) Error() string {
	return "executor: end the run " + string(e.to) + ": " + e.err.Error()
}

func (e *finishUnwritten) Unwrap() error { return e.err }

// runNodes executes the workflow's nodes in order, each from its start.
// A fork whose description could not be read executes nothing and ends
// failed (runs.ErrForkUnreadable).
func (x *Executor) runNodes(ctx context.Context, run runs.Run, rc runCaps) error {
	if run.Fork != nil && run.Fork.Unreadable {
		return runs.ErrForkUnreadable
	}
	if g, ok := webhook.GraphOf(run.WorkflowID); ok {
		return x.runGraph(ctx, run, rc, g)
	}
	if x.NoopEffect && run.WorkflowID == webhook.WorkflowNoop {
		return x.runGraph(ctx, run, rc, webhook.NoopEffectGraph)
	}
	switch run.WorkflowID {
	case webhook.WorkflowWebhook:
		if x.Webhook == nil {
			return errors.New("executor: no webhook deliverer configured")
		}
		if run.IsReplay() {
			return x.replayWebhook(ctx, run)
		}
		ectx, stop := effectContext(ctx)
		res, err := x.Webhook.Deliver(ectx, run)
		stop()
		if err == nil {
			x.log().InfoContext(ctx, "executor: webhook delivered", slog.String("run_id", run.ID),
				slog.Bool("replayed", res.Replayed), slog.Int("attempt", res.Attempt))
		}
		return err
	default:
		return nil // conformance-noop, conformance-delay: no nodes with effects
	}
}
