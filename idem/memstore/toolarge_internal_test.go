package memstore

import (
	"context"
	"errors"
	"reflect"
	"strings"
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

// TestNoRecordPassesTheLimit: no stored record is ever longer than the
// store's 32-bit offsets reach (here a lowered limit): not a record whose
// allocation rounds up past it (its length, read from its head, would
// wrap), not a claim or a release whose strings pass it (those fail with
// idem.ErrTooLarge and write nothing).
func TestNoRecordPassesTheLimit(t *testing.T) {
	defer func(n int) { maxRecord = n }(maxRecord)
	maxRecord = 1000
	ctx := context.Background()
	st := New()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	check := func(what string) {
		t.Helper()
		for id, p := range st.recs {
			if n := len(bytesAt(p)); n > maxRecord {
				t.Fatalf("%s: record %s is %d bytes, over the limit %d", what, id, n, maxRecord)
			}
		}
	}
	id := keyspace.ID("acme", "createRun", "k-limit-00000000000000000002")
	rec := idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: "o1", LeaseExpires: now.Add(time.Minute), Expires: now.Add(time.Hour)}
	huge := rec
	huge.Owner = strings.Repeat("o", 2000)
	if _, err := st.Claim(ctx, huge, now); !errors.Is(err, idem.ErrTooLarge) {
		t.Fatalf("a claim whose strings pass the limit: %v, want ErrTooLarge", err)
	}
	if st.Len() != 0 {
		t.Fatal("a refused claim stored a record")
	}
	// A claim just under the limit is stored, its room for a completion
	// cut to the limit.
	near := rec
	near.RequestID = strings.Repeat("r", maxRecord-headLen-len(id)-len("d1pendingo1")-8)
	res, err := st.Claim(ctx, near, now)
	if err != nil {
		t.Fatal(err)
	}
	check("claim near the limit")
	before, _, _ := st.Get(ctx, id, now)
	rel := res.Record
	rel.RawBodySHA256 = strings.Repeat("a", 64)
	if err := st.Release(ctx, rel, now); !errors.Is(err, idem.ErrTooLarge) {
		t.Fatalf("a release whose raw body hash passes the limit: %v, want ErrTooLarge", err)
	}
	if after, _, _ := st.Get(ctx, id, now); !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused release changed the record:\n%+v\nwant\n%+v", after, before)
	}
	// A completion not in place whose record's allocation rounds up past
	// the limit (the size classes round 1000 bytes up to 1024).
	id2 := keyspace.ID("acme", "createRun", "k-limit-00000000000000000003")
	r2 := rec
	r2.ID = id2
	c2, err := st.Claim(ctx, r2, now)
	if err != nil {
		t.Fatal(err)
	}
	b2 := bytesAt(st.recs[id2])
	body := maxRecord - used(b2) - len(idem.StateCompleted) - responseLen(&idem.Response{}) - 4
	if err := st.Complete(ctx, c2.Record, idem.Outcome{State: idem.StateCompleted, Response: &idem.Response{Status: 200, Body: make([]byte, body)}, Expires: now.Add(time.Hour)}, now); err != nil {
		t.Fatal(err)
	}
	check("completion near the limit")
	if g, ok, _ := st.Get(ctx, id2, now); !ok || len(g.Response.Body) != body {
		t.Fatalf("the completed record reads %+v", g)
	}
}
