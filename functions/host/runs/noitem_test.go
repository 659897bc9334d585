package runs

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestRefusedWriteOfNoRunReadsNothingWhereTheEngineReturnsTheItem: a run
// write refused where no run is (a cancel, an end, a pause's release of
// an id no run holds) asks for the item its condition found (ALL_OLD).
// Where the engine returns that item whenever there is one (DynamoDB,
// moto: ReturnsOldOnConditionFailure), none returned is no run, answered
// ErrRunNotFound with no read (it cost a consistent GetItem that always
// found nothing, RED_TEAM 521); where it returns none (dynalite, DynamoDB
// Local) the read stays. A refused write of a run that is there is still
// answered with the run as it is, on every engine, and a store not told
// what its engine returns reads as before.
func TestRefusedWriteOfNoRunReadsNothingWhereTheEngineReturnsTheItem(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		cnt := dynamotest.NewCounter()
		returns := e.Caps.ReturnValuesOnConditionCheckFailure
		table := e.CreateTable(t, "RunsTable")
		client := e.Client(dynamotest.FastRetries, cnt.Middleware())
		told := &DynamoRuns{Client: client, Table: table, Transactional: true, ReturnsOldOnConditionFailure: returns}
		untold := &DynamoRuns{Client: client, Table: table, Transactional: true}
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Millisecond)
		live := []Status{StatusPending, StatusRunning}
		ended := NewRun("acme", "webhook", nil, now)
		if err := told.Create(ctx, ended); err != nil {
			t.Fatal(err)
		}
		if _, err := told.Transition(ctx, ended.ID, []Status{StatusPending}, StatusCompleted, "", now); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name  string
			rs    *DynamoRuns
			write func(rs *DynamoRuns, id string) (Run, error)
		}{
			{"Cancel", told, func(rs *DynamoRuns, id string) (Run, error) { return rs.Cancel(ctx, id, live, "", "", now) }},
			{"Finish", told, func(rs *DynamoRuns, id string) (Run, error) {
				return rs.Finish(ctx, id, 1, StatusCompleted, "", now)
			}},
			{"Cancel, the store not told", untold, func(rs *DynamoRuns, id string) (Run, error) { return rs.Cancel(ctx, id, live, "", "", now) }},
		} {
			t.Run(c.name, func(t *testing.T) {
				cnt.Reset()
				if _, err := c.write(c.rs, NewRunID("acme")); !errors.Is(err, ErrRunNotFound) {
					t.Fatalf("a write of no run: %v, want ErrRunNotFound", err)
				}
				want := map[string]int{"UpdateItem": 1}
				if !c.rs.ReturnsOldOnConditionFailure {
					want["GetItem"] = 1
				}
				if got := cnt.Ops(); !maps.Equal(got, want) {
					t.Fatalf("a write of no run took %v, want %v", got, want)
				}
				cnt.Reset()
				got, err := c.write(c.rs, ended.ID)
				if !errors.Is(err, ErrStatusConflict) || got.ID != ended.ID || got.Status != StatusCompleted {
					t.Fatalf("a write of an ended run: %s %s %v, want the run as it is with ErrStatusConflict", got.ID, got.Status, err)
				}
				want = map[string]int{"UpdateItem": 1}
				if !returns {
					want["GetItem"] = 1
				}
				if got := cnt.Ops(); !maps.Equal(got, want) {
					t.Fatalf("a write of an ended run took %v, want %v", got, want)
				}
			})
		}
	})
}
