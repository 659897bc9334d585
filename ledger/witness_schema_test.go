package ledger_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/idemkit/idemkit/internal/shared"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// projectionSchema compiles ../shared/openwop/schemas/v2/effect-ledger-projection.schema.json
// (with ids.schema.json, which it references).
func projectionSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	for _, name := range []string{"ids.schema.json", "effect-ledger-projection.schema.json"} {
		f, err := os.Open(shared.Path(t, "openwop", "schemas", "v2", name))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddResource("https://openwop.dev/spec/v2/"+name, doc); err != nil {
			t.Fatal(err)
		}
	}
	s, err := c.Compile("https://openwop.dev/spec/v2/effect-ledger-projection.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A business identity is one effect for every entry point: here an API call
// (no run, no node) reaches it first, and a run's node after. Every row of
// the run's witness is a valid projection row (the schema requires a nodeId
// in its grammar): an attempt made outside any run has no node of its own,
// and its row carries the node of the effect's first attempt that has one,
// or "outside-run" when none has.
func TestWitnessRowsOutsideARunHaveANode(t *testing.T) {
	now := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	l, err := ledger.New(ledger.Config{Store: memstore.New(), Wait: -1, WitnessDuplicates: true,
		Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: func() time.Time { return now }}}})
	if err != nil {
		t.Fatal(err)
	}
	schema := projectionSchema(t)
	valid := func(run string) ledger.Projection {
		t.Helper()
		p, err := l.Witness(context.Background(), run)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(p)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if err := schema.Validate(doc); err != nil {
			t.Errorf("witness of %s is not a valid projection: %s\n%v", run, b, err)
		}
		return p
	}
	ctx := context.Background()

	// Released by the API call (the request never left), fired by the run.
	id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "refund", Key: "order-1"})
	notSent := func(context.Context, ledger.Call) ([]byte, error) { return nil, ledger.NotSent(context.Canceled) }
	ok := func(context.Context, ledger.Call) ([]byte, error) { return []byte("re_1"), nil }
	if _, err := l.Do(ctx, ledger.Effect{Identity: id}, notSent); err == nil {
		t.Fatal("not sent: no error")
	}
	run := "acme/run-0000000000000001"
	if _, err := l.Do(ctx, ledger.Effect{Identity: id, RunID: run, NodeID: "refund"}, ok); err != nil {
		t.Fatal(err)
	}
	if p := valid(run); len(p.Effects) != 2 || p.Effects[0].NodeID != "refund" {
		t.Errorf("rows: %+v", p.Effects)
	}

	// Completed by the API call; the run's duplicate is suppressed and,
	// with WitnessDuplicates, listed: no attempt of the effect was made by
	// a node, and its row says so ("outside-run").
	id2, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "refund", Key: "order-2"})
	if _, err := l.Do(ctx, ledger.Effect{Identity: id2}, ok); err != nil {
		t.Fatal(err)
	}
	run2 := "acme/run-0000000000000002"
	if r, err := l.Do(ctx, ledger.Effect{Identity: id2, RunID: run2, NodeID: "refund-2"}, ok); err != nil || !r.Replayed {
		t.Fatal(r, err)
	}
	if p := valid(run2); len(p.Effects) != 1 || p.Effects[0].NodeID != "outside-run" {
		t.Errorf("rows: %+v", p.Effects)
	}
}

// A run's reference to an effect record it made an attempt at outlives the
// record when the effect's last write came first: once the record passes its
// retention, the same business identity is a new effect, made by other runs.
// The old run's witness lists what the run took part in, never that new
// effect's attempts.
func TestWitnessLeavesOutAnEffectRecreatedAfterTheRunsRecord(t *testing.T) {
	clock := ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC))
	l, err := ledger.New(ledger.Config{Store: memstore.New(), Wait: -1, Lease: 30 * time.Second,
		Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clock.Now}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "refund", Key: "order-9"})
	notSent := func(context.Context, ledger.Call) ([]byte, error) { return nil, ledger.NotSent(context.Canceled) }
	ok := func(context.Context, ledger.Call) ([]byte, error) { return []byte("re_9"), nil }
	run0, run1, run2 := "acme/run-0000000000000010", "acme/run-0000000000000011", "acme/run-0000000000000012"
	// run0 creates the record; its attempt never leaves. run1 fires it.
	if _, err := l.Do(ctx, ledger.Effect{Identity: id, RunID: run0, NodeID: "refund"}, notSent); err == nil {
		t.Fatal("not sent: no error")
	}
	clock.Advance(time.Hour)
	if _, err := l.Do(ctx, ledger.Effect{Identity: id, RunID: run1, NodeID: "refund"}, ok); err != nil {
		t.Fatal(err)
	}
	before, err := l.Witness(ctx, run1)
	if err != nil || len(before.Effects) != 2 {
		t.Fatalf("run1 before: %+v %v", before, err)
	}
	// Past the record's retention, run2 reaches the same business identity:
	// a new effect, fired by run2 alone.
	clock.Advance(ledger.MinRetention + time.Minute)
	if r, err := l.Do(ctx, ledger.Effect{Identity: id, RunID: run2, NodeID: "refund"}, ok); err != nil || r.Replayed {
		t.Fatalf("run2: %+v %v", r, err)
	}
	p, err := l.Witness(ctx, run1)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range p.Effects {
		t.Errorf("run1's witness lists an attempt of the effect re-created by run2: %+v", w)
	}
}
