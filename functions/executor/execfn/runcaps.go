package execfn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// The registry error codes a run ends failed with when it breaches a cap
// of its configurable.run section, and the kinds of the cap.breached
// event recorded first.
const (
	// CodeRunTimeout: the run did not end within its runTimeoutMs.
	CodeRunTimeout = "run_timeout"
	// CodeLoopLimitExceeded: the run would enter its workflow's loop more
	// than maxLoopIterations times.
	CodeLoopLimitExceeded = "loop_limit_exceeded"

	// KindRunDuration is cap.breached's kind for runTimeoutMs (limit the
	// resolved timeout, observed the run's age, both in milliseconds).
	KindRunDuration = "run-duration"
	// KindLoopIterations is cap.breached's kind for maxLoopIterations
	// (limit the resolved maximum, observed the iteration that would
	// have started).
	KindLoopIterations = "loop-iterations"
)

// capBreach stops an execution whose run breached a cap; proceed ends the
// run with it (Executor.breach).
type capBreach struct {
	kind, code, msg string
	limit, observed int64
	// nodeID is the node executing when the cap was breached ("" between
	// nodes).
	nodeID string
}

func (b *capBreach) Error() string { return b.code + ": " + b.msg }

// breachUnwritten is the error of an execution whose run breached a cap
// and whose end on it (RunStore.Breach) the store refused transiently:
// the execution is retried, and the last try ends the run on the breach
// again (giveUp), under the host's own failure code only when refused
// once more.
type breachUnwritten struct {
	b   *capBreach
	err error
}

func (e *breachUnwritten) Error() string {
	return "executor: end the run on its breached cap (" + e.b.code + "): " + e.err.Error()
}

func (e *breachUnwritten) Unwrap() error { return e.err }

// runCaps are a run's caps as one execution of it enforces them, read
// once from its configurable (runs.Options.Caps) when the execution
// starts (proceed): the configurable never changes after creation, and
// reading it at each check would parse it again (up to the largest body
// a create admits) before every node.
type runCaps struct {
	// timeout is runTimeoutMs (0: none); deadline is runs.Run.Deadline.
	timeout  time.Duration
	deadline time.Time
	// maxLoop is maxLoopIterations (0: none).
	maxLoop int64
}

// capsOf reads run's caps.
func capsOf(run runs.Run) runCaps {
	c := run.Options.Caps()
	return runCaps{timeout: c.RunTimeout, deadline: c.Deadline(run.CreatedAt), maxLoop: c.MaxLoopIterations}
}

// overdue returns the run-duration breach at the executor's now, nodeID
// the node executing; nil when the run has no runTimeoutMs or its
// deadline (runs.Run.Deadline) has not come. The host advertises no
// limits.maxRunDurationMs, so the timeout is runTimeoutMs as given.
func (x *Executor) overdue(rc runCaps, nodeID string) *capBreach {
	if rc.deadline.IsZero() || x.now().Before(rc.deadline) {
		return nil
	}
	return x.timedOut(rc, nodeID)
}

// timedOut is the run-duration breach: limit the run's timeout, observed
// its age now (at least the limit).
func (x *Executor) timedOut(rc runCaps, nodeID string) *capBreach {
	limit := rc.timeout
	age := x.now().Sub(rc.deadline.Add(-limit))
	return &capBreach{kind: KindRunDuration, code: CodeRunTimeout, limit: limit.Milliseconds(), nodeID: nodeID,
		observed: max(age, limit).Milliseconds(),
		msg:      fmt.Sprintf("the run did not end within its runTimeoutMs (%d ms)", limit.Milliseconds())}
}

// loopBreach returns the loop-iterations breach of starting iteration
// `iteration` of node head, the head of the workflow's loop, or nil when
// it is within the run's maxLoopIterations (or the run set none).
func loopBreach(rc runCaps, head string, iteration int) *capBreach {
	limit := rc.maxLoop
	if limit <= 0 || int64(iteration) <= limit {
		return nil
	}
	return &capBreach{kind: KindLoopIterations, code: CodeLoopLimitExceeded, limit: limit, observed: int64(iteration), nodeID: head,
		msg: fmt.Sprintf("the run would start iteration %d of its loop (node %s); its maxLoopIterations is %d", iteration, head, limit)}
}

// breach ends the run failed with b: its cap.breached event and the
// terminal transition in one compare-and-set (runs.RunStore.Breach), so of
// executions racing past the same cap exactly one records it, and a run
// that ended first is left as it is. A write the store refused is a
// *breachUnwritten.
func (x *Executor) breach(ctx context.Context, runID string, b *capBreach) error {
	payload := map[string]any{"kind": b.kind, "limit": b.limit, "observed": b.observed}
	if b.nodeID != "" {
		payload["nodeId"] = b.nodeID
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	now := x.now()
	r, err := x.Runs.Breach(ctx, runID, runs.LogEvent{Type: runs.EventCapBreached, At: now.UTC(), Payload: raw}, b.code, b.msg, now)
	switch {
	case errors.Is(err, runs.ErrStatusConflict):
		x.log().InfoContext(ctx, "executor: run ended before its breached cap was recorded", slog.String("run_id", runID),
			slog.String("status", string(r.Status)), slog.String("cap", b.kind))
		return nil
	case errors.Is(err, runs.ErrRunNotFound):
		return nil
	case err != nil:
		return &breachUnwritten{b: b, err: err}
	}
	if x.Metrics != nil {
		x.Metrics.Count(MetricCapsBreached, 1, map[string]string{DimKind: b.kind})
	}
	x.log().InfoContext(ctx, "executor: run failed on a breached cap", slog.String("run_id", runID),
		slog.String("cap", b.kind), slog.String("code", b.code), slog.Int64("limit", b.limit), slog.Int64("observed", b.observed))
	return nil
}

// wakeBy returns when a run parked until at must be woken: at, or the
// run's deadline when that comes first, so a parked run is timed out by
// the pass that resumes due runs.
func wakeBy(rc runCaps, at time.Time) time.Time {
	if dl := rc.deadline; !dl.IsZero() && dl.Before(at) {
		return dl
	}
	return at
}

// hold waits d for a wait node (nodeID), or, when the run's deadline
// comes first, until then: it then returns the run-duration breach.
func (x *Executor) hold(ctx context.Context, rc runCaps, nodeID string, d time.Duration) error {
	dl := rc.deadline
	if dl.IsZero() || !dl.Before(x.now().Add(d)) {
		return x.sleep(ctx, d)
	}
	if err := x.sleep(ctx, max(dl.Sub(x.now()), 0)); err != nil {
		return err
	}
	return x.timedOut(rc, nodeID)
}
