package kit_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/auditor/auditfn"
	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger/fence"
)

// TestAuditorLeastPrivilege: the auditor, wired as its main wires it under
// reconciled-records (auditfn.TableRestorer on this region's
// IDEMPOTENCY_TABLE), restores a Layer-1 conflict's winner with calls its
// role grants on that very table, and its role grants no DynamoDB action
// beyond the streams it reads and the one it used (dynamodb:PutItem on the
// IdempotencyTable). The stream reads are the event source mapping's.
func TestAuditorLeastPrivilege(t *testing.T) {
	for k := range roleGrants(t, "AuditorRole") {
		a, tb, _ := strings.Cut(k, " ")
		if !strings.HasSuffix(tb, "/stream") && k != "dynamodb:PutItem IdempotencyTable" {
			t.Errorf("AuditorRole grants %s (%s)", a, tb)
		}
	}
	e := dynamotest.Start(t, dynamotest.Moto)
	ctx := context.Background()
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	id := keyspace.ID("tenant:acme", "POST /runs", "iam-key-0123456789abcdefgh")
	only := func(table string) map[string]types.AttributeValue {
		out, err := e.Client().Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		if err != nil || len(out.Items) != 1 {
			t.Fatalf("scan: %v", err)
		}
		return out.Items[0]
	}
	claim := func(table, req string, now time.Time) (*idemdynamo.Store, idem.Record) {
		st, err := idemdynamo.New(idemdynamo.Config{Client: e.Client(), Table: table})
		if err != nil {
			t.Fatal(err)
		}
		res, err := st.Claim(ctx, idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: "owner-" + req, RequestID: req,
			LeaseExpires: now.Add(time.Minute), Expires: now.Add(time.Hour)}, now)
		if err != nil || res.Decision != idem.Claimed {
			t.Fatalf("claim %s: %+v %v", req, res, err)
		}
		return st, res.Record
	}
	// This region's record completed with its run; a rival region's claim,
	// made while it was live, then replicated over it.
	table := e.CreateTable(t, "IdempotencyTable")
	st, first := claim(table, "req-1", t0)
	if err := st.Complete(ctx, first, idem.Outcome{State: idem.StateCompleted, Expires: t0.Add(time.Hour),
		Response: &idem.Response{Status: 201, Body: []byte(`{"runId":"acme/run-1"}`)}}, t0); err != nil {
		t.Fatal(err)
	}
	winner := only(table)
	other := e.CreateTable(t, "IdempotencyTable")
	claim(other, "req-rival", t0.Add(time.Minute))
	rival := only(other)
	if _, err := e.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: rival}); err != nil {
		t.Fatal(err)
	}

	use := newTableUse(map[string]string{"IdempotencyTable": table})
	ca, err := conflictaudit.New(conflictaudit.Config{Strategy: fence.ReconciledRecords, Region: "eu-west-1"})
	if err != nil {
		t.Fatal(err)
	}
	a := &auditfn.Auditor{Conflicts: ca, Restore: auditfn.TableRestorer{Client: e.Client(use.Middleware()), Table: table},
		Now: func() time.Time { return t0.Add(time.Minute) }, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	if c := a.Audit(ctx, []stream.StreamRecord{{EventName: "MODIFY", OldImage: winner, NewImage: rival}}); c.Restored != 1 || c.RestoreErr != nil {
		t.Fatalf("the winner was not restored: %+v", c)
	}
	if got := only(table)["requestId"]; got.(*types.AttributeValueMemberS).Value != "req-1" {
		t.Fatalf("the table holds %v, want the winner's request", got)
	}
	checkGranted(t, "AuditorRole", use, "EffectsTable/stream", "IdempotencyTable/stream", "IdempotencyTable")
	checkAllUsed(t, "AuditorRole", use, "IdempotencyTable")
}
