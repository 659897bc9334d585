package execfn

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	hostruns "github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/faultrx"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// refusedPark is a run store whose Park is refused, before anything is
// written, the first refusals times (a throttled UpdateItem): every other
// call is the memory store's.
type refusedPark struct {
	*hostruns.MemRuns
	refusals atomic.Int32
}

func (s *refusedPark) Park(ctx context.Context, id string, epoch int64, w hostruns.Wake, now time.Time) (hostruns.Run, error) {
	if s.refusals.Add(-1) >= 0 {
		return hostruns.Run{}, errors.New("host: park run: ThrottlingException: rate exceeded")
	}
	return s.MemRuns.Park(ctx, id, epoch, w, now)
}

// TestLastTryParksARunWhoseParkWasRefused: the stream's last try sends the
// run's webhook, the receiver answers 503 with Retry-After: 30 (the
// delivery is to be tried again then: the run is to be parked), and the
// runs table refuses the park once. The run is parked by the park tried
// again under the claim epoch the execution held, never ended "failed:
// gave up" with its delivery's tries left (a retry of that run is a new
// run under a new provider key: a receiver that performed the 503'd
// request would see it twice); its next try, when due, completes it.
// Refused once more, the run still ends: failed, under the give-up.
func TestLastTryParksARunWhoseParkWasRefused(t *testing.T) {
	for _, refusals := range []int32{1, 2} {
		clk := &clock{t: time.Now().UTC().Truncate(time.Millisecond)}
		tc := ledgertest.ClockFuncs{NowFunc: clk.Now}
		l, err := ledger.New(ledger.Config{Store: ledgermem.New(), Test: ledger.TestConfig{Clock: tc, Jitter: func(d time.Duration) time.Duration { return d }}})
		if err != nil {
			t.Fatal(err)
		}
		rx := faultrx.New(faultrx.Options{T: t, Plan: faultrx.Sequence(faultrx.Fault{Status: http.StatusServiceUnavailable, RetryAfter: "30"}, faultrx.OK)})
		defer rx.Close()
		mem := hostruns.NewMemRuns()
		rs := &refusedPark{MemRuns: mem}
		rs.refusals.Store(refusals)
		x := &Executor{Runs: rs, MaxAttempts: 1, Test: TestConfig{Clock: tc}, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
			Webhook: &webhook.Webhook{Ledger: l, Policy: webhook.WebhookPolicy{AllowLoopback: true}, Test: webhook.TestConfig{Clock: tc}}}
		in, _ := json.Marshal(map[string]any{"url": rx.URL(), "payload": map[string]any{"order": 42}})
		run := hostruns.NewRun("acme", webhook.WorkflowWebhook, in, clk.Now())
		ctx := context.Background()
		if err := mem.Create(ctx, run); err != nil {
			t.Fatal(err)
		}
		if retry := x.HandleRecords(ctx, []stream.StreamRecord{insert("e1", run)}); retry != nil {
			t.Fatalf("refused %d: retry %v, want the last try's record done", refusals, retry)
		}
		r, _ := mem.Get(ctx, run.ID)
		if refusals == 2 {
			if r.Status != hostruns.StatusFailed || !strings.Contains(r.Error, "gave up after 1 attempts") {
				t.Fatalf("park refused twice on the last try: run %s (%q), want failed by the give-up", r.Status, r.Error)
			}
			continue
		}
		if r.Status != hostruns.StatusRunning || r.Wake.IsZero() || r.Wake.At.Before(clk.Now().Add(30*time.Second)) {
			t.Fatalf("park refused once on the last try: run %s (%q), wake %+v, want running, parked until the next try (30 s on)", r.Status, r.Error, r.Wake)
		}
		clk.Set(clk.Now().Add(31 * time.Second))
		if n, err := x.ResumeDue(ctx); err != nil || n != 1 {
			t.Fatalf("due pass: %d runs, %v", n, err)
		}
		if r, _ = mem.Get(ctx, run.ID); r.Status != hostruns.StatusCompleted {
			t.Fatalf("after its next try: run %s (%q), want completed", r.Status, r.Error)
		}
		if got := rx.Count(); got != 2 {
			t.Fatalf("%d deliveries, want 2 (the 503'd one and its next try)", got)
		}
	}
}
