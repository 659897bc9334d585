package runs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestCancelRecordsItsRequest: Cancel moves a live run to cancelled and
// records the cancelling request's Layer-1 record (CancelledBy) in the same
// conditional write, returned and read back; a Cancel that finds the run
// ended writes nothing (ErrStatusConflict with the run as it is, the first
// canceller kept); a Transition to cancelled records none. Memory and
// every emulator.
func TestCancelRecordsItsRequest(t *testing.T) {
	check := func(t *testing.T, rs RunStore) {
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Millisecond)
		live := []Status{StatusPending, StatusRunning}
		r := NewRun("acme", "webhook", []byte(`{}`), now)
		if err := rs.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		got, err := rs.Cancel(ctx, r.ID, live, "caller:v1:first", "", now)
		if err != nil || got.Status != StatusCancelled || got.CancelledBy != "caller:v1:first" {
			t.Fatalf("Cancel: %+v %v", got, err)
		}
		if got, err = rs.Get(ctx, r.ID); err != nil || got.CancelledBy != "caller:v1:first" || got.Status != StatusCancelled {
			t.Fatalf("Get after Cancel: %+v %v", got, err)
		}
		got, err = rs.Cancel(ctx, r.ID, live, "caller:v1:second", "", now.Add(time.Second))
		if !errors.Is(err, ErrStatusConflict) || got.CancelledBy != "caller:v1:first" {
			t.Fatalf("Cancel of a cancelled run: %+v %v", got, err)
		}
		if got, err = rs.Get(ctx, r.ID); err != nil || got.CancelledBy != "caller:v1:first" || !got.UpdatedAt.Equal(now) {
			t.Fatalf("Get after the refused Cancel: %+v %v", got, err)
		}
		r2 := NewRun("acme", "webhook", []byte(`{}`), now)
		if err := rs.Create(ctx, r2); err != nil {
			t.Fatal(err)
		}
		if got, err = rs.Transition(ctx, r2.ID, live, StatusCancelled, "", now); err != nil || got.CancelledBy != "" {
			t.Fatalf("Transition to cancelled: %+v %v", got, err)
		}
		if got, err = rs.Get(ctx, r2.ID); err != nil || got.CancelledBy != "" {
			t.Fatalf("Get after Transition: %+v %v", got, err)
		}
	}
	t.Run("memory", func(t *testing.T) { check(t, NewMemRuns()) })
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		check(t, &DynamoRuns{Client: e.Client(dynamotest.FastRetries), Table: e.CreateTable(t, "RunsTable")})
	})
}
