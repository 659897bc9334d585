package execfn

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestNewRunRoundTrips: the executor starts a run its INSERT record
// announces with the compare-and-set pending -> running alone (the record's
// image already says what a read would), so a run without effects costs the
// runs table exactly its two transitions: two UpdateItems, no GetItem. A
// duplicate delivery of a finished run writes nothing (its failed
// compare-and-set returns the stored run, which is left as it was); a
// delivery that finds the run already running (another delivery started it)
// resumes it to completion; a run that no longer exists is skipped.
func TestNewRunRoundTrips(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		cnt := dynamotest.NewCounter()
		c := e.Client(dynamotest.FastRetries, cnt.Middleware())
		tbl := e.CreateTable(t, "RunsTable")
		store := &runs.DynamoRuns{Client: c, Table: tbl}
		x := &Executor{Runs: store, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
		// record is the INSERT record of a new run: its image is the item
		// as Create stored it.
		record := func(t *testing.T, r runs.Run) stream.StreamRecord {
			t.Helper()
			if err := store.Create(ctx, r); err != nil {
				t.Fatal(err)
			}
			out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tbl), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: r.ID}}})
			if err != nil || out.Item == nil {
				t.Fatalf("read the new run: %v", err)
			}
			return stream.StreamRecord{EventID: "ev-" + r.ID, EventName: "INSERT", NewImage: out.Item}
		}
		get := func(t *testing.T, id string) runs.Run {
			t.Helper()
			r, err := store.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}

		r := runs.NewRun("acme", "conformance-noop", nil, time.Now())
		rec := record(t, r)
		cnt.Reset()
		if retry := x.HandleRecords(ctx, []stream.StreamRecord{rec}); len(retry) != 0 {
			t.Fatalf("retry %v", retry)
		}
		if n, ops := cnt.Total(), cnt.Ops(); n != 2 || ops["UpdateItem"] != 2 {
			t.Fatalf("a new run took %d round trips (%v), want its two transitions (2 UpdateItem)", n, ops)
		}
		done := get(t, r.ID)
		if done.Status != runs.StatusCompleted || done.Version != 3 {
			t.Fatalf("run %s at version %d, want completed at 3 (pending, running, completed)", done.Status, done.Version)
		}

		// A duplicate delivery of the finished run: nothing written.
		cnt.Reset()
		if retry := x.HandleRecords(ctx, []stream.StreamRecord{rec}); len(retry) != 0 {
			t.Fatalf("duplicate: retry %v", retry)
		}
		if n := cnt.Total(); n > 2 {
			t.Fatalf("a duplicate delivery took %d round trips (%v)", n, cnt.Ops())
		}
		if again := get(t, r.ID); again.Version != done.Version || !again.UpdatedAt.Equal(done.UpdatedAt) {
			t.Fatalf("a duplicate delivery changed the run: %+v", again)
		}

		// Another delivery started the run: this one resumes it.
		r2 := runs.NewRun("acme", "conformance-noop", nil, time.Now())
		rec2 := record(t, r2)
		if _, err := store.Transition(ctx, r2.ID, []runs.Status{runs.StatusPending}, runs.StatusRunning, "", time.Now()); err != nil {
			t.Fatal(err)
		}
		if retry := x.HandleRecords(ctx, []stream.StreamRecord{rec2}); len(retry) != 0 {
			t.Fatalf("running: retry %v", retry)
		}
		if got := get(t, r2.ID); got.Status != runs.StatusCompleted {
			t.Fatalf("a running run's delivery left it %s", got.Status)
		}

		// A cancelled run is skipped.
		r3 := runs.NewRun("acme", "conformance-noop", nil, time.Now())
		rec3 := record(t, r3)
		if _, err := store.Transition(ctx, r3.ID, []runs.Status{runs.StatusPending}, runs.StatusCancelled, "", time.Now()); err != nil {
			t.Fatal(err)
		}
		if retry := x.HandleRecords(ctx, []stream.StreamRecord{rec3}); len(retry) != 0 {
			t.Fatalf("cancelled: retry %v", retry)
		}
		if got := get(t, r3.ID); got.Status != runs.StatusCancelled {
			t.Fatalf("a cancelled run's delivery left it %s", got.Status)
		}

		// A run that no longer exists (past retention) is skipped.
		gone := rec3
		gone.EventID = "ev-gone"
		gone.NewImage = map[string]types.AttributeValue{}
		for k, v := range rec3.NewImage {
			gone.NewImage[k] = v
		}
		gone.NewImage["pk"] = &types.AttributeValueMemberS{Value: runs.NewRunID("acme")}
		if retry := x.HandleRecords(ctx, []stream.StreamRecord{gone}); len(retry) != 0 {
			t.Fatalf("missing run: retry %v", retry)
		}
	})
}
