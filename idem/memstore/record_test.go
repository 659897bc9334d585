package memstore_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/idem/memstore"
)

// TestTimesReadBackAsWritten: a record's times are read back exactly as
// they were written (==, location included: UTC, time.Local, a fixed
// zone, a zero time, the far future and before 1970), after a claim, a
// renewal and a completion.
func TestTimesReadBackAsWritten(t *testing.T) {
	ctx := context.Background()
	zone := time.FixedZone("X", 5*3600+30*60)
	for i, base := range []time.Time{
		time.Date(2026, 1, 2, 3, 4, 5, 6_000_000, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 7_000_000, time.Local),
		time.Date(2026, 1, 2, 3, 4, 5, 8_000_000, zone),
		time.Date(1950, 6, 7, 8, 9, 10, 11_000_000, zone),
	} {
		for _, expires := range []time.Time{{}, base.Add(24 * time.Hour), time.Date(9999, 12, 31, 23, 59, 59, 999_000_000, base.Location())} {
			st := memstore.New()
			id := keyspace.ID("acme", "createRun", fmt.Sprintf("k-times-%020d", i))
			rec := idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: "o1", LeaseExpires: base.Add(time.Minute), RequestID: "req-1", Expires: expires}
			res, err := st.Claim(ctx, rec, base)
			if err != nil || res.Decision != idem.Claimed {
				t.Fatalf("claim: %v %v", res.Decision, err)
			}
			got, ok, err := st.Get(ctx, id, base)
			if err != nil || !ok {
				t.Fatal(ok, err)
			}
			if got != res.Record {
				t.Fatalf("read after claim (%v, expires %v):\n%+v\nwant\n%+v", base.Location(), expires, got, res.Record)
			}
			want := res.Record
			want.LeaseExpires, want.Renewed = base.Add(3*time.Minute), base.Add(time.Second)
			if err := st.Renew(ctx, id, "o1", want.LeaseExpires, want.Renewed); err != nil {
				t.Fatal(err)
			}
			if got, _, _ := st.Get(ctx, id, base); got != want {
				t.Fatalf("read after renewal:\n%+v\nwant\n%+v", got, want)
			}
			done := expires
			if err := st.Complete(ctx, res.Record, idem.Outcome{State: idem.StateCompleted, Response: &idem.Response{Status: 201}, Expires: done}, base); err != nil {
				t.Fatal(err)
			}
			got, _, _ = st.Get(ctx, id, base)
			if got.Expires != done || !got.LeaseExpires.IsZero() || !got.Renewed.IsZero() || got.State != idem.StateCompleted {
				t.Fatalf("read after completion: %+v, want expires %v", got, done)
			}
		}
	}
}

// TestReadsKeepTheirValuesAcrossWrites: a record read before its
// completion writes into the room at the record's end (a claim after a
// completion like it has that room), before a renewal changes its head,
// and before a release stores it anew, reads the same afterwards: the
// strings a read hands out are views of bytes that are never written
// again.
func TestReadsKeepTheirValuesAcrossWrites(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	resp := func() *idem.Response {
		return &idem.Response{Status: 201, Headers: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(`{"runId":"run_1"}`)}
	}
	clone := func(r idem.Record) idem.Record {
		c := r
		c.ID, c.Digest, c.State, c.Owner = strings.Clone(r.ID), strings.Clone(r.Digest), idem.State(strings.Clone(string(r.State))), strings.Clone(r.Owner)
		c.RequestID, c.RawBodySHA256 = strings.Clone(r.RequestID), strings.Clone(r.RawBodySHA256)
		return c
	}
	var reads, snaps []idem.Record
	read := func(id string) {
		r, ok, err := st.Get(ctx, id, now)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		reads, snaps = append(reads, r), append(snaps, clone(r))
	}
	for i := 0; i < 3; i++ {
		id := keyspace.ID("acme", "createRun", fmt.Sprintf("k-reads-%020d", i))
		rec := idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: "o1", LeaseExpires: now.Add(time.Minute), RequestID: "req-1", Expires: now.Add(time.Hour)}
		res, err := st.Claim(ctx, rec, now)
		if err != nil {
			t.Fatal(err)
		}
		read(id)
		if err := st.Renew(ctx, id, "o1", now.Add(2*time.Minute), now); err != nil {
			t.Fatal(err)
		}
		read(id)
		if i == 2 {
			rel := res.Record
			rel.RawBodySHA256 = "ab"
			if err := st.Release(ctx, rel, now); err != nil {
				t.Fatal(err)
			}
			read(id)
			continue
		}
		if err := st.Complete(ctx, res.Record, idem.Outcome{State: idem.StateCompleted, Response: resp(), Expires: now.Add(time.Hour)}, now); err != nil {
			t.Fatal(err)
		}
		read(id)
	}
	for i := range reads {
		if !reflect.DeepEqual(reads[i], snaps[i]) {
			t.Fatalf("read %d changed:\n%+v\nwas\n%+v", i, reads[i], snaps[i])
		}
	}
}
