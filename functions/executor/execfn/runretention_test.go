package execfn

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestRetainedRunEndsWithItsExpiry: under a run retention the executor
// ends a run in the same two writes as without one (pending -> running,
// running -> completed: no extra round trip), and the item the completion
// leaves carries expiresAt = its end + the retention in epoch seconds.
// When the TTL deletes it, the REMOVE record that reaches the stream (were
// it not filtered out by the mapping) is ignored: nothing is read,
// written or retried.
func TestRetainedRunEndsWithItsExpiry(t *testing.T) {
	const retention = 30 * 24 * time.Hour
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		cnt := dynamotest.NewCounter()
		c := e.Client(dynamotest.FastRetries, cnt.Middleware())
		tbl := e.CreateTable(t, "RunsTable")
		store := &runs.DynamoRuns{Client: c, Table: tbl, Retention: retention}
		x := &Executor{Runs: store, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
		read := func(id string) map[string]types.AttributeValue {
			t.Helper()
			out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(tbl), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: id}}})
			if err != nil || out.Item == nil {
				t.Fatalf("read run %s: %v", id, err)
			}
			return out.Item
		}
		r := runs.NewRun("acme", "conformance-noop", nil, time.Now())
		if err := store.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		created := read(r.ID)
		if _, ok := created["expiresAt"]; ok {
			t.Fatal("a pending run carries expiresAt")
		}
		cnt.Reset()
		if retry := x.HandleRecords(ctx, []stream.StreamRecord{{EventID: "ins", EventName: "INSERT", NewImage: created}}); len(retry) != 0 {
			t.Fatalf("retry %v", retry)
		}
		if n, ops := cnt.Total(), cnt.Ops(); n != 2 || ops["UpdateItem"] != 2 {
			t.Fatalf("a new run under a retention took %d round trips (%v), want its two transitions (2 UpdateItem)", n, ops)
		}
		done := read(r.ID)
		run, _ := runs.RunFromItem(done)
		if run.Status != runs.StatusCompleted {
			t.Fatalf("run %s, want completed", run.Status)
		}
		exp, ok := done["expiresAt"].(*types.AttributeValueMemberN)
		if want := run.UpdatedAt.Add(retention).Unix(); !ok || exp.Value != strconv.FormatInt(want, 10) {
			t.Fatalf("the completed run's expiresAt = %v, want %d (its end %v + %v)", done["expiresAt"], want, run.UpdatedAt, retention)
		}

		cnt.Reset()
		ttl := stream.StreamRecord{EventID: "rm", EventName: "REMOVE", OldImage: done, Keys: map[string]types.AttributeValue{"pk": done["pk"]},
			PrincipalID: stream.TTLPrincipal, IdentityType: "Service"}
		if !ttl.TTLDeletion() {
			t.Fatal("the record is not a TTL deletion")
		}
		if retry := x.HandleRecords(ctx, []stream.StreamRecord{ttl}); len(retry) != 0 || cnt.Total() != 0 {
			t.Fatalf("a TTL deletion: retry %v after %d round trips, want ignored", retry, cnt.Total())
		}
	})
}
