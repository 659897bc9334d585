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
// twice); when the SDK gives up (every answer lost, or lost then
// throttled) the run is read back on that error path and the count the
// write made is answered (RED_TEAM 520); a count throttled on every try
// is an error and counts nothing. The next try counts one more either way.
func TestFailureCountedOnceWhenItsAnswerIsLost(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		f := dynamotest.NewFaults()
		rs := &runs.DynamoRuns{Client: e.Client(dynamotest.FastRetries, f.Middleware()), Table: e.CreateTable(t, "RunsTable")}
		for _, c := range runLosses("UpdateItem", 0) {
			t.Run(c.name, func(t *testing.T) {
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
				c.arm(f)
				n, err := rs.NoteFailure(ctx, r.ID, "boom", now)
				if c.answered && (err != nil || n != 1) {
					t.Fatalf("first failure, its answers lost: count %d, %v; want 1", n, err)
				}
				if !c.answered && err == nil {
					t.Fatalf("first failure, its fate unknown: count %d, want an error", n)
				}
				f.Clear()
				want := 1
				if c.applied {
					want = 2
				}
				if n, err = rs.NoteFailure(ctx, r.ID, "boom", now); err != nil || n != want {
					t.Fatalf("second failure: count %d, %v; want %d", n, err, want)
				}
			})
		}
	})
}
