package dynamostore_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
)

// TestCostPerCaseAndSize pins what the ledger's first effect and its
// suppressed duplicate cost at every value size, in DynamoDB calls and in
// write and consistent read units computed from item sizes under both
// readings of AWS's rule (dynamotest.Meter): the record item stays within
// one write unit, so the duplicate's failed claim is one write unit
// whatever the value's size, plus, for a value kept beside the record, one
// read of it; a value over MaxValueBytes (here the largest allowed,
// 300 KiB) is not recorded at all.
func TestCostPerCaseAndSize(t *testing.T) {
	type cost struct{ calls, wExisting, wLarger, rd int }
	// value size -> first effect, duplicate (with ALL_OLD on a failed
	// condition; without it the duplicate reads the record: one more call
	// and one more read unit).
	want := map[int][2]cost{
		200:       {{2, 2, 2, 0}, {1, 1, 1, 0}},
		4 << 10:   {{3, 7, 7, 0}, {2, 1, 1, 2}},
		40 << 10:  {{3, 43, 43, 0}, {2, 1, 1, 11}},
		350 << 10: {{2, 2, 2, 0}, {1, 1, 1, 0}}, // over MaxValueBytes: not recorded
		2 << 20:   {{2, 2, 2, 0}, {1, 1, 1, 0}},
	}
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		m := dynamotest.NewMeter(e.Client(), "pk", "sk")
		st := newStore(t, e.Client(m.Middleware()), e.CreateTable(t, "EffectsTable"))
		l, err := ledger.New(ledger.Config{Store: st, MaxValueBytes: ledger.MaxMaxValueBytes})
		if err != nil {
			t.Fatal(err)
		}
		get := 0
		if !e.Caps.ReturnValuesOnConditionCheckFailure {
			get = 1
		}
		for _, size := range []int{200, 4 << 10, 40 << 10, 350 << 10, 2 << 20} {
			value := make([]byte, size)
			_, _ = rand.NewChaCha8([32]byte{'l', 'e', 'd', 'g'}).Read(value)
			eff := business(t, fmt.Sprintf("cost-%d", size))
			fire := func(context.Context, ledger.Call) ([]byte, error) { return value, nil }
			m.Take()
			if _, err := l.Do(context.Background(), eff, fire); err != nil {
				t.Fatal(err)
			}
			u := m.Take()
			first := cost{u.Total(), u.WriteExisting, u.WriteLarger, u.Read}
			r, err := l.Do(context.Background(), eff, fire)
			if err != nil || !r.Replayed {
				t.Fatalf("%d B duplicate: %v, replayed %t", size, err, r.Replayed)
			}
			recorded := size <= ledger.MaxMaxValueBytes
			if recorded && !bytes.Equal(r.Value, value) || !recorded && !r.ValueDropped {
				t.Fatalf("%d B duplicate: value %d bytes, dropped %t", size, len(r.Value), r.ValueDropped)
			}
			u = m.Take()
			dup := cost{u.Total(), u.WriteExisting, u.WriteLarger, u.Read}
			w := want[size]
			w[1].calls += get
			w[1].rd += get
			if first != w[0] || dup != w[1] {
				t.Errorf("%d B: first %+v, duplicate %+v; want %+v, %+v", size, first, dup, w[0], w[1])
			}
		}
	})
}
