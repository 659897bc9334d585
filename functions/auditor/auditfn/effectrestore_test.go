package auditfn

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

type failingPut struct{}

func (failingPut) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return nil, errors.New("ThrottlingException")
}

// A completed effect record the other region's claim replaced without an
// outcome (released: its call did not leave) is written back, conditional
// on that release: once (the same change delivered again finds the
// completed record and writes nothing), never over a record that moved on,
// and a write-back that fails is the batch item that failed, counted with
// table=effects (STACK-auditor-effect-restore-failures).
func TestCompletedEffectWrittenBackOverTheOtherRegionsRelease(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	ctx := context.Background()
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "refund", Key: "written-back"})
	if err != nil {
		t.Fatal(err)
	}
	eff := ledger.Effect{Identity: id}
	do := func(table string, at time.Time, call func(context.Context, ledger.Call) ([]byte, error)) error {
		st, err := ledgerdynamo.New(ledgerdynamo.Config{Client: e.Client(), Table: table})
		if err != nil {
			t.Fatal(err)
		}
		l, err := ledger.New(ledger.Config{Store: st, Lease: 30 * time.Second, Wait: -1,
			Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: func() time.Time { return at }}}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.Do(ctx, eff, call)
		return err
	}
	here, there := e.CreateTable(t, "EffectsTable"), e.CreateTable(t, "EffectsTable")
	if err := do(here, t0, func(context.Context, ledger.Call) ([]byte, error) { return []byte("ok"), nil }); err != nil {
		t.Fatal(err)
	}
	if err := do(there, t0.Add(time.Second), func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.NotSent(errors.New("connection refused"))
	}); !errors.Is(err, ledger.ErrNotSent) {
		t.Fatalf("the other region: %v, want ledger.ErrNotSent", err)
	}
	completed, released := scanOne(t, ctx, e, here), scanOne(t, ctx, e, there)
	if _, err := e.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(here), Item: released}); err != nil {
		t.Fatal(err)
	}
	change := []stream.StreamRecord{{EventName: "MODIFY", EventID: "1", OldImage: completed, NewImage: released}}
	var mb bytes.Buffer
	audit := func(r KeyRestorer) Counts {
		a := reconcilingAuditor(t, nil, func() time.Time { return t0.Add(time.Minute) })
		a.RestoreEffects, a.Metrics, a.Logger = r, emf.New(&mb, "idemkit"), slog.New(slog.NewJSONHandler(io.Discard, nil))
		return a.Audit(ctx, change)
	}
	state := func() string { return scanOne(t, ctx, e, here)["state"].(*types.AttributeValueMemberS).Value }

	if c := audit(EffectTableRestorer{Client: failingPut{}, Table: here}); c.RestoreErr == nil || c.Failed != "1" || c.Conflicts != 0 || state() != string(ledger.StateReleased) {
		t.Fatalf("a failed write-back: %+v, state %s; want the batch item failed, its conflict not yet recorded", c, state())
	}
	if n := emfLines(t, mb.String(), MetricRestoreFailures); len(n) != 1 || n[0]["table"] != TableEffects {
		t.Fatalf("%s: %v; want one, table=%s", MetricRestoreFailures, n, TableEffects)
	}
	r := EffectTableRestorer{Client: e.Client(), Table: here}
	if c := audit(r); c.RestoreErr != nil || c.RestoredEffects != 1 || c.Conflicts != 1 || state() != string(ledger.StateCompleted) {
		t.Fatalf("delivered again: %+v, state %s; want the completed record written back, one conflict", c, state())
	}
	if c := audit(r); c.RestoreErr != nil || c.RestoredEffects != 0 || state() != string(ledger.StateCompleted) {
		t.Fatalf("delivered again after the write-back: %+v; want nothing written", c)
	}
}

// A REMOVE of an effect record within its retention is the other region's
// TTL deleting its older record of the effect (the ledger deletes no
// record, TTL none before its retention ends): the record is written back
// where the replica holds none, once, and a failed write-back is the batch
// item that failed, counted with table=effects. This region's own TTL
// deletion of the record once expired is left alone, whatever the
// auditor's clock (judged at the deletion's time too), and so is a record
// a duplicate claimed anew since (an item present).
func TestEffectRecordDeletedWithinItsRetentionIsWrittenBack(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	ctx := context.Background()
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "refund", Key: "deleted-live"})
	if err != nil {
		t.Fatal(err)
	}
	table := e.CreateTable(t, "EffectsTable")
	st, err := ledgerdynamo.New(ledgerdynamo.Config{Client: e.Client(), Table: table})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(ledger.Config{Store: st, Lease: 30 * time.Second, Wait: -1,
		Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: func() time.Time { return t0 }}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Do(ctx, ledger.Effect{Identity: id}, func(context.Context, ledger.Call) ([]byte, error) { return []byte("ok"), nil }); err != nil {
		t.Fatal(err)
	}
	rec := scanOne(t, ctx, e, table)
	del := func() {
		if _, err := e.Client().DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table),
			Key: map[string]types.AttributeValue{"pk": rec["pk"], "sk": rec["sk"]}}); err != nil {
			t.Fatal(err)
		}
	}
	present := func() bool {
		out, err := e.Client().Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Items) > 0
	}
	var mb bytes.Buffer
	audit := func(r KeyRestorer, now, deleted time.Time) Counts {
		a := reconcilingAuditor(t, nil, func() time.Time { return now })
		a.RestoreEffects, a.Metrics, a.Logger = r, emf.New(&mb, "idemkit"), slog.New(slog.NewJSONHandler(io.Discard, nil))
		return a.Audit(ctx, []stream.StreamRecord{{EventName: "REMOVE", EventID: "1", OldImage: rec, Created: deleted,
			PrincipalID: stream.TTLPrincipal, IdentityType: "Service"}})
	}
	r := EffectTableRestorer{Client: e.Client(), Table: table}
	live := t0.Add(time.Hour)
	expired := t0.Add(ledger.MinRetention + time.Hour)

	del()
	if c := audit(EffectTableRestorer{Client: failingPut{}, Table: table}, live, live); c.RestoreErr == nil || c.Failed != "1" || present() {
		t.Fatalf("a failed write-back: %+v; want the batch item failed", c)
	}
	if n := emfLines(t, mb.String(), MetricRestoreFailures); len(n) != 1 || n[0]["table"] != TableEffects {
		t.Fatalf("%s: %v; want one, table=%s", MetricRestoreFailures, n, TableEffects)
	}
	if c := audit(r, live, live); c.RestoreErr != nil || c.RestoredEffects != 1 || !present() {
		t.Fatalf("delivered again: %+v, present %v; want the record written back", c, present())
	}
	if c := audit(r, live, live); c.RestoreErr != nil || c.RestoredEffects != 0 {
		t.Fatalf("delivered again after the write-back: %+v; want nothing written (an item is there)", c)
	}
	del()
	for _, clock := range []time.Time{expired, live} { // the auditor's clock right, or behind DynamoDB's
		if c := audit(r, clock, expired); c.RestoreErr != nil || c.RestoredEffects != 0 || present() {
			t.Fatalf("this region's TTL deletion of the expired record, auditor clock %s: %+v, present %v; want nothing written", clock, c, present())
		}
	}
}
