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
	sysclock "github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/ledger"
)

// cancelOnSecrets is a tenant's signing-secret read (made by the delivery
// after its run was taken, before the effect is claimed and sent) during
// which the run is cancelled and the execution's claim heartbeat finds it
// so: it returns once the heartbeat has stopped, the claim known lost.
type cancelOnSecrets struct {
	runs    *hostruns.MemRuns
	runID   *string
	tick    chan time.Time
	stopped chan struct{}
}

func (s cancelOnSecrets) WebhookSecrets(ctx context.Context, _ string) ([][]byte, error) {
	if _, err := s.runs.Cancel(ctx, *s.runID, []hostruns.Status{hostruns.StatusRunning}, "once:test", "", time.Now()); err != nil {
		return nil, err
	}
	s.tick <- time.Now() // the heartbeat renews, is refused, and stops
	<-s.stopped
	return nil, nil
}

// cancelledUnderItsExecution executes a webhook run that is cancelled
// while its delivery reads the signing secret, the execution's claim
// heartbeat finding it so (cancelOnSecrets), and returns the fixture, the
// run and the count of requests the receiver was sent.
func cancelledUnderItsExecution(t *testing.T) (*fixture, hostruns.Run, *atomic.Int32) {
	t.Helper()
	f := newFixture(t)
	n := new(atomic.Int32)
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { n.Add(1) }))
	t.Cleanup(srv.Close)
	tick, stopped := make(chan time.Time), make(chan struct{})
	f.x.Test.Clock = sysclock.Funcs{NewTickerFunc: func(time.Duration) (<-chan time.Time, func()) {
		return tick, func() { close(stopped) }
	}}
	var runID string
	f.x.Webhook.Secrets = cancelOnSecrets{runs: f.runs, runID: &runID, tick: tick, stopped: stopped}
	f.x.MaxAttempts = 3
	run := f.webhookRun(t, srv.URL)
	runID = run.ID
	if retry := f.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}); retry != nil {
		t.Fatalf("retry %v: a run cancelled under its execution is done", retry)
	}
	return f, run, n
}

// TestNoSendAfterTheExecutionKnowsItsClaimLost (RED_TEAM 550): an
// execution whose claim heartbeat has found the run cancelled (or taken by
// another execution) sends nothing it has not sent yet. Before, the
// delivery's context ignored the claim's loss from the moment it was made,
// so a cancel the executor had already seen, landed during the tenant's
// signing-secret read or the effect's claim, was followed by the send.
func TestNoSendAfterTheExecutionKnowsItsClaimLost(t *testing.T) {
	f, run, n := cancelledUnderItsExecution(t)
	ctx := context.Background()
	if got := n.Load(); got != 0 {
		t.Fatalf("%d sends after the execution found its run cancelled, want none", got)
	}
	if r, _ := f.runs.Get(ctx, run.ID); r.Status != hostruns.StatusCancelled || r.Failures != 0 {
		t.Fatalf("run %s (failures %d), want cancelled, no failure counted", r.Status, r.Failures)
	}
}

// An execution that knows its claim lost spends one attempt of the
// delivery's effect at most (its try refused by the seam, released as not
// sent), even when the webhook may wait inline for a retry
// (Webhook.WaitInline, as an embedding sets it): the effect is left for
// the execution that holds the run, or for none once the run is
// cancelled. Before (RED_TEAM 562), the delivery's inline retries went on
// after the seam's refusal, each an attempt refused again, until the
// attempt cap: every one of the 5 spent and the delivery's effect
// exhausted, so an execution that took the run over could never send it.
func TestClaimLostSpendsOneAttemptOnly(t *testing.T) {
	f, run, n := cancelledUnderItsExecution(t)
	ctx := context.Background()
	p, err := f.l.Witness(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Effects) != 1 || p.Effects[0].State != ledger.AttemptReleased || n.Load() != 0 {
		t.Fatalf("witness %+v, %d sends; want one attempt, released, nothing sent", p.Effects, n.Load())
	}
}
