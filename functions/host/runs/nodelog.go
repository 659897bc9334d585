package runs

import (
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

// LogStore appends to a run's node log. MemRuns and DynamoRuns implement
// it; the executor needs it only for workflows with a node graph.
type LogStore interface {
	// AppendLog appends evs to the run's node log in one write, only while
	// the run is running, and returns the run as stored afterwards.
	// ErrStatusConflict (with the current run) when the run is not
	// running (cancelled meanwhile: the executor stops); ErrRunNotFound
	// when there is none.
	AppendLog(ctx context.Context, id string, evs []LogEvent, now time.Time) (Run, error)
}

var _ LogStore = (*MemRuns)(nil)

// AppendLog implements LogStore.
func (m *MemRuns) AppendLog(_ context.Context, id string, evs []LogEvent, now time.Time) (Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[id]
	if !ok {
		return Run{}, ErrRunNotFound
	}
	if r.Status != StatusRunning {
		return r, ErrStatusConflict
	}
	r.Log = append(slices.Clone(r.Log), evs...)
	r.UpdatedAt = now.UTC()
	m.runs[id] = r
	return r, nil
}
