package devstack

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/inbox"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestRunsPollerHandsOverNewRunsOnly: `idemkit dev`'s poller of the runs
// stream applies the executor's mapping filter of template.yaml, so the
// executor is handed what the deployed mapping would invoke it with: the
// INSERT of each new run, and neither the items the runs store writes
// beside runs (an enforced create's scope item; the tombstone a create
// whose run write failed fences its own run id with) nor a tenant's inbox
// nor a run's later writes. Once every run is handed (the last written
// after everything else, so every record was read by then), the poller is
// stopped, waiting for its handlers, and what it handed is compared.
func TestRunsPollerHandsOverNewRunsOnly(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, func(t *testing.T, e *dynamotest.Emulator) {
		r := newPollerRig(t, e)
		faults := dynamotest.NewFaults()
		c := e.Client(dynamotest.FastRetries, faults.Middleware())
		st := &runs.DynamoRuns{Client: c, Table: r.tbl}
		t0 := time.Now().UTC()
		newRun := func() runs.Run {
			return runs.NewRun("acme", "webhook", json.RawMessage(`{"url":"https://example.com/hook"}`), t0)
		}

		plain, scoped, last := newRun(), newRun(), newRun()
		want := map[string]int{plain.ID: 1, scoped.ID: 1, last.ID: 1}
		var mu sync.Mutex
		handed := map[string]int{}
		runsHanded := 0
		done := make(chan struct{})
		p, err := newRunsPoller(r.tbl, func(_ context.Context, recs []stream.StreamRecord) []string {
			mu.Lock()
			defer mu.Unlock()
			for _, rec := range recs {
				pk := rec.Keys["pk"].(*types.AttributeValueMemberS).Value
				handed[pk]++
				if want[pk] > 0 && handed[pk] == 1 {
					if runsHanded++; runsHanded == len(want) {
						close(done)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		p.sc, p.arn, p.log = e.StreamsClient(), r.arn, slog.New(slog.NewTextHandler(testWriter{t}, nil))
		p.interval, p.idleMax = 5*time.Millisecond, 50*time.Millisecond
		ctx, cancel := context.WithCancel(r.ctx)
		stopped := make(chan struct{})
		go func() { defer close(stopped); p.run(ctx) }()
		stop := func() { cancel(); <-stopped }
		defer stop()

		if err := st.Create(r.ctx, plain); err != nil {
			t.Fatal(err)
		}
		if err := st.CreateScoped(r.ctx, scoped, "order-7"); err != nil {
			t.Fatal(err)
		}
		// The scope's write lands, the run's fails: the create fences its
		// own run id with a tombstone.
		fenced := newRun()
		faults.PassNext("PutItem", 1)
		faults.FailNext("PutItem", 3, dynamotest.Throttle())
		if err := st.CreateScoped(r.ctx, fenced, "order-8"); err == nil {
			t.Fatal("a create whose run write failed succeeded")
		}
		if _, err := st.Transition(r.ctx, plain.ID, []runs.Status{runs.StatusPending}, runs.StatusCancelled, "", t0); err != nil {
			t.Fatal(err)
		}
		ib, err := inbox.NewDynamo(inbox.DynamoConfig{Client: c, Table: r.tbl})
		if err != nil {
			t.Fatal(err)
		}
		if err := ib.Keep(r.ctx, inbox.Entry{ID: "AAAAAAAAAAAAAAAAAAAAAA", Tenant: "acme", Operation: "cancelRun", RecordID: plain.ID,
			DecidedVersion: 1, CurrentVersion: 2, CreatedAt: t0}, ""); err != nil {
			t.Fatal(err)
		}
		if err := st.Create(r.ctx, last); err != nil {
			t.Fatal(err)
		}
		select {
		case <-done:
		case <-r.ctx.Done():
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("the runs were never all handed over: %v", handed)
		}
		stop()
		mu.Lock()
		defer mu.Unlock()
		for pk, n := range handed {
			if want[pk] != n {
				t.Errorf("%s handed over %d times, want %d (the new runs' INSERTs only)", pk, n, want[pk])
			}
		}
		for pk, n := range want {
			if handed[pk] != n {
				t.Errorf("run %s handed over %d times, want %d", pk, handed[pk], n)
			}
		}
	})
}
