package execfn

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
)

// refusedFinish is a run store whose Finish to a status is refused, before
// anything is written, the first refusals times (a throttled or failed
// UpdateItem): every other call is the memory store's.
type refusedFinish struct {
	*hostruns.MemRuns
	to       hostruns.Status
	refusals atomic.Int32
}

func (s *refusedFinish) Finish(ctx context.Context, id string, epoch int64, to hostruns.Status, msg string, now time.Time) (hostruns.Run, error) {
	if to == s.to && s.refusals.Add(-1) >= 0 {
		return hostruns.Run{}, errors.New("host: update run: ThrottlingException: rate exceeded")
	}
	return s.MemRuns.Finish(ctx, id, epoch, to, msg, now)
}

// TestLastTryEndsACompletionAsCompleted: the stream's last try delivers the
// webhook (the ledger records its success) and its completion, the run's
// Finish, is refused by the runs table. The run ends as its execution
// ended, completed, by the completion tried again, never "failed: gave up"
// over an effect that was delivered (whose retry, under the run-keyed
// provider key of a new run, would deliver it a second time). Refused once
// more, the run still ends: failed, under the host's own give-up.
func TestLastTryEndsACompletionAsCompleted(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { n.Add(1) }))
	defer srv.Close()
	for _, refusals := range []int32{1, 2} {
		f := newFixture(t)
		rs := &refusedFinish{MemRuns: f.runs, to: hostruns.StatusCompleted}
		rs.refusals.Store(refusals)
		f.x.Runs, f.x.MaxAttempts = rs, 1
		n.Store(0)
		run := f.webhookRun(t, srv.URL)
		if retry := f.x.HandleRecords(context.Background(), []stream.StreamRecord{insert("e1", run)}); retry != nil {
			t.Fatalf("refused %d: retry %v, want the last try's record done", refusals, retry)
		}
		r, _ := f.runs.Get(context.Background(), run.ID)
		switch refusals {
		case 1:
			if r.Status != hostruns.StatusCompleted || r.Error != "" {
				t.Fatalf("completion refused once on the last try: run %s (%q), want completed: its webhook was delivered", r.Status, r.Error)
			}
		case 2:
			if r.Status != hostruns.StatusFailed || !strings.Contains(r.Error, "gave up after 1 attempts") {
				t.Fatalf("completion refused twice on the last try: run %s (%q), want failed by the give-up", r.Status, r.Error)
			}
		}
		if n.Load() != 1 {
			t.Fatalf("refused %d: %d deliveries, want 1", refusals, n.Load())
		}
	}
}
