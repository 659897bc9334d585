package auditfn

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/functions/host/stream/mapping"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	ledgerdynamo "github.com/idemkit/idemkit/ledger/dynamostore"
	"github.com/idemkit/idemkit/ledger/fence"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// recordingRestorer is a KeyRestorer that writes nothing and remembers
// each write-back asked of it.
type recordingRestorer struct{ calls *[]string }

func (r recordingRestorer) Restore(_ context.Context, winner, _ map[string]types.AttributeValue) (bool, map[string]types.AttributeValue, error) {
	*r.calls = append(*r.calls, str(winner, "pk")+" "+str(winner, "sk"))
	return true, nil, nil
}

// auditorOutput is what an auditor in one claim mode did with recs: its
// counts, its log lines (times left out) and the write-backs it asked for.
func auditorOutput(t *testing.T, mode fence.CrossRegion, now func() time.Time, recs []stream.StreamRecord) (Counts, string, []string) {
	t.Helper()
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}))
	var calls []string
	a := &Auditor{Logger: log, Now: now}
	if mode != fence.SingleRegion {
		ca, err := conflictaudit.New(conflictaudit.Config{Strategy: mode, Region: "eu-west-1", Log: log})
		if err != nil {
			t.Fatal(err)
		}
		a.Conflicts = ca
	}
	if mode == fence.ReconciledRecords {
		a.Restore, a.RestoreEffects = recordingRestorer{&calls}, recordingRestorer{&calls}
	}
	c := a.Audit(context.Background(), recs)
	return c, buf.String(), calls
}

