package host

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"
)

// Status is a run's lifecycle status.
type Status string

// Run statuses. pending -> running -> succeeded | failed; cancelled from
// pending or running.
const (
	StatusPending   Status = "pending"
	StatusRunning   Status = "running"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
)

// Terminal reports whether s is final.
func (s Status) Terminal() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusCancelled
}

// Run is one workflow run (an item of RunsTable, partition key pk = runId).
type Run struct {
	ID         string          `json:"runId"`
	Tenant     string          `json:"tenant"`
	WorkflowID string          `json:"workflowId"`
	Inputs     json.RawMessage `json:"inputs,omitempty"`
	Status     Status          `json:"status"`
	Error      string          `json:"error,omitempty"`
	CreatedAt  time.Time       `json:"createdAt"`
	UpdatedAt  time.Time       `json:"updatedAt"`
}

// ErrRunNotFound is returned when no run has the id.
var ErrRunNotFound = errors.New("host: run not found")

// ErrRunExists is returned by Create when the id is taken.
var ErrRunExists = errors.New("host: run already exists")

// ErrStatusConflict is returned by Transition when the run is not in one of
// the expected statuses; the current run is returned alongside.
var ErrStatusConflict = errors.New("host: run status changed")

// RunStore persists runs. Implementations: MemRuns (tests, embedding) and
// DynamoRuns (RunsTable).
type RunStore interface {
	// Create inserts r if no run has its id (ErrRunExists otherwise).
	Create(ctx context.Context, r Run) error
	// Get returns the run, or ErrRunNotFound.
	Get(ctx context.Context, id string) (Run, error)
	// Transition moves the run to status `to` (with errMsg) only if its
	// current status is one of from: a compare-and-set, so two executors or
	// a cancel racing an executor never both win. It returns the run as
	// stored afterwards; ErrStatusConflict (with the current run) when the
	// status was not in from; ErrRunNotFound when there is no run.
	Transition(ctx context.Context, id string, from []Status, to Status, errMsg string, now time.Time) (Run, error)
}

// MemRuns is an in-memory RunStore (tests, examples, embedding), safe for
// concurrent use. OnInsert stands in for the runs table's stream.
type MemRuns struct {
	mu   sync.Mutex
	runs map[string]Run
	// OnInsert, if set, is called (outside the lock) after each Create.
	OnInsert func(Run)
}

// NewMemRuns returns an empty MemRuns.
func NewMemRuns() *MemRuns { return &MemRuns{runs: map[string]Run{}} }

// Create implements RunStore.
func (m *MemRuns) Create(_ context.Context, r Run) error {
	m.mu.Lock()
	if _, ok := m.runs[r.ID]; ok {
		m.mu.Unlock()
		return ErrRunExists
	}
	m.runs[r.ID] = r
	cb := m.OnInsert
	m.mu.Unlock()
	if cb != nil {
		cb(r)
	}
	return nil
}

// Get implements RunStore.
func (m *MemRuns) Get(_ context.Context, id string) (Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[id]
	if !ok {
		return Run{}, ErrRunNotFound
	}
	return r, nil
}

// Transition implements RunStore.
func (m *MemRuns) Transition(_ context.Context, id string, from []Status, to Status, errMsg string, now time.Time) (Run, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.runs[id]
	if !ok {
		return Run{}, ErrRunNotFound
	}
	if !statusIn(r.Status, from) {
		return r, ErrStatusConflict
	}
	r.Status, r.Error, r.UpdatedAt = to, errMsg, now.UTC()
	m.runs[id] = r
	return r, nil
}

// Len returns the number of runs.
func (m *MemRuns) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.runs)
}

func statusIn(s Status, set []Status) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}
