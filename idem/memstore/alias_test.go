package memstore_test

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/idem/memstore"
)

// aliasResponse is a final response with more header values than the
// store keeps in its own room (so some value lists are slices of their
// own and some share that room) and an empty value.
func aliasResponse() *idem.Response {
	return &idem.Response{Status: 201, Body: []byte(`{"runId":"run_1","n":[1,2,3]}`), Headers: map[string][]string{
		"Content-Type": {"application/json"},
		"Link":         {"<a>; rel=x", "<b>; rel=y", "<c>; rel=z"},
		"X-Empty":      {""},
		"X-Multi":      {"a", "b"},
		"Location":     {"/runs/run_1"},
		"Vary":         {"Accept", "Accept-Encoding", "Origin", "Idempotency-Key", "Authorization"},
	}}
}

// spoil changes everything a caller can reach through r: the status,
// every byte of the body, every value, appends over truncated value
// lists (a store handing out value slices that share one backing array
// would see a neighbour change), and the header map itself.
func spoil(r *idem.Response) {
	if r == nil {
		return
	}
	r.Status = 500
	for i := range r.Body {
		r.Body[i] = 'X'
	}
	r.Body = append(r.Body[:0], "spoiled"...)
	for name, vs := range r.Headers {
		for i := range vs {
			vs[i] = "spoiled"
		}
		if len(vs) > 0 {
			r.Headers[name] = append(vs[:1], "more", "and more", "still more")
		}
	}
	r.Headers["X-Added"] = []string{"added"}
	delete(r.Headers, "Content-Type")
}

