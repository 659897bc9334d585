package runs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestPauseOfARunStoredBeforeVersions: a run stored before versions were
// kept (no version, no history: it reads as version 0) is paused and
// resumed as any other, its compare-and-set naming the absent version,
// never refused on each try.
func TestPauseOfARunStoredBeforeVersions(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		c := e.Client(dynamotest.FastRetries)
		d := &DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable")}
		t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
		r := NewRun("acme", "webhook", nil, t0)
		if err := d.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		if _, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(d.Table),
			Key:              map[string]types.AttributeValue{runAttrPK: sAV(r.ID)},
			UpdateExpression: aws.String("REMOVE #v, #h"), ExpressionAttributeNames: map[string]string{"#v": runAttrVersion, "#h": runAttrHistory}}); err != nil {
			t.Fatal(err)
		}
		if old, err := d.Get(ctx, r.ID); err != nil || old.Version != 0 {
			t.Fatalf("the run without a version: %+v %v", old, err)
		}
		p, err := d.Pause(ctx, r.ID, Pause{By: "p1"}, t0)
		if err != nil || p.Status != StatusPaused || p.Version != 1 {
			t.Fatalf("pause of a run without a version: %+v %v, want paused at version 1", p, err)
		}
		if res, err := d.Unpause(ctx, r.ID, "r1", "", t0); err != nil || res.Status != StatusRunning || res.Version != 2 {
			t.Fatalf("resume: %+v %v", res, err)
		}
	})
}

// TestGuardedPauseRechecksAMovedRun: the run moves between the read a
// guarded pause (and resume) checks its guard on and its write (another
// request pauses and resumes it, here from inside the guard's first
// call): the write's compare-and-set on the run as read fails, and the
// guard, called again on the run as it is now, refuses it; the decided
// write never lands on a run whose change its guard did not see. (In
// memory the guard runs under the store's lock: nothing moves the run.)
func TestGuardedPauseRechecksAMovedRun(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		d := &DynamoRuns{Client: e.Client(dynamotest.FastRetries), Table: e.CreateTable(t, "RunsTable")}
		t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
		r := NewRun("acme", "webhook", nil, t0)
		if err := d.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		refused := errors.New("status changed")
		// guard is decided against version v; on its first call another
		// request moves the run (move), then the guard passes the run it
		// was handed.
		guard := func(v int64, move func()) (Guard, *int) {
			calls := 0
			return func(cur Run) error {
				calls++
				if calls == 1 {
					move()
					return nil
				}
				changes, err := cur.ChangesSince(v)
				if err != nil {
					return err
				}
				for _, c := range changes {
					if c.Field == FieldStatus {
						return refused
					}
				}
				return nil
			}, &calls
		}
		g, calls := guard(r.Version, func() {
			if _, err := d.Pause(ctx, r.ID, Pause{By: "other"}, t0); err != nil {
				t.Error(err)
			}
			if _, err := d.Unpause(ctx, r.ID, "other", "", t0); err != nil {
				t.Error(err)
			}
		})
		got, err := d.PauseGuarded(ctx, r.ID, Pause{By: "decided"}, g, t0)
		if !errors.Is(err, refused) || *calls != 2 || got.PausedBy != "other" || got.Version != r.Version+2 {
			t.Fatalf("guarded pause of a run moved under it: %s at %d by %q, %v after %d guard calls; want refused on the second",
				got.Status, got.Version, got.PausedBy, err, *calls)
		}
		p, err := d.Pause(ctx, r.ID, Pause{By: "p"}, t0)
		if err != nil {
			t.Fatal(err)
		}
		g, calls = guard(p.Version, func() {
			if _, err := d.Unpause(ctx, r.ID, "other2", "", t0); err != nil {
				t.Error(err)
			}
			if _, err := d.Pause(ctx, r.ID, Pause{By: "other2"}, t0); err != nil {
				t.Error(err)
			}
		})
		got, err = d.UnpauseGuarded(ctx, r.ID, "decided", "", g, t0)
		if !errors.Is(err, refused) || *calls != 2 || got.Status != StatusPaused || got.ResumedBy != "other2" {
			t.Fatalf("guarded resume of a run moved under it: %s by %q, %v after %d guard calls; want refused on the second",
				got.Status, got.ResumedBy, err, *calls)
		}
	})
}
