package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/tables"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/fence"
	fencedynamo "github.com/idemkit/idemkit/ledger/fence/dynamostore"
	"github.com/idemkit/idemkit/ledger/identity"
)

// TestEffectsResolveFencedWritesTheHomeRecord: under fenced-effects every
// effect record is decided in the home region (the executors reach the
// effects table there, kit.HomeClient with FENCE_TABLE_REGION), and the
// operator's not-delivered resolution, given the fence's (home) region, is
// written there too, whatever region the command runs in: a resolution
// written into another region's replica would replicate over the home
// record last-writer-wins (over the one more attempt's delivered outcome,
// say), which is what keeping effect records in the home region rules out.
// Two moto regions stand for the home (eu) and a replica (us) holding a
// replicated copy of the escaped record.
func TestEffectsResolveFencedWritesTheHomeRecord(t *testing.T) {
	w := escapedInHomeAndReplica(t, "order-44-home")
	ctx, e, r, table, fenceTable, l, owner, id, eff := w.ctx, w.e, w.r, w.table, w.fenceTable, w.l, w.owner, w.id, w.eff
	const home, replica = homeRegion, replicaRegion
	cli := func(args ...string) (int, string, string) {
		var out, errb strings.Builder
		code := run(ctx, append(args, "--endpoint", e.Endpoint, "--table", table, "--region", replica), &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, errb := cli("effects", "show", id.EffectID); code != 0 || !strings.Contains(out, "escaped") {
		t.Fatalf("show: %d %q %q", code, out, errb)
	}
	if code, out, errb := cli("effects", "resolve", id.EffectID, "--as", "not-delivered",
		"--fence-table", fenceTable, "--fence-region", home); code != 0 || !strings.Contains(out, "as not-delivered by ops@acme") {
		t.Fatalf("resolve: %d %q %q", code, out, errb)
	}
	homeView, err := l.ShowEffect(ctx, id.EffectID)
	if err != nil {
		t.Fatal(err)
	}
	if last := homeView.Attempts[len(homeView.Attempts)-1]; last.Operator != "ops@acme" {
		t.Fatalf("home record after the resolution: %s, last attempt %+v; want the operator's resolution written in the home region", homeView.State, last)
	}
	rstore, err := ledgerdynamo.New(ledgerdynamo.Config{Client: r.Client(), Table: table})
	if err != nil {
		t.Fatal(err)
	}
	rl, err := ledger.New(ledger.Config{Store: rstore})
	if err != nil {
		t.Fatal(err)
	}
	if rv, err := rl.ShowEffect(ctx, id.EffectID); err != nil || rv.Rev == homeView.Rev {
		t.Fatalf("replica record: %+v, %v; want it untouched (only replication writes it)", rv, err)
	}
	calls := 0
	if _, err := l.Do(ctx, eff, owner.Guard(func(context.Context, ledger.Call) ([]byte, error) { calls++; return []byte("ok"), nil })); err != nil || calls != 1 {
		t.Fatalf("the one more attempt: %v, %d calls; want one", err, calls)
	}
}

const homeRegion, replicaRegion = "eu-west-1", "us-east-1"

// homeAndReplica is a fenced-effects world on two moto regions: the home
// (eu) holding the effects and fence tables and a replica (us) holding the
// effects table's replica, and an effect escaped in the home region whose
// items were copied into the replica as replication would.
type homeAndReplica struct {
	ctx               context.Context
	e                 *dynamotest.Emulator
	h, r              *dynamotest.Emulator
	table, fenceTable string
	l                 *ledger.Ledger
	owner             *fence.Owner
	id                identity.Identity
	eff               ledger.Effect
}

func escapedInHomeAndReplica(t *testing.T, key string) homeAndReplica {
	t.Helper()
	const home, replica = homeRegion, replicaRegion
	e := dynamotest.Start(t, dynamotest.Moto)
	ctx := context.Background()
	t.Setenv("IDEMKIT_STATE_DIR", t.TempDir())
	t.Setenv("IDEMKIT_OPERATOR", "ops@acme")
	h, r := e.InRegion(home), e.InRegion(replica)
	table, fenceTable := h.CreateTable(t, "EffectsTable"), h.CreateTable(t, "FenceTable")
	defs, err := tables.Embedded()
	if err != nil {
		t.Fatal(err)
	}
	def := defs["EffectsTable"]
	def.TTLAttribute = ""
	if _, err := tables.CreateDef(ctx, r.Client(), def, table); err != nil { // the global table's replica: same name
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = r.Client().DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})

	store, err := ledgerdynamo.New(ledgerdynamo.Config{Client: h.Client(), Table: table})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := fencedynamo.New(fencedynamo.Config{Client: h.Client(), Table: fenceTable})
	if err != nil {
		t.Fatal(err)
	}
	owner, err := fence.New(fence.Config{Store: fs, Region: home})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(ledger.Config{Store: store, Fencer: owner, Wait: -1})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: key})
	eff := ledger.Effect{Identity: id, RunID: "acme/run-0123456789homefenced", NodeID: "charge"}
	if _, err := l.Do(ctx, eff, owner.Guard(func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.Uncertain(errors.New("timeout"))
	})); !errors.Is(err, ledger.ErrUncertain) {
		t.Fatalf("first attempt: %v", err)
	}
	// Replication: the replica holds the home's items as they are.
	items, err := h.Client().Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items.Items {
		if _, err := r.Client().PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	return homeAndReplica{ctx: ctx, e: e, h: h, r: r, table: table, fenceTable: fenceTable, l: l, owner: owner, id: id, eff: eff}
}