// TestReturnedRecordsNeverChange: the memory store keeps its records by
// pointer and changes them in place, so every record and response it
// hands out must be a copy of its own. A record returned by Claim or Get
// does not change when the store later renews, releases, reclaims or
// completes its own; a caller that spoils everything it was handed
// (response status, body bytes, header values, appends over truncated
// value lists, the header map) changes neither a later read nor a replay,
// and within one copy no header's value list shares another's array;
// a completion refused by its write's condition, or fenced, leaves the
// record exactly as it was.
func TestReturnedRecordsNeverChange(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	id := keyspace.ID("acme", "createRun", "k-alias-0000000000000000000001")
	rec := idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: "o1", LeaseExpires: now.Add(time.Minute), RequestID: "req-1", Expires: now.Add(24 * time.Hour)}
	got, err := st.Claim(ctx, rec, now)
	if err != nil || got.Decision != idem.Claimed {
		t.Fatalf("claim: %v %v", got.Decision, err)
	}
	claimed := got.Record
	snapClaimed := claimed
	g1, ok, err := st.Get(ctx, id, now)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	snapG1 := g1
	if err := st.Renew(ctx, id, "o1", now.Add(2*time.Minute), now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	// Release with another raw body hash, then reclaim, as a retry does.
	rel := claimed
	rel.RawBodySHA256 = "aa"
	if err := st.Release(ctx, rel, now.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	g2, _, _ := st.Get(ctx, id, now.Add(2*time.Second))
	snapG2 := g2
	rec2 := rec
	rec2.Owner = "o2"
	got, err = st.Claim(ctx, rec2, now.Add(3*time.Second))
	if err != nil || got.Decision != idem.Reclaimed {
		t.Fatalf("reclaim: %v %v", got.Decision, err)
	}
	reclaimed := got.Record

	// The reclaimed attempt completes, writing item-b (the target of the
	// conflicting completion below).
	if err := st.Complete(ctx, reclaimed, idem.Outcome{State: idem.StateCompleted, Response: aliasResponse(), Expires: now.Add(48 * time.Hour), Writes: []any{memstore.Write{Key: "item-b", Value: []byte("first")}}}, now.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	// A second record's completion is refused by its write's condition
	// (item-b exists) and changes nothing, its other write included.
	id2 := keyspace.ID("acme", "createRun", "k-alias-0000000000000000000002")
	r2 := rec
	r2.ID = id2
	if _, err := st.Claim(ctx, r2, now); err != nil {
		t.Fatal(err)
	}
	c2, _, _ := st.Get(ctx, id2, now)
	conflict := []any{memstore.Write{Key: "item-a", Value: []byte("v")}, memstore.Write{Key: "item-b", Value: []byte("v"), IfAbsent: true}}
	if err := st.Complete(ctx, c2, idem.Outcome{State: idem.StateCompleted, Response: aliasResponse(), Expires: now.Add(48 * time.Hour), Writes: conflict}, now); !errors.Is(err, idem.ErrWriteConflict) {
		t.Fatalf("conflicting completion: %v", err)
	}
	if after, _, _ := st.Get(ctx, id2, now); !reflect.DeepEqual(after, c2) {
		t.Fatalf("a completion refused by its write's condition changed the record:\n%+v\nwant\n%+v", after, c2)
	}
	if _, ok := st.Item("item-a"); ok {
		t.Fatal("a refused completion applied its other write")
	}
	// A fenced completion (the record's owner is another) changes nothing.
	stale := c2
	stale.Owner = "o-stale"
	if err := st.Complete(ctx, stale, idem.Outcome{State: idem.StateCompleted, Response: aliasResponse(), Expires: now.Add(48 * time.Hour)}, now); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("fenced completion: %v", err)
	}
	if after, _, _ := st.Get(ctx, id2, now); !reflect.DeepEqual(after, c2) {
		t.Fatalf("a fenced completion changed the record:\n%+v\nwant\n%+v", after, c2)
	}

	// Every record handed out before the store changed its own is as it
	// was handed out.
	for name, c := range map[string][2]idem.Record{"claim": {claimed, snapClaimed}, "first read": {g1, snapG1}, "read after release": {g2, snapG2}} {
		if !reflect.DeepEqual(c[0], c[1]) {
			t.Fatalf("the %s's record changed after the store wrote its own:\n%+v\nwas\n%+v", name, c[0], c[1])
		}
	}

	// Replays: spoil every response handed out, concurrently with other
	// readers and with completions of other records (whose kept responses
	// are written while these are read); each read stays byte-exact.
	want := aliasResponse()
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				var r idem.Record
				if g%2 == 0 {
					r, _, _ = st.Get(ctx, id, now.Add(4*time.Second))
				} else {
					res, err := st.Claim(ctx, idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: "dup", LeaseExpires: now.Add(time.Hour), Expires: now.Add(time.Hour)}, now.Add(4*time.Second))
					if err != nil || res.Decision != idem.Exists {
						errs <- "duplicate claim: " + res.Decision.String()
						return
					}
					r = res.Record
				}
				if !sameResponse(r.Response, want) {
					errs <- "a replay changed"
					return
				}
				spoil(r.Response)
			}
		}(g)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 100; i++ {
			kid := keyspace.ID("acme", "createRun", "k-alias-other-"+string(rune('a'+i%26))+string(rune('a'+i/26)))
			r := rec
			r.ID = kid
			cr, err := st.Claim(ctx, r, now)
			if err != nil {
				errs <- err.Error()
				return
			}
			resp := aliasResponse()
			if err := st.Complete(ctx, cr.Record, idem.Outcome{State: idem.StateCompleted, Response: resp, Expires: now.Add(time.Hour)}, now); err != nil {
				errs <- err.Error()
				return
			}
			spoil(resp)
			g, _, _ := st.Get(ctx, kid, now)
			if !sameResponse(g.Response, aliasResponse()) {
				errs <- "a completed response changed with its caller's copy"
				return
			}
			spoil(g.Response)
		}
	}()
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	// Within one copy handed out, each header's value list is its own:
	// appending to one (as the Guard adds its headers to a replay) changes
	// no other header of that copy.
	for name := range want.Headers {
		for _, read := range []func() *idem.Response{
			func() *idem.Response { r, _, _ := st.Get(ctx, id, now.Add(5*time.Second)); return r.Response },
			func() *idem.Response {
				res, _ := st.Claim(ctx, idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: "dup", LeaseExpires: now.Add(time.Hour), Expires: now.Add(time.Hour)}, now.Add(5*time.Second))
				return res.Record.Response
			},
		} {
			r := read()
			r.Headers[name] = append(r.Headers[name], "appended")
			for other, vs := range want.Headers {
				if other != name && !reflect.DeepEqual(r.Headers[other], vs) {
					t.Fatalf("appending to %s changed %s in the same copy: %q, want %q", name, other, r.Headers[other], vs)
				}
			}
		}
	}
	final, _, _ := st.Get(ctx, id, now.Add(5*time.Second))
	if !sameResponse(final.Response, want) {
		t.Fatalf("the kept response after every caller spoiled its copy: %+v", final.Response)
	}
}

func sameResponse(a, b *idem.Response) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Status == b.Status && bytes.Equal(a.Body, b.Body) && reflect.DeepEqual(a.Headers, b.Headers)
}
