// Allocation counts mean nothing under the race detector: this pin is
// built without it only (the allocs check step of make test runs it).

//go:build !race

package memstore_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/idem/memstore"
)

// TestClaimAndCompletionAllocations: the store keeps a record as one
// allocation. A claim makes it, with room for a completion like the last
// one, which then writes into it: a claim and the completion of a short
// response make one allocation between them (two before: the record and
// the response body's copy), and the record reads back whole.
func TestClaimAndCompletionAllocations(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const runs = 1000
	ids := make([]string, runs+1)
	for i := range ids {
		ids[i] = keyspace.ID("acme", "createRun", fmt.Sprintf("k-inplace-%020d", i))
	}
	resp := &idem.Response{Status: 201, Headers: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(`{"runId":"run_1"}`)}
	n := 0
	allocs := testing.AllocsPerRun(runs, func() {
		rec := idem.Record{ID: ids[n], Digest: "d1", State: idem.StatePending, Owner: "o1", LeaseExpires: now.Add(time.Minute), RequestID: "req-1", Expires: now.Add(time.Hour)}
		n++
		res, err := st.Claim(ctx, rec, now)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Complete(ctx, res.Record, idem.Outcome{State: idem.StateCompleted, Response: resp, Expires: now.Add(time.Hour)}, now); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("a claim and its completion: %v allocations, want 1", allocs)
	}
	for _, id := range ids[:n] {
		got, ok, err := st.Get(ctx, id, now)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		want := idem.Record{ID: id, Digest: "d1", State: idem.StateCompleted, Owner: "o1", Attempt: 1, RequestID: "req-1", Expires: now.Add(time.Hour), Response: resp}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n%+v\nwant\n%+v", id, got, want)
		}
	}
}
