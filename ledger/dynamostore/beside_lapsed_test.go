package dynamostore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// DynamoDB's TTL deletes expired items lazily, typically within two days,
// in any order: a success's value item, kept a day longer than its record,
// can be deleted while the record, past its retention, is still there. Such
// a record is absent to every reader, as any record past its retention is
// to its callers: the run's witness, `idemkit effects list` (a Scan of the
// whole table) and `show` answer as if it were deleted, and the effect
// fires anew once (its record lapsed). Before, each of those reads failed
// on the missing value ("recorded value beside the record is missing"):
// one such record failed the whole listing and the run's witness.
func TestRecordPastItsRetentionWithoutItsValueItemIsAbsent(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		client := e.Client()
		table := e.CreateTable(t, "EffectsTable")
		st := newStore(t, client, table)
		ctx := context.Background()
		// Written 17 days ago, kept 14 (MinRetention): the record's
		// retention ended 3 days ago, its value item's TTL 2 days ago.
		clk := ledgertest.NewClock(time.Now().Add(-17 * 24 * time.Hour).UTC())
		then, err := ledger.New(ledger.Config{Store: st, Test: ledger.TestConfig{Clock: clk}})
		if err != nil {
			t.Fatal(err)
		}
		eff := business(t, "beside-lapsed-1")
		sends := 0
		fn := func(context.Context, ledger.Call) ([]byte, error) { sends++; return make([]byte, 3000), nil }
		r, err := then.Do(ctx, eff, fn)
		if err != nil {
			t.Fatal(err)
		}
		// TTL deleted the value item; the record lingers.
		items, deleted := deleteValueItems(t, client, table, r.EffectID)
		if deleted != 1 || items != 2 {
			t.Fatalf("%d items, %d value items; want the record and its value item", items, deleted)
		}

		now, err := ledger.New(ledger.Config{Store: st})
		if err != nil {
			t.Fatal(err)
		}
		if vs, err := now.ListEffects(ctx, ledger.Filter{}); err != nil || len(vs) != 0 {
			t.Fatalf("effects list: %d effects, %v; want none, no error", len(vs), err)
		}
		if vs, err := now.ListEffects(ctx, ledger.Filter{RunID: eff.RunID}); err != nil || len(vs) != 0 {
			t.Fatalf("effects list --run: %d effects, %v; want none, no error", len(vs), err)
		}
		if p, err := now.Witness(ctx, eff.RunID); err != nil || len(p.Effects) != 0 {
			t.Fatalf("witness: %d rows, %v; want none, no error", len(p.Effects), err)
		}
		if _, err := now.ShowEffect(ctx, r.EffectID); !errors.Is(err, ledger.ErrEffectNotFound) {
			t.Fatalf("effects show: %v; want ErrEffectNotFound", err)
		}
		if got, err := st.Get(ctx, "effect#"+r.EffectID); err != nil || got != nil {
			t.Fatalf("Get: %v, %v; want absent", got, err)
		}
		// The effect, its record lapsed, fires once anew.
		r2, err := now.Do(ctx, eff, fn)
		if err != nil || r2.Replayed || sends != 2 {
			t.Fatalf("after the lapse: %+v %v, %d sends; want a new send (2)", r2, err, sends)
		}
		if r3, err := now.Do(ctx, eff, fn); err != nil || !r3.Replayed || len(r3.Value) != 3000 || sends != 2 {
			t.Fatalf("its duplicate: replayed %v, %d bytes, %v, %d sends; want the new value replayed", r3.Replayed, len(r3.Value), err, sends)
		}
	})
}
