package memstore_test

import (
	"context"
	"fmt"
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
