package runs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestFailureCountedOnceWhenItsAnswerIsLost: the engine applies the
// count of a failed try and its answer is lost, so the SDK sends the write
// again. The try is counted once: the retry is refused by the call's own
// token and the count the first write made is answered (lost once, lost
// twice); when the SDK gives up (lost, then throttled) the call is an
// error, and the count it made stands. The next try counts 2 either way.
func TestFailureCountedOnceWhenItsAnswerIsLost(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		f := dynamotest.NewFaults()
		rs := &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries, f.Middleware()), Table: e.CreateTable(t, "RunsTable")}
		for _, c := range dynamotest.Losses("UpdateItem") {
			t.Run(c.Name, func(t *testing.T) {
				t.Cleanup(f.Clear)
				ctx := context.Background()
				now := time.Now()
				r := runs.NewRun(strings.Repeat("t", 8), "conformance-noop", nil, now)
				if err := rs.Create(ctx, r); err != nil {
					t.Fatal(err)
				}
				if _, err := rs.Transition(ctx, r.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", now); err != nil {
					t.Fatal(err)
				}
				c.Arm(f)
				n, err := rs.NoteFailure(ctx, r.ID, "boom", now)
				if c.Landed && (err != nil || n != 1) {
					t.Fatalf("first failure, its answer lost: count %d, %v; want 1", n, err)
				}
				if !c.Landed && err == nil {
					t.Fatalf("first failure, the SDK gave up: count %d, want an error", n)
				}
				f.Clear()
				if n, err = rs.NoteFailure(ctx, r.ID, "boom", now); err != nil || n != 2 {
					t.Fatalf("second failure: count %d, %v; want 2", n, err)
				}
			})
		}
	})
}
