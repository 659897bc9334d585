// Package sweepfn is the sweeper function's handler: on a schedule it
// enforces retention on the tables that have no TTL. An MRSC global table
// (the effects table under the template's EffectsConsistency=STRONG)
// supports neither TTL nor transactions; the kit uses no transaction on the
// hot path. The idempotency table of a fenced-effects deployment has no TTL
// either: TTL would delete in every replica, and a replica's delete
// replicates onto the home region's record of a reused key, so only the
// home stack's sweeper deletes there. This handler deletes the expired
// items TTL would have deleted (internal/sweeper: one conditional
// DeleteItem per item whose expiresAt is at or before the run's start, so a
// renewed or re-claimed item survives).
//
// Each run sweeps its tables concurrently, each in Segments parallel-scan
// segments one after another, starting at the segment its hour selects,
// and stops before the Lambda deadline (the context's deadline minus
// Margin): no call is issued after that point, the deletes in flight
// finish, and the run returns normally. A call still unanswered at the
// deadline less half the margin is cut there, and the run fails after
// reporting. Nothing is carried to the next run: the next one starts a
// segment further on, and since the deleted items are gone it meets only
// live items and whatever expired since, so repeated runs converge, a
// table larger than one run included, as long as each run finishes the
// segment it starts with. The limit of that statelessness: a segment
// holding more than one run can scan and delete in its time budget never
// gets its tail swept (every run reaches it from its start), which
// idemkit.sweeper.incomplete_total reports.
//
// Reported per table and run, with the bounded dimension "table" (effects |
// fence | idempotency), as CloudWatch EMF:
//
//   - idemkit.sweeper.deleted_total: items deleted (emitted on every run,
//     0 included, so a missing datapoint means the sweeper did not run);
//   - idemkit.sweeper.incomplete_total: 1 when the run's time ran out
//     before the end of the segment it started with (that segment's tail
//     is swept by no run while this holds), else 0: a run that finished
//     its first segment and stopped in a later one (the next runs start
//     there) and a failed run (the invocation's error) report 0.
//
// Logs carry counts and table labels only, never keys.
package sweepfn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/internal/configerr"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/sweeper"
)

// Segments is how many parallel-scan segments each table is swept in
// (sweeper.Sweeper.Segments): a run that reaches its deadline before the
// end of a table is followed, an hour later, by one that starts a segment
// further on, so every table is swept to its end within 16 hourly runs
// whatever its size, and a small table every hour.
const Segments = 16

// Metric names (EMF, dimension "table").
const (
	MetricDeleted    = "idemkit.sweeper.deleted_total"
	MetricIncomplete = "idemkit.sweeper.incomplete_total"
)

// Table labels: the "table" dimension and log attribute.
const (
	TableEffects     = "effects"
	TableFence       = "fence"
	TableIdempotency = "idempotency"
)

// DefaultMargin is the time a run leaves before the Lambda deadline: it
// covers the deletes in flight when it stops (each cut, if still
// unanswered, at the deadline less half the margin), the metrics and the
// logs.
const DefaultMargin = 10 * time.Second

// Target is one table to sweep.
type Target struct {
	// Label is the table's bounded label (TableEffects, TableFence,
	// TableIdempotency). Required.
	Label string
	// Sweeper sweeps it. Required.
	Sweeper *sweeper.Sweeper
}

// Handler runs the sweeps. Configure it, then call Handle (the Lambda
// entry point) or Sweep; it is safe for concurrent use, and runs that
// overlap (in this or another region of an MRSC table) delete each item
// once.
type Handler struct {
	// Targets are the tables to sweep. At least one is required.
	Targets []Target
	// Margin is the time each run leaves before the context's deadline.
	// Default DefaultMargin (10 s). Without a deadline a run sweeps every
	// table to the end.
	Margin time.Duration
	// Now is the clock: the expiry cutoff (read once at the start of a run)
	// and the deadline check; called from one goroutine per table, so it
	// must be safe for concurrent use. Default time.Now.
	Now func() time.Time
	// Metrics receives the EMF counters. Nil: none.
	Metrics *emf.Recorder
	// Logger receives one line per table and run. Default slog.Default().
	Logger *slog.Logger
}

// TableReport is what one run did to one table (counts only).
type TableReport struct {
	Table    string `json:"table"`
	Scanned  int    `json:"scanned"`
	Expired  int    `json:"expired"`
	Deleted  int    `json:"deleted"`
	Complete bool   `json:"complete"`
	// SegmentsSwept counts the segments swept to their end, the one the
	// run started with first.
	SegmentsSwept int    `json:"segmentsSwept"`
	Error         string `json:"error,omitempty"`
}

// Report is what one run did, in Targets order. It is the Lambda result.
type Report struct {
	Tables []TableReport `json:"tables"`
}

// ErrConfig is matched (errors.Is) by every error NewFromEnv and Validate
// return: one error listing every problem.
var ErrConfig = errors.New("sweepfn: invalid config")