// TestAuditorEffectsStreamIsFiltered: the auditor acts on the effects
// table's ledger records only (sort key "record"): their INSERTs, MODIFYs
// and REMOVEs, a TTL's deletion or any other, in every claim mode
// (single-region, reconciled-records, fenced-effects). Every other item
// the ledger's store keeps there it decodes as no record
// (ledgerdynamo.ErrNotRecord) and ignores: a recorded value kept beside
// its record (up to the value cap, 64 KiB by default, in each image) and
// a run reference. Its mapping on the effects stream, evaluated as Lambda
// does (functions/host/stream.Filter) on the records the real store's
// writes put on an emulator's stream, hands over every record's change
// and none of the others' (RED_TEAM 349); and the auditor's output (counts,
// log lines, write-backs) over the records handed over is its output over
// them all, in each mode.
func TestAuditorEffectsStreamIsFiltered(t *testing.T) {
	f, err := mapping.Filter(idemkit.Template, "AuditorFunction", "EffectsStream")
	if err != nil {
		t.Fatal(err)
	}
	dynamotest.ForEachWith(t, dynamotest.Streams, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		c := e.Client(dynamotest.FastRetries)
		table := e.CreateTable(t, "EffectsTable")
		now := time.Now()
		var mu sync.Mutex
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
		st, err := ledgerdynamo.New(ledgerdynamo.Config{Client: c, Table: table})
		if err != nil {
			t.Fatal(err)
		}
		l, err := ledger.New(ledger.Config{Store: st, Lease: time.Minute, WitnessDuplicates: true,
			Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clock}}, Wait: -1})
		if err != nil {
			t.Fatal(err)
		}
		id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "refund", Key: "order-1/refund-1"})
		if err != nil {
			t.Fatal(err)
		}
		run1, run2, run3 := runs.NewRunID("acme"), runs.NewRunID("acme"), runs.NewRunID("acme")
		// run1: the call's outcome is unknown (an escaped attempt), then
		// its executor dies after the fire mark.
		if _, err := l.Do(ctx, ledger.Effect{Identity: id, RunID: run1, NodeID: "n"}, func(context.Context, ledger.Call) ([]byte, error) {
			return nil, ledger.Uncertain(errors.New("timeout"))
		}); !errors.Is(err, ledger.ErrUncertain) {
			t.Fatal(err)
		}
		func() {
			defer func() { _ = recover() }()
			_, _ = l.Do(ctx, ledger.Effect{Identity: id, RunID: run1, NodeID: "n"}, func(context.Context, ledger.Call) ([]byte, error) { panic("crash") })
		}()
		// run2 reclaims it after the lease (a run reference: another
		// run's attempt) and records a value too large for the record
		// item (a value item beside it).
		advance(2 * time.Minute)
		if _, err := l.Do(ctx, ledger.Effect{Identity: id, RunID: run2, NodeID: "n"}, func(context.Context, ledger.Call) ([]byte, error) {
			return bytes.Repeat([]byte("v"), 4<<10), nil
		}); err != nil {
			t.Fatal(err)
		}
		// run3's duplicate is witnessed: another run reference.
		if r, err := l.Do(ctx, ledger.Effect{Identity: id, RunID: run3, NodeID: "n"}, func(context.Context, ledger.Call) ([]byte, error) {
			t.Error("run3's duplicate fired")
			return nil, nil
		}); err != nil || !r.Replayed {
			t.Fatalf("run3's duplicate: %+v, %v", r, err)
		}
		// Every item deleted, as the sweeper deletes them (a TTL's
		// deletion is the same REMOVE, made by DynamoDB's principal).
		items, err := c.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items.Items {
			if _, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table),
				Key: map[string]types.AttributeValue{"pk": it["pk"], "sk": it["sk"]}}); err != nil {
				t.Fatal(err)
			}
		}

		var all, kept []stream.StreamRecord
		for _, r := range effectsStreamRecords(ctx, t, e, c, table) {
			all = append(all, r)
			if r.EventName == "REMOVE" {
				ttl := r
				ttl.EventID, ttl.PrincipalID, ttl.IdentityType = r.EventID+"-ttl", stream.TTLPrincipal, "Service"
				all = append(all, ttl)
			}
		}
		kinds := map[string]int{}
		for _, r := range all {
			img := r.NewImage
			if img == nil {
				img = r.OldImage
			}
			sk := str(r.Keys, "sk")
			kind := "a record"
			switch {
			case strings.HasPrefix(sk, "value#"):
				kind = "a value item"
			case strings.HasPrefix(sk, "run#"):
				kind = "a run reference"
			case sk != "record":
				t.Fatalf("an item of no known kind: %v", r.Keys)
			}
			_, derr := ledgerdynamo.DecodeRecord(img)
			// The auditor skips an item that decodes as no record;
			// anything else it reads (a record, or one it logs as
			// undecodable).
			reads := !errors.Is(derr, ledgerdynamo.ErrNotRecord)
			if reads != (kind == "a record") {
				t.Fatalf("%s (%s) decodes as %v: %+v", kind, sk, derr, r)
			}
			what := r.EventName + " of " + kind
			if r.TTLDeletion() {
				what = "TTL " + what
			}
			kinds[what]++
			got := f.Match(r)
			if got != reads {
				t.Errorf("%s: handed to the auditor %t, want %t", what, got, reads)
			}
			if got {
				kept = append(kept, r)
			}
		}
		for _, k := range []string{"INSERT of a record", "MODIFY of a record", "REMOVE of a record", "TTL REMOVE of a record",
			"INSERT of a value item", "REMOVE of a value item", "TTL REMOVE of a value item",
			"INSERT of a run reference", "REMOVE of a run reference", "TTL REMOVE of a run reference"} {
			if kinds[k] == 0 {
				t.Errorf("no %s on the stream: the test proves nothing about it (%v)", k, kinds)
			}
		}
		t.Logf("records: %v", kinds)

		for _, mode := range []fence.CrossRegion{fence.SingleRegion, fence.ReconciledRecords, fence.FencedEffects} {
			wantC, wantLog, wantCalls := auditorOutput(t, mode, clock, all)
			gotC, gotLog, gotCalls := auditorOutput(t, mode, clock, kept)
			if wantC.RestoreErr != nil || gotC.RestoreErr != nil {
				t.Fatalf("%s: a restore failed: %v, %v", mode, wantC.RestoreErr, gotC.RestoreErr)
			}
			if !reflect.DeepEqual(gotC, wantC) || gotLog != wantLog || !reflect.DeepEqual(gotCalls, wantCalls) {
				t.Errorf("%s: over the records handed over the auditor did\n%+v\n%s%v\nover them all\n%+v\n%s%v", mode, gotC, gotLog, gotCalls, wantC, wantLog, wantCalls)
			}
			if mode == fence.ReconciledRecords && len(wantCalls) == 0 {
				t.Errorf("reconciled-records: no write-back of the record deleted within its retention: the deletion was not audited")
			}
			if mode == fence.SingleRegion && (wantC.Escaped[TableEffects] != 2 || wantC.Reclaims[TableEffects] != 1) {
				t.Errorf("single-region: %+v, want both escaped attempts and the reclaim counted", wantC)
			}
		}
	})
}
