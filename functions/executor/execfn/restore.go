package execfn

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// EventWorkflowRestored is the run event recorded when a run whose
// execution was interrupted (its executor stopped without ending it) is
// resumed by another: by the stale-run pass, or by an executor that
// started after the run's last update (TestConfig.Booted). An interrupted
// run is never resumed before the event is recorded, so it is never
// completed without it.
const EventWorkflowRestored = "workflow.restored"

// restore records workflow.restored in a running run's log before it is
// resumed, and returns the run as stored afterwards. It fails with
// runs.ErrStatusConflict when the run ended or another execution took it
// since run was read.
func (x *Executor) restore(ctx context.Context, run runs.Run) (runs.Run, error) {
	logs, ok := x.Runs.(runs.LogStore)
	if !ok || run.Status != runs.StatusRunning {
		return run, nil
	}
	r, err := logs.AppendLog(ctx, run.ID, run.Fence(), []runs.LogEvent{{Type: EventWorkflowRestored, At: x.now().UTC(), Payload: json.RawMessage(`{}`)}}, x.now())
	if err != nil {
		return run, err
	}
	x.log().InfoContext(ctx, "executor: resuming an interrupted run", slog.String("run_id", run.ID))
	return r, nil
}

// restoreMarks is the set of runs an executor found interrupted whose
// workflow.restored it has not recorded yet. The zero value is empty and
// ready; it is process memory, as TestConfig.Booted is.
type restoreMarks struct {
	mu  sync.Mutex
	ids map[string]struct{}
}

func (m *restoreMarks) mark(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ids == nil {
		m.ids = map[string]struct{}{}
	}
	m.ids[id] = struct{}{}
}

func (m *restoreMarks) has(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.ids[id]
	return ok
}

func (m *restoreMarks) clear(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.ids, id)
}
