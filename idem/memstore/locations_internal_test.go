package memstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/keyspace"
)

// TestLocationsOfGoneRecordsAreNotKept: times whose location is a new
// *time.Location each time (as time.Parse returns for an offset other
// than the local one) do not make the store grow without bound: the
// locations of records deleted or replaced are let go, while a record
// still stored reads its times back exactly (==, location included).
func TestLocationsOfGoneRecordsAreNotKept(t *testing.T) {
	ctx := context.Background()
	st := New()
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	keep := keyspace.ID("acme", "createRun", "k-loc-keep-00000000000000000001")
	kz := time.FixedZone("K", -7*3600)
	kept := idem.Record{ID: keep, Digest: "d", State: idem.StatePending, Owner: "o", LeaseExpires: base.Add(time.Hour).In(kz), RequestID: "r", Expires: base.Add(48 * time.Hour).In(kz)}
	res, err := st.Claim(ctx, kept, base.In(kz))
	if err != nil {
		t.Fatal(err)
	}
	keptRec := res.Record
	const rounds = 5000
	for i := 0; i < rounds; i++ {
		zone := time.FixedZone("P", 3600) // a new location each time
		now := base.In(zone)
		id := keyspace.ID("acme", "createRun", fmt.Sprintf("k-loc-%024d", i%3))
		owner := fmt.Sprint("o", i)
		r := idem.Record{ID: id, Digest: "d", State: idem.StatePending, Owner: owner, LeaseExpires: now.Add(time.Minute), Expires: now.Add(time.Hour)}
		c, err := st.Claim(ctx, r, now)
		if err != nil || c.Decision != idem.Claimed {
			t.Fatalf("claim %d: %v %v", i, c.Decision, err)
		}
		if err := st.Renew(ctx, id, owner, now.Add(2*time.Minute), now); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := st.Delete(ctx, id, owner, now); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := st.Complete(ctx, c.Record, idem.Outcome{State: idem.StateCompleted, Response: &idem.Response{Status: 200}, Expires: now.Add(-time.Second)}, now); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(st.locs); n > 128 {
		t.Fatalf("the store keeps %d locations after %d records came and went (3 keys)", n, rounds)
	}
	got, ok, err := st.Get(ctx, keep, base)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if got != keptRec {
		t.Fatalf("a stored record's times after the locations were let go:\n%+v\nwant\n%+v", got, keptRec)
	}
}
