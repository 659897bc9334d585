package kit_test

import (
	"context"
	"errors"
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
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/fence"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestAuditorLeastPrivilege: the auditor, wired as its main wires it under
// reconciled-records (auditfn.TableRestorer on this region's
// IDEMPOTENCY_TABLE), restores a Layer-1 conflict's winner with calls its
// role grants on that very table, and its role grants no DynamoDB action
// beyond the streams it reads and the ones it uses (dynamodb:PutItem on the
// IdempotencyTable, and on the EffectsTable for a completed effect record
// written back: TestReconciledReleaseOverACompletionIsWrittenBack in
// internal/regionsim). The stream reads are the event source mapping's.
func TestAuditorLeastPrivilege(t *testing.T) {
	for k := range roleGrants(t, "AuditorRole") {
		a, tb, _ := strings.Cut(k, " ")
		if !strings.HasSuffix(tb, "/stream") && k != "dynamodb:PutItem IdempotencyTable" && k != "dynamodb:PutItem EffectsTable" {
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

	// An effect this region delivered and recorded, and the other region's
	// claim of it, released (its call did not leave), replicated over it.
	effects := e.CreateTable(t, "EffectsTable")
	effectsOther := e.CreateTable(t, "EffectsTable")
	eff := iamEffect(t)
	prov := ledgertest.NewProvider(t)
	iamLedger(t, e.Client(), effects, t0).Do(ctx, eff, func(ctx context.Context, c ledger.Call) ([]byte, error) {
		return prov.Call(ctx, c.ProviderKey, "refund")
	})
	if _, err := iamLedger(t, e.Client(), effectsOther, t0.Add(time.Second)).Do(ctx, eff, func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.NotSent(errors.New("connection refused"))
	}); !errors.Is(err, ledger.ErrNotSent) {
		t.Fatalf("the other region's call: %v, want ledger.ErrNotSent", err)
	}
	completed, released := only(effects), only(effectsOther)
	if _, err := e.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(effects), Item: released}); err != nil {
		t.Fatal(err)
	}

	use := newTableUse(map[string]string{"IdempotencyTable": table, "EffectsTable": effects})
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
	a.RestoreEffects = auditfn.EffectTableRestorer{Client: e.Client(use.Middleware()), Table: effects}
	if c := a.Audit(ctx, []stream.StreamRecord{{EventName: "MODIFY", OldImage: completed, NewImage: released}}); c.RestoredEffects != 1 || c.RestoreErr != nil {
		t.Fatalf("the completed effect record was not written back: %+v", c)
	}
	if got := only(effects)["state"]; got.(*types.AttributeValueMemberS).Value != string(ledger.StateCompleted) {
		t.Fatalf("the effects table holds %v, want the completed record", got)
	}
	checkGranted(t, "AuditorRole", use, "EffectsTable/stream", "IdempotencyTable/stream", "IdempotencyTable", "EffectsTable")
	checkAllUsed(t, "AuditorRole", use, "IdempotencyTable")
	checkAllUsed(t, "AuditorRole", use, "EffectsTable")
	// Its write-backs name Layer-1 records only, what its role's condition
	// allows (TestAuditorWritesBackLayer1RecordsOnly).
	use.mu.Lock()
	defer use.mu.Unlock()
	n := 0
	for _, pk := range use.leading["dynamodb:PutItem IdempotencyTable"] {
		n++
		if !strings.HasPrefix(pk, keyspace.CallerPrefix) {
			t.Errorf("the auditor wrote back an item of the idempotency table that is no Layer-1 record: %s", pk)
		}
	}
	if n == 0 {
		t.Error("no write-back of a Layer-1 record recorded: the check proves nothing")
	}
}

// TestAuditorWritesBackLayer1RecordsOnly (RED_TEAM 402): the auditor's
// role may write (dynamodb:PutItem, reconciled-records) only the
// idempotency table's Layer-1 records, whose partition keys start
// "caller:v1:" (keyspace.CallerPrefix): never a response's chunk item
// ("chunk:v1:…", a replayed answer's body) nor anything else the table
// holds (ForAllValues:StringLike on dynamodb:LeadingKeys). That it names
// only such records is TestAuditorLeastPrivilege's.
func TestAuditorWritesBackLayer1RecordsOnly(t *testing.T) {
	sts := leadingKeyConditions(t, "AuditorRole", "IdempotencyTable", "ForAllValues:StringLike")
	if len(sts) == 0 {
		t.Fatal("AuditorRole: no item-level grant on IdempotencyTable parsed: the test proves nothing")
	}
	for i, pats := range sts {
		if len(pats) != 1 || pats[0] != keyspace.CallerPrefix+"*" {
			t.Errorf("AuditorRole: item-level grant %d on IdempotencyTable allows leading keys %q, want exactly [%q]", i, pats, keyspace.CallerPrefix+"*")
		}
	}
}

func iamEffect(t *testing.T) ledger.Effect {
	id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "refund", Key: "iam-effect"})
	if err != nil {
		t.Fatal(err)
	}
	return ledger.Effect{Identity: id}
}

func iamLedger(t *testing.T, client *dynamodb.Client, table string, now time.Time) *ledger.Ledger {
	st, err := ledgerdynamo.New(ledgerdynamo.Config{Client: client, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(ledger.Config{Store: st, Lease: 30 * time.Second, Wait: -1,
		Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: func() time.Time { return now }}}})
	if err != nil {
		t.Fatal(err)
	}
	return l
}