// TestEffectsResolveDeliveredOfAFencedEffectNeedsTheHome: a delivered
// resolution needs no fence reopened, but under fenced-effects its record
// is decided in the home region all the same: written into another
// region's replica it would replicate over the home record, last writer
// winning (over an attempt the home region made since, say). Without the
// fence table the command cannot tell the home region from a replica, so
// it refuses a fenced effect, whatever --region says, and writes nothing
// in either; given the fence table it reads and writes the home record.
func TestEffectsResolveDeliveredOfAFencedEffectNeedsTheHome(t *testing.T) {
	w := escapedInHomeAndReplica(t, "order-45-home")
	before, err := w.l.ShowEffect(w.ctx, w.id.EffectID)
	if err != nil {
		t.Fatal(err)
	}
	rstore, err := ledgerdynamo.New(ledgerdynamo.Config{Client: w.r.Client(), Table: w.table})
	if err != nil {
		t.Fatal(err)
	}
	rl, err := ledger.New(ledger.Config{Store: rstore})
	if err != nil {
		t.Fatal(err)
	}
	cli := func(region string, args ...string) (int, string, string) {
		var out, errb strings.Builder
		code := run(w.ctx, append(args, "--endpoint", w.e.Endpoint, "--table", w.table, "--region", region), &out, &errb)
		return code, out.String(), errb.String()
	}
	for _, region := range []string{replicaRegion, homeRegion} {
		if code, out, errb := cli(region, "effects", "resolve", w.id.EffectID, "--as", "delivered", "--rev", before.Rev); code != 1 || out != "" ||
			!strings.Contains(errb, "--fence-table") || !strings.Contains(errb, "home region") {
			t.Fatalf("resolve --as delivered without the fence table, --region %s: exit %d %q %q; want 1, refused, naming --fence-table and the home region", region, code, out, errb)
		}
		for name, lg := range map[string]*ledger.Ledger{"home": w.l, "replica": rl} {
			if v, err := lg.ShowEffect(w.ctx, w.id.EffectID); err != nil || v.Rev != before.Rev {
				t.Fatalf("%s record after a refused resolution (--region %s): %s rev %s, %v; want it untouched", name, region, v.State, v.Rev, err)
			}
		}
	}
	// The fence table given, but not its region: the command runs in the
	// replica's region, where the fence table (the home region's alone)
	// is not found. Refused, nothing written: the fence's region is what
	// tells the home region.
	t.Setenv("FENCE_TABLE_REGION", "")
	for _, as := range []string{"delivered", "not-delivered"} {
		if code, out, errb := cli(replicaRegion, "effects", "resolve", w.id.EffectID, "--as", as, "--rev", before.Rev,
			"--fence-table", w.fenceTable); code != 1 || out != "" || !strings.Contains(errb, "--fence-region") || !strings.Contains(errb, replicaRegion) {
			t.Fatalf("resolve --as %s with the fence table but not its region, from the replica: exit %d %q %q; want 1, refused, naming the region and --fence-region", as, code, out, errb)
		}
		for name, lg := range map[string]*ledger.Ledger{"home": w.l, "replica": rl} {
			if v, err := lg.ShowEffect(w.ctx, w.id.EffectID); err != nil || v.Rev != before.Rev {
				t.Fatalf("%s record after a resolution refused for the fence's region (--as %s): %s rev %s, %v; want it untouched", name, as, v.State, v.Rev, err)
			}
		}
	}
	if code, out, errb := cli(replicaRegion, "effects", "resolve", w.id.EffectID, "--as", "delivered", "--rev", before.Rev,
		"--fence-table", w.fenceTable, "--fence-region", homeRegion); code != 0 || !strings.Contains(out, "as delivered by ops@acme") {
		t.Fatalf("resolve with the fence table: %d %q %q", code, out, errb)
	}
	if v, err := w.l.ShowEffect(w.ctx, w.id.EffectID); err != nil || v.State != ledger.EffectCompleted {
		t.Fatalf("home record: %s %v; want completed by the resolution", v.State, err)
	}
	if v, err := rl.ShowEffect(w.ctx, w.id.EffectID); err != nil || v.Rev != before.Rev {
		t.Fatalf("replica record: %s rev %s, %v; want it untouched (only replication writes it)", v.State, v.Rev, err)
	}
	if res, err := w.l.Do(w.ctx, w.eff, w.owner.Guard(func(context.Context, ledger.Call) ([]byte, error) {
		t.Fatal("a delivered effect fired again")
		return nil, nil
	})); err != nil || !res.Replayed {
		t.Fatalf("after the resolution: %+v %v; want the delivery replayed", res, err)
	}
}
