package memstore

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/keyspace"
)

// TestCompletionBeyondTheRecordLimit: a completion whose record would
// outgrow the store's 32-bit offsets (here a lowered limit) fails with
// idem.ErrTooLarge, applies none of its writes and leaves the record as
// it was.
func TestCompletionBeyondTheRecordLimit(t *testing.T) {
	defer func(n int) { maxRecord = n }(maxRecord)
	maxRecord = 512
	ctx := context.Background()
	st := New()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	id := keyspace.ID("acme", "createRun", "k-limit-00000000000000000001")
	res, err := st.Claim(ctx, idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: "o1", LeaseExpires: now.Add(time.Minute), Expires: now.Add(time.Hour)}, now)
	if err != nil {
		t.Fatal(err)
	}
	before, _, _ := st.Get(ctx, id, now)
	big := &idem.Response{Status: 201, Body: make([]byte, 600)}
	err = st.Complete(ctx, res.Record, idem.Outcome{State: idem.StateCompleted, Response: big, Expires: now.Add(time.Hour), Writes: []any{Write{Key: "item", Value: []byte("v")}}}, now)
	if !errors.Is(err, idem.ErrTooLarge) {
		t.Fatalf("completion beyond the limit: %v, want ErrTooLarge", err)
	}
	if _, ok := st.Item("item"); ok {
		t.Fatal("a refused completion applied its write")
	}
	if after, _, _ := st.Get(ctx, id, now); !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused completion changed the record:\n%+v\nwant\n%+v", after, before)
	}
	small := &idem.Response{Status: 201, Body: []byte("ok")}
	if err := st.Complete(ctx, res.Record, idem.Outcome{State: idem.StateCompleted, Response: small, Expires: now.Add(time.Hour)}, now); err != nil {
		t.Fatal(err)
	}
}
