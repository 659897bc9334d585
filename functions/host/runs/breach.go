package runs

import (
	"context"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
)

// EventCapBreached is the run event recorded in a run's node log when one
// of the run's caps (its runTimeoutMs, its maxLoopIterations) is breached;
// the run then ends failed (RunStore.Breach). Its payload is the closed
// capBreached payload: {kind, limit, observed, nodeId?}.
const EventCapBreached = "cap.breached"

// Breach ends a live run failed because one of its caps was breached: ev
// (a cap.breached event) appended to its node log, the status failed, the
// error code (Run.ErrorCode) and message set, the wake cleared, in one
// write. See RunStore.Breach.
func (m *MemRuns) Breach(_ context.Context, id string, ev LogEvent, code, msg string, now time.Time) (Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.lookupLocked(id)
	if !ok {
		return Run{}, ErrRunNotFound
	}
	if r.Status != StatusPending && r.Status != StatusRunning {
		return r, ErrStatusConflict
	}
	r.Log = append(slices.Clone(r.Log), tableTimes([]LogEvent{ev})...)
	r.Status, r.Error, r.ErrorCode, r.UpdatedAt, r.Wake = StatusFailed, msg, code, tableTime(now), Wake{}
	r.ExpiresAt = expiry(m.Retention, now)
	r.History = appendVersion(r.History, terminalVersion(StatusFailed, msg))
	r.Version = r.History.Current()
	m.runs[id] = r
	return r, nil
}

// Breach implements RunStore: one UpdateItem (list_append ev to log; SET
// status failed, error, errorCode, updatedAt; REMOVE the live and wake
// attributes; the version; SET expiresAt under a Retention) conditional
// on the run existing and being pending or running, whoever holds its
// claim: a cap ends the run as a cancel does, and an execution still
// under way is refused its next node-log append (the run is no longer
// running). The run after the write comes back (ALL_NEW); the run as it is
// with ErrStatusConflict when it had ended.
func (d *DynamoRuns) Breach(ctx context.Context, id string, ev LogEvent, code, msg string, now time.Time) (Run, error) {
	empty := logAV(nil)
	upd := expression.Set(expression.Name(runAttrLog), expression.ListAppend(
		expression.IfNotExists(expression.Name(runAttrLog), expression.Value(empty)), expression.Value(logAV([]LogEvent{ev})))).
		Set(expression.Name(runAttrStatus), expression.Value(string(StatusFailed))).
		Set(expression.Name(runAttrError), expression.Value(msg)).
		Set(expression.Name(runAttrErrCode), expression.Value(code)).
		Set(expression.Name(runAttrUpdated), expression.Value(now.UnixMilli())).
		Remove(expression.Name(runAttrLive)).Remove(expression.Name(runAttrWake)).Remove(expression.Name(runAttrWakeAt)).
		Remove(expression.Name(runAttrWakeN)).Remove(expression.Name(runAttrWakeMax)).Remove(expression.Name(runAttrWakeDL))
	upd = setExpiry(newVersion(upd, terminalVersion(StatusFailed, msg)), d.Retention, now)
	live := expression.Name(runAttrStatus).In(expression.Value(string(StatusPending)), expression.Value(string(StatusRunning)))
	cond := expression.AttributeExists(expression.Name(runAttrPK)).And(live)
	return d.updateRun(ctx, id, cond, upd, "end run on a breached cap")
}
