package runstest

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// env is one case's store and clock.
type env struct {
	st     Store
	ctx    context.Context
	now    time.Time
	racers int
	// loseNext is Harness.LoseNextAnswer.
	loseNext func(op string)
	// trips and resetTrips are Harness.RoundTrips and ResetRoundTrips.
	trips      func() int
	resetTrips func()
	// rawExpiry is Harness.StoredExpiry.
	rawExpiry func(t *testing.T, st Store, id string) (int64, bool)
	// clock is the retaining store's clock, and expire Harness.Expire
	// (retention cases only).
	clock  *suiteClock
	expire func(t *testing.T, st Store, id string)
}

// passExpiry moves the retaining store's clock to the ended run r's
// expiry and does to r what the store's retention then does
// (Harness.Expire).
func (e *env) passExpiry(t *testing.T, r runs.Run) {
	t.Helper()
	if r.ExpiresAt.IsZero() {
		t.Fatalf("run %s carries no expiry", r.ID)
	}
	e.clock.set(r.ExpiresAt)
	if e.expire != nil {
		e.expire(t, e.st, r.ID)
	}
}

// lose arms the loss of the next answer of op, when the harness can.
func (e *env) lose(op string) {
	if e.loseNext != nil {
		e.loseNext(op)
	}
}

// at returns the suite's time d after its origin.
func (e *env) at(d time.Duration) time.Time { return e.now.Add(d) }

// newRun creates a pending webhook run of tenant acme at d.
func (e *env) newRun(t *testing.T, d time.Duration) runs.Run {
	t.Helper()
	r := runs.NewRun("acme", "webhook", json.RawMessage(`{"url":"https://example.com/hook"}`), e.at(d))
	if err := e.st.Create(e.ctx, r); err != nil {
		t.Fatalf("create: %v", err)
	}
	return r
}

// running creates a run and moves it to running at d, returning the run as
// stored (epoch 1).
func (e *env) running(t *testing.T, d time.Duration) runs.Run {
	t.Helper()
	r := e.newRun(t, d)
	got, err := e.st.Transition(e.ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", e.at(d))
	if err != nil {
		t.Fatalf("pending -> running: %v", err)
	}
	return got
}

// get reads a run that must exist.
func (e *env) get(t *testing.T, id string) runs.Run {
	t.Helper()
	r, err := e.st.Get(e.ctx, id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return r
}

// race runs fn in e.racers goroutines released at once and returns their
// errors.
func (e *env) race(fn func(i int) error) []error {
	errs := make([]error, e.racers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = fn(i)
		}()
	}
	close(start)
	wg.Wait()
	return errs
}

// ev is a node event at d.
func (e *env) ev(typ, node string, d time.Duration) runs.LogEvent {
	return runs.LogEvent{Type: typ, NodeID: node, At: e.at(d), Payload: json.RawMessage(`{"nodeId":"` + node + `"}`)}
}

// stale reports whether Stale(before) lists id.
func (e *env) stale(t *testing.T, before time.Time, id string) bool {
	t.Helper()
	ids, err := e.st.Stale(e.ctx, before, 0)
	if err != nil {
		t.Fatalf("stale: %v", err)
	}
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// logTypes is a run's node log as type@node.
func logTypes(r runs.Run) []string {
	out := make([]string, 0, len(r.Log))
	for _, ev := range r.Log {
		out = append(out, ev.Type+"@"+ev.NodeID)
	}
	return out
}
