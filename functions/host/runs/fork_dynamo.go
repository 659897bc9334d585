package runs

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The RunsTable attributes of a fork and of a node log: fork is the JSON
// text of Run.Fork (written once by Create); log is a list of the JSON
// texts of Run.Log's events (appended by AppendLog).
const (
	runAttrFork = "fork"
	runAttrLog  = "log"
)

// forkItem adds r's fork and node log to its item.
func forkItem(m map[string]types.AttributeValue, r Run) {
	if r.Fork != nil {
		if b, err := json.Marshal(r.Fork); err == nil {
			m[runAttrFork] = sAV(string(b))
		}
	}
	if len(r.Log) > 0 {
		m[runAttrLog] = logAV(r.Log)
	}
}

// logAV is the table's list of node events evs, each at the table's
// millisecond precision (tableTimes).
func logAV(evs []LogEvent) types.AttributeValue {
	l := make([]types.AttributeValue, 0, len(evs))
	for _, e := range tableTimes(evs) {
		b, err := json.Marshal(e)
		if err != nil {
			continue
		}
		l = append(l, sAV(string(b)))
	}
	return &types.AttributeValueMemberL{Value: l}
}

// forkFromItem reads the fork and node log of an item into r. A fork
// attribute that is not a fork description this version reads (not a
// string, not JSON, a member of another type) makes r a fork marked
// Unreadable, never a run that is no fork: a replay fork read as one
// would perform the effects its replay suppresses (RED_TEAM 472).
func forkFromItem(m map[string]types.AttributeValue, r *Run) {
	if av, ok := m[runAttrFork]; ok {
		var f Fork
		v, ok := av.(*types.AttributeValueMemberS)
		if !ok || json.Unmarshal([]byte(v.Value), &f) != nil {
			f = Fork{Mode: ForkReplay, Unreadable: true}
		}
		r.Fork = &f
	}
	if l, ok := m[runAttrLog].(*types.AttributeValueMemberL); ok {
		for _, x := range l.Value {
			if sv, ok := x.(*types.AttributeValueMemberS); ok {
				var e LogEvent
				if json.Unmarshal([]byte(sv.Value), &e) == nil {
					r.Log = append(r.Log, e)
				}
			}
		}
	}
}

var _ LogStore = (*DynamoRuns)(nil)

// tableTimes returns evs (a copy) with each event's time truncated to the
// millisecond, the precision at which the table keeps a run's createdAt
// and updatedAt: run.started and the terminal event take those times, so
// a node event kept finer could read a fraction of a millisecond after
// the terminal event that follows it (a run that ends within the
// millisecond of its last node event, a breach whose cap.breached and end
// are one write). At one precision the log's times never go back as its
// sequence goes on.
func tableTimes(evs []LogEvent) []LogEvent {
	out := slices.Clone(evs)
	for i := range out {
		out[i].At = out[i].At.Truncate(time.Millisecond)
	}
	return out
}

// AppendLog implements LogStore: one UpdateItem (list_append to log, SET
// updatedAt) conditional on status = running, claimEpoch = f.Epoch and the
// log's size = f.At, returning the run (ALL_NEW; the old item with the
// conflict, from which an append already applied is recognised). Each
// event's time is kept to the millisecond (tableTimes).
func (d *DynamoRuns) AppendLog(ctx context.Context, id string, f Fence, evs []LogEvent, now time.Time) (Run, error) {
	evs = tableTimes(evs) // as stored, so an append already applied compares equal
	empty := &types.AttributeValueMemberL{Value: []types.AttributeValue{}}
	upd := expression.Set(expression.Name(runAttrLog), expression.ListAppend(
		expression.IfNotExists(expression.Name(runAttrLog), expression.Value(empty)), expression.Value(logAV(evs)))).
		Set(expression.Name(runAttrUpdated), expression.Value(now.UnixMilli()))
	at := expression.Name(runAttrLog).Size().Equal(expression.Value(f.At))
	if f.At == 0 {
		at = expression.AttributeNotExists(expression.Name(runAttrLog)).Or(at)
	}
	cond := expression.AttributeExists(expression.Name(runAttrPK)).
		And(expression.Name(runAttrStatus).Equal(expression.Value(string(StatusRunning)))).
		And(epochIs(f.Epoch)).And(at)
	r, err := d.updateRun(ctx, id, cond, upd, "append run log")
	if errors.Is(err, ErrStatusConflict) && r.Status == StatusPaused && r.PausePending != nil &&
		r.Epoch == f.Epoch && len(r.Log) == f.At && drains(r.Log, evs) {
		// The node a pause lets drain ends (one more round trip, on this
		// path only).
		r, err = d.appendDrained(ctx, id, r, f, evs, now)
	}
	if errors.Is(err, ErrStatusConflict) && appendApplied(r, f, evs) {
		return r, nil
	}
	return r, err
}
