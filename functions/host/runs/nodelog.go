package runs

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"time"
)

// Node event types the executor records in a run's node log.
const (
	EventNodeStarted   = "node.started"
	EventNodeCompleted = "node.completed"
	EventNodeFailed    = "node.failed"
)

// LogEvent is one event of a run's node log (Run.Log): its sequence is its
// place in the log, after the run's fixed history (see the events API).
type LogEvent struct {
	Type    string          `json:"type"`
	NodeID  string          `json:"nodeId"`
	At      time.Time       `json:"at"`
	Payload json.RawMessage `json:"payload"`
}

// LogBase is the sequence of the first event of r's own node log (Log[0]):
// after a fork's inherited prefix, else after run.started at 0. The events
// API numbers the log the same way.
func (r Run) LogBase() int64 {
	if r.Fork != nil && r.Fork.FromSeq > 0 && len(r.Fork.Inherited) > 0 {
		return r.Fork.Inherited[len(r.Fork.Inherited)-1].Sequence + 1
	}
	return 1
}

// Fence is what an append to a run's node log is conditional on: the
// claim epoch the appender holds (Run.Epoch) and the length of the log it
// extends.
type Fence struct {
	Epoch int64
	At    int
}

// Fence returns the fence of an append to r as the caller holds it: r's
// claim epoch and the end of its node log.
func (r Run) Fence() Fence { return Fence{Epoch: r.Epoch, At: len(r.Log)} }

// LogStore appends to a run's node log. MemRuns and DynamoRuns implement
// it; the executor needs it only for workflows with a node graph.
type LogStore interface {
	// AppendLog appends evs to the run's node log in one write, a
	// compare-and-set: only while the run is running, its claim epoch is
	// still f.Epoch (an execution taken over by another writes nothing)
	// and its log still ends at f.At (no event is appended twice). It
	// returns the run as stored afterwards. An append found already
	// applied (a retry after a lost answer: under the same epoch, which
	// only the appender writes, the log ends at f.At+len(evs) with evs)
	// returns the run and no error. ErrStatusConflict (with the current run) when the
	// run is not running (cancelled meanwhile) or was taken by another
	// execution: the executor stops; ErrRunNotFound when there is none.
	AppendLog(ctx context.Context, id string, f Fence, evs []LogEvent, now time.Time) (Run, error)
}

var _ LogStore = (*MemRuns)(nil)

// appendApplied reports whether cur, found by a refused append of evs
// under f, already holds that append: the same epoch, still running, and
// the log f.At+len(evs) long ending with evs; or paused, the append having
// drained the node a pause waited for (the log then ends with the pause's
// run.paused after evs).
func appendApplied(cur Run, f Fence, evs []LogEvent) bool {
	n := f.At + len(evs)
	switch {
	case cur.Epoch != f.Epoch:
		return false
	case cur.Status == StatusRunning && len(cur.Log) == n:
	case cur.Status == StatusPaused && len(cur.Log) == n+1 && cur.Log[n].Type == EventRunPaused:
		// A drained node's end, its run.paused after it.
	default:
		return false
	}
	for i, ev := range evs {
		if !sameEvent(cur.Log[f.At+i], ev) {
			return false
		}
	}
	return true
}

// sameEvent compares two node events as stored (payloads compacted).
func sameEvent(a, b LogEvent) bool {
	if a.Type != b.Type || a.NodeID != b.NodeID || !a.At.Equal(b.At) {
		return false
	}
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a.Payload) != nil || json.Compact(&cb, b.Payload) != nil {
		return bytes.Equal(a.Payload, b.Payload)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// AppendLog implements LogStore.
func (m *MemRuns) AppendLog(_ context.Context, id string, f Fence, evs []LogEvent, now time.Time) (Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	evs = tableTimes(evs) // as stored, so an append already applied compares equal
	r, ok := m.lookupLocked(id)
	if !ok {
		return Run{}, ErrRunNotFound
	}
	if r.Status == StatusPaused && r.PausePending != nil && r.Epoch == f.Epoch && len(r.Log) == f.At && drains(r.Log, evs) {
		// The node a pause lets drain ends: its events and the pause's
		// run.paused, in one write.
		r.Log = append(slices.Clone(r.Log), append(slices.Clone(evs), drained(*r.PausePending, evs, now))...)
		r.PausePending, r.UpdatedAt = nil, tableTime(now)
		m.runs[id] = r
		return r, nil
	}
	if r.Status != StatusRunning || r.Epoch != f.Epoch || len(r.Log) != f.At {
		if appendApplied(r, f, evs) {
			return r, nil
		}
		return r, ErrStatusConflict
	}
	r.Log = append(slices.Clone(r.Log), evs...)
	r.UpdatedAt = tableTime(now)
	m.runs[id] = r
	return r, nil
}