// Validate reports a configuration the handler cannot run: one error
// listing every problem (matching ErrConfig).
func (h *Handler) Validate() error {
	var p configerr.List
	if len(h.Targets) == 0 {
		p.Addf("no table to sweep")
	}
	seen := map[string]bool{}
	for _, t := range h.Targets {
		switch {
		case t.Label == "" || t.Sweeper == nil || t.Sweeper.API == nil || t.Sweeper.Table == "":
			p.Addf("target %q needs a label and a Sweeper with API and Table", t.Label)
		case seen[t.Label]:
			p.Addf("table %q listed twice", t.Label)
		}
		seen[t.Label] = true
	}
	if h.Margin < 0 {
		p.Addf("negative Margin %v", h.Margin)
	}
	return p.Err("sweepfn", ErrConfig)
}

// Handle is the Lambda entry point for the scheduled (EventBridge) event;
// the event itself carries nothing the sweep needs.
func (h *Handler) Handle(ctx context.Context, _ events.CloudWatchEvent) (Report, error) {
	return h.Sweep(ctx)
}

// Sweep sweeps every target concurrently, each until its end, an error, or
// the stop point (ctx's deadline minus Margin). Stopping at the deadline is
// not an error; a call still in flight at the deadline less half the
// Margin is cut there (an error), so that the run reports before the
// deadline. The returned error joins the tables' errors (so the
// invocation counts as failed); the Report is complete either way.
func (h *Handler) Sweep(ctx context.Context) (Report, error) {
	if err := h.Validate(); err != nil {
		return Report{}, err
	}
	clock := h.Now
	if clock == nil {
		clock = time.Now
	}
	margin := h.Margin
	if margin == 0 {
		margin = DefaultMargin
	}
	stop := func() bool { return false }
	if dl, ok := ctx.Deadline(); ok {
		stopAt := dl.Add(-margin)
		stop = func() bool { return !clock().Before(stopAt) }
		// A call in flight keeps running after the stop point, but not
		// to the deadline: one that never answers (a hung connection;
		// the SDK bounds no call by a time of its own) ran until Lambda
		// ended the invocation there, before its report, so that run
		// emitted no metric and logged nothing (RED_TEAM 437). Half the
		// margin is left for the report. (A run that starts past its
		// stop point issues no call and needs no bound.)
		if !stop() {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, dl.Add(-margin/2))
			defer cancel()
		}
	}
	cutoff := clock()

	rep := Report{Tables: make([]TableReport, len(h.Targets))}
	errs := make([]error, len(h.Targets))
	var wg sync.WaitGroup
	for i, t := range h.Targets {
		wg.Go(func() {
			r, err := t.Sweeper.SweepUntil(ctx, cutoff, stop)
			tr := TableReport{Table: t.Label, Scanned: r.Scanned, Expired: r.Expired, Deleted: r.Deleted, Complete: r.Complete, SegmentsSwept: r.SegmentsSwept}
			if err != nil {
				tr.Error = err.Error()
				errs[i] = fmt.Errorf("sweepfn: %s table: %w", t.Label, err)
			}
			rep.Tables[i] = tr
			h.report(ctx, tr)
		})
	}
	wg.Wait()
	return rep, errors.Join(errs...)
}

func (h *Handler) report(ctx context.Context, tr TableReport) {
	dims := map[string]string{"table": tr.Table}
	h.Metrics.Count(MetricDeleted, float64(tr.Deleted), dims)
	// 1 only when the segment the run started with outlasted it: a run
	// that stopped in a later segment is followed by one starting there,
	// and a failed run is the invocation's error (RED_TEAM 545).
	incomplete := 0.0
	if tr.unswept() {
		incomplete = 1
	}
	h.Metrics.Count(MetricIncomplete, incomplete, dims)

	log := h.Logger
	if log == nil {
		log = slog.Default()
	}
	attrs := []slog.Attr{slog.String("table", tr.Table), slog.Int("deleted", tr.Deleted),
		slog.Int("expired", tr.Expired), slog.Int("scanned", tr.Scanned), slog.Bool("complete", tr.Complete),
		slog.Int("segments_swept", tr.SegmentsSwept)}
	switch {
	case tr.Error != "":
		log.LogAttrs(ctx, slog.LevelError, "sweeper: sweep failed; the next run resumes", append(attrs, slog.String("error", tr.Error))...)
	case tr.unswept():
		log.LogAttrs(ctx, slog.LevelWarn, "sweeper: stopped before the deadline inside the segment it started with; that segment's tail is swept by no run while this holds", attrs...)
	case !tr.Complete:
		log.LogAttrs(ctx, slog.LevelWarn, "sweeper: stopped before the deadline; the next run resumes", attrs...)
	default:
		log.LogAttrs(ctx, slog.LevelInfo, "sweeper: swept", attrs...)
	}
}

// unswept reports a run whose time ran out before the end of the segment it
// started with (not a failed run).
func (tr TableReport) unswept() bool {
	return !tr.Complete && tr.Error == "" && tr.SegmentsSwept == 0
}
