package execfn

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
)

// cancelAfterTake is a run store on which a cancel lands right after the
// execution's take of the run (its Transition to running), before the
// webhook's send: the window no conditional write of the executor closes.
type cancelAfterTake struct{ *hostruns.MemRuns }

func (s cancelAfterTake) Transition(ctx context.Context, id string, from []hostruns.Status, to hostruns.Status, msg string, now time.Time) (hostruns.Run, error) {
	r, err := s.MemRuns.Transition(ctx, id, from, to, msg, now)
	if err == nil && to == hostruns.StatusRunning {
		if _, err := s.MemRuns.Cancel(ctx, id, []hostruns.Status{hostruns.StatusRunning}, "once:test", "", now); err != nil {
			panic(err)
		}
	}
	return r, err
}

// TestCancelAfterTheTakeLetsOnlyTheClaimedSendThrough pins what a cancel
// answered `cancelled` promises of a run whose execution is under way: a
// cancel landing after the execution's last conditional write ahead of
// the send (for the webhook workflow its take of the run; for a graph
// node its node.started append) does not stop that one send, which the
// ledger records, but the run stays cancelled (its end is refused: its
// log closes with run.cancelled) and nothing more is sent for it, by
// that execution or any later delivery of its record. A cancel landing
// before the take stops everything (TestCancelledRunIsSkipped).
func TestCancelAfterTheTakeLetsOnlyTheClaimedSendThrough(t *testing.T) {
	f := newFixture(t)
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { n.Add(1) }))
	defer srv.Close()
	f.x.Runs, f.x.MaxAttempts = cancelAfterTake{f.runs}, 3
	run := f.webhookRun(t, srv.URL)
	ctx := context.Background()
	if retry := f.x.HandleRecords(ctx, []stream.StreamRecord{insert("e1", run)}); retry != nil {
		t.Fatalf("retry %v: a run cancelled under its execution is done", retry)
	}
	if got := n.Load(); got != 1 {
		t.Fatalf("%d sends, want exactly the one claimed before the cancel landed", got)
	}
	if r, _ := f.runs.Get(ctx, run.ID); r.Status != hostruns.StatusCancelled || r.Failures != 0 {
		t.Fatalf("run %s (failures %d), want cancelled, no failure counted", r.Status, r.Failures)
	}
	for i := range 2 { // a duplicate delivery, a retried batch
		if retry := f.x.HandleRecords(ctx, []stream.StreamRecord{insert("e1", run)}); retry != nil {
			t.Fatalf("delivery %d: retry %v", i+2, retry)
		}
	}
	if got := n.Load(); got != 1 {
		t.Fatalf("%d sends after the record was delivered again, want still 1", got)
	}
}
