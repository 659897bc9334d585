package runs

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/idemkit/idemkit/idem/decided"
)

// The fields of a run its version log (Run.History) tracks: every store
// write that changes one of them is one new version of the run, logging
// the values it set. A run's other fields are either fixed at creation
// (workflowId, inputs, retryOf, the recipe stamps) or bookkeeping that
// moves with a tracked field (updatedAt; failures, counted with each
// lastError).
const (
	FieldStatus    = "status"
	fieldError     = "error"
	fieldLastError = "lastError"
	fieldWake      = "wake"
)

// version returns the log entry of one write: field, value pairs, each
// value JSON-encoded (a value that cannot be encoded logs as null).
func version(pairs ...any) map[string]json.RawMessage {
	m := make(map[string]json.RawMessage, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		b, err := json.Marshal(pairs[i+1])
		if err != nil {
			b = []byte("null")
		}
		m[pairs[i].(string)] = b
	}
	return m
}

// terminalVersion is the log entry of a Transition to `to` with errMsg:
// the status, the error when one is given, and the wake cleared when the
// run ends.
func terminalVersion(to Status, errMsg string) map[string]json.RawMessage {
	pairs := []any{FieldStatus, to}
	if errMsg != "" {
		pairs = append(pairs, fieldError, errMsg)
	}
	if to.Terminal() {
		pairs = append(pairs, fieldWake, nil)
	}
	return version(pairs...)
}

// appendVersion returns l with v appended, never sharing l's array (runs
// handed out by MemRuns keep the log they were read with).
func appendVersion(l decided.VersionLog, v map[string]json.RawMessage) decided.VersionLog {
	out := make(decided.VersionLog, len(l), len(l)+1)
	copy(out, l)
	return append(out, v)
}

// runHistory is the runs store's decided.History: a run's changes since a
// version, read from its version log with one Get. The scope is the
// caller's tenant; another tenant's run reads as decided.ErrRecordNotFound.
type runHistory struct {
	Runs RunStore
}

var _ decided.History = runHistory{}

// ChangesSince implements decided.History.
func (h runHistory) ChangesSince(ctx context.Context, tenant, runID string, v int64) ([]decided.FieldChange, int64, error) {
	r, err := h.Runs.Get(ctx, runID)
	if errors.Is(err, ErrRunNotFound) || (err == nil && r.Tenant != tenant) {
		return nil, 0, decided.ErrRecordNotFound
	}
	if err != nil {
		return nil, 0, err
	}
	changes, err := r.ChangesSince(v)
	return changes, r.Version, err
}

// ChangesSince returns the run's changes since version v (see
// decided.VersionLog.Since): decided.ErrVersionAhead for a version the run never
// had.
func (r Run) ChangesSince(v int64) ([]decided.FieldChange, error) {
	return r.History.Since(v)
}
