package memstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/idem/memstore"
)

// shapes are final responses of unusual shapes: an empty and a nil body,
// a binary body (every byte value), an empty header map, a header with no
// value list, an empty one, an empty name, 0 to 9 values per header
// (across the copy's own room for values), a thousand headers, and the
// not-kept outcome.
func shapes() map[string]*idem.Response {
	bin := make([]byte, 512)
	for i := range bin {
		bin[i] = byte(i)
	}
	many := map[string][]string{}
	for i := 0; i < 1000; i++ {
		many[fmt.Sprintf("X-H-%d", i)] = []string{strings.Repeat("v", i%7)}
	}
	counts := map[string][]string{}
	for n := 0; n < 10; n++ {
		vs := make([]string, n)
		for i := range vs {
			vs[i] = fmt.Sprintf("%d-%d", n, i)
		}
		counts[fmt.Sprintf("X-N%d", n)] = vs
	}
	return map[string]*idem.Response{
		"nil body":        {Status: 204},
		"empty body":      {Status: 200, Body: []byte{}},
		"binary body":     {Status: 200, Body: bin, Headers: map[string][]string{"Content-Type": {"application/octet-stream"}}},
		"empty headers":   {Status: 200, Headers: map[string][]string{}, Body: []byte("x")},
		"odd headers":     {Status: 409, Headers: map[string][]string{"": {"no name"}, "X-Nil": nil, "X-Empty": {""}, "X-Two-Empty": {"", ""}}},
		"value counts":    {Status: 201, Headers: counts, Body: []byte(`{}`)},
		"many headers":    {Status: 200, Headers: many, Body: bytes.Repeat([]byte("b"), 3000)},
		"not kept":        {Status: 201, NotKept: 7 << 20},
		"negative status": {Status: -1, Body: []byte{0}},
	}
}

// equalResponse compares as the store keeps a response: a nil and an
// empty body are one, as are a nil and an empty value list.
func equalResponse(a, b *idem.Response) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Status != b.Status || a.NotKept != b.NotKept || !bytes.Equal(a.Body, b.Body) || (a.Headers == nil) != (b.Headers == nil) || len(a.Headers) != len(b.Headers) {
		return false
	}
	for k, v := range a.Headers {
		w, ok := b.Headers[k]
		if !ok || len(v) != len(w) {
			return false
		}
		for i := range v {
			if v[i] != w[i] {
				return false
			}
		}
	}
	return true
}

func cloneResponse(r *idem.Response) *idem.Response {
	if r == nil {
		return nil
	}
	c := *r
	c.Body = bytes.Clone(r.Body)
	if r.Headers != nil {
		c.Headers = map[string][]string{}
		for k, v := range r.Headers {
			c.Headers[strings.Clone(k)] = append([]string(nil), v...)
		}
	}
	return &c
}

func cloneRecord(r idem.Record) idem.Record {
	c := r
	c.ID, c.Digest, c.State, c.Owner = strings.Clone(r.ID), strings.Clone(r.Digest), idem.State(strings.Clone(string(r.State))), strings.Clone(r.Owner)
	c.RequestID, c.RawBodySHA256 = strings.Clone(r.RequestID), strings.Clone(r.RawBodySHA256)
	c.Response = cloneResponse(r.Response)
	return c
}

// TestResponseShapesRoundTrip: every response shape, completed in place
// (the claim's room holds it) and into a new record (it does not), with
// and without a raw body hash, in both final states, reads back the same
// from Get and from a duplicate claim, and records read before the
// completion are unchanged by it.
func TestResponseShapesRoundTrip(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for name, resp := range shapes() {
		for _, state := range []idem.State{idem.StateCompleted, idem.StateTerminalFailure} {
			for _, raw := range []string{"", strings.Repeat("ab", 32)} {
				for _, warm := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/%s/raw=%t/warm=%t", name, state, raw != "", warm), func(t *testing.T) {
						st := memstore.New()
						if warm { // a completion like this one sized the room claims get
							wid := keyspace.ID("acme", "createRun", "k-shape-warm-000000000000000")
							w, _ := st.Claim(ctx, idem.Record{ID: wid, Digest: "d", State: idem.StatePending, Owner: "o", LeaseExpires: now.Add(time.Minute)}, now)
							w.Record.RawBodySHA256 = raw
							if err := st.Complete(ctx, w.Record, idem.Outcome{State: state, Response: resp}, now); err != nil {
								t.Fatal(err)
							}
						}
						id := keyspace.ID("acme", "createRun", "k-shape-0000000000000000000001")
						rec := idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: "o1", LeaseExpires: now.Add(time.Minute), RequestID: "req-1", Expires: now.Add(time.Hour)}
						res, err := st.Claim(ctx, rec, now)
						if err != nil || res.Decision != idem.Claimed {
							t.Fatalf("claim: %v %v", res.Decision, err)
						}
						before, _, _ := st.Get(ctx, id, now)
						snap := cloneRecord(before)
						claim := res.Record
						claim.RawBodySHA256 = raw
						in := cloneResponse(resp)
						if err := st.Complete(ctx, claim, idem.Outcome{State: state, Response: in, Expires: now.Add(2 * time.Hour)}, now); err != nil {
							t.Fatal(err)
						}
						spoilAny(in)
						if !reflect.DeepEqual(before, snap) {
							t.Fatalf("a read before the completion changed:\n%+v\nwas\n%+v", before, snap)
						}
						g, ok, err := st.Get(ctx, id, now)
						if err != nil || !ok {
							t.Fatal(ok, err)
						}
						d, err := st.Claim(ctx, rec, now)
						if err != nil || d.Decision != idem.Exists {
							t.Fatalf("duplicate: %v %v", d.Decision, err)
						}
						for what, r := range map[string]idem.Record{"read": g, "duplicate": d.Record} {
							if r.State != state || r.RawBodySHA256 != raw || r.Attempt != 1 || r.Owner != "o1" || r.RequestID != "req-1" || r.Digest != "d1" || r.ID != id || !r.Expires.Equal(now.Add(2*time.Hour)) || !r.LeaseExpires.IsZero() || !r.Renewed.IsZero() {
								t.Fatalf("%s: %+v", what, r)
							}
							if !equalResponse(r.Response, resp) {
								t.Fatalf("%s's response:\n%+v\nwant\n%+v", what, r.Response, resp)
							}
						}
						gs := cloneRecord(g)
						spoilAny(d.Record.Response)
						if g2, _, _ := st.Get(ctx, id, now); !equalResponse(g2.Response, resp) || !reflect.DeepEqual(g, gs) {
							t.Fatalf("a read changed after a duplicate spoiled its copy")
						}
					})
				}
			}
		}
	}
}

// TestRetryableCompletionAndRelease: a retryable completion and a release
// keep no response and store the ending attempt's raw body hash (removed
// when it has none); the takeover carries it and the next attempt's
// completion replaces it; the previous owner is fenced on every write,
// and reads taken along the way never change.
func TestRetryableCompletionAndRelease(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := memstore.New()
	id := keyspace.ID("acme", "createRun", "k-retry-0000000000000000000001")
	rec := func(owner string) idem.Record {
		return idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: owner, LeaseExpires: now.Add(time.Minute), RequestID: "req-" + owner, Expires: now.Add(time.Hour)}
	}
	var reads, snaps []idem.Record
	read := func() idem.Record {
		r, ok, err := st.Get(ctx, id, now)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		reads, snaps = append(reads, r), append(snaps, cloneRecord(r))
		return r
	}
	hashA, hashB := strings.Repeat("a", 64), strings.Repeat("b", 64)
	c1, _ := st.Claim(ctx, rec("o1"), now)
	read()
	cl := c1.Record
	cl.RawBodySHA256 = hashA
	// A retryable completion with a response: the response is not kept.
	if err := st.Complete(ctx, cl, idem.Outcome{State: idem.StateRetryableFailure, Response: &idem.Response{Status: 503, Body: []byte("busy")}, Expires: now.Add(time.Hour)}, now); err != nil {
		t.Fatal(err)
	}
	if r := read(); r.State != idem.StateRetryableFailure || r.Response != nil || r.RawBodySHA256 != hashA {
		t.Fatalf("after a retryable completion: %+v", r)
	}
	c2, _ := st.Claim(ctx, rec("o2"), now)
	if c2.Decision != idem.Reclaimed || c2.Record.Attempt != 2 || c2.Record.RawBodySHA256 != hashA || c2.Record.RequestID != "req-o1" {
		t.Fatalf("takeover: %v %+v", c2.Decision, c2.Record)
	}
	read()
	for name, err := range map[string]error{
		"complete": st.Complete(ctx, c1.Record, idem.Outcome{State: idem.StateCompleted, Response: &idem.Response{Status: 200}}, now),
		"release":  st.Release(ctx, c1.Record, now),
		"renew":    st.Renew(ctx, id, "o1", now.Add(time.Hour), now),
		"delete":   st.Delete(ctx, id, "o1", now),
	} {
		if !errors.Is(err, idem.ErrFenced) {
			t.Fatalf("the previous owner's %s: %v, want ErrFenced", name, err)
		}
	}
	// Release without a hash removes the previous attempt's.
	rel := c2.Record
	rel.RawBodySHA256 = "" // this attempt's caller set none
	if err := st.Release(ctx, rel, now); err != nil {
		t.Fatal(err)
	}
	if r := read(); r.State != idem.StateRetryableFailure || r.RawBodySHA256 != "" || r.Attempt != 2 {
		t.Fatalf("after release: %+v", r)
	}
	c3, _ := st.Claim(ctx, rec("o3"), now)
	if c3.Decision != idem.Reclaimed || c3.Record.Attempt != 3 || c3.Record.RawBodySHA256 != "" {
		t.Fatalf("second takeover: %v %+v", c3.Decision, c3.Record)
	}
	// The lease lapses: a fourth owner takes over a pending record.
	c4, _ := st.Claim(ctx, rec("o4"), now.Add(2*time.Minute))
	if c4.Decision != idem.Reclaimed || !c4.LeaseExpired || c4.Record.Attempt != 4 {
		t.Fatalf("takeover after the lease: %v %+v", c4.Decision, c4.Record)
	}
	if err := st.Complete(ctx, c3.Record, idem.Outcome{State: idem.StateCompleted, Response: &idem.Response{Status: 200}}, now.Add(2*time.Minute)); !errors.Is(err, idem.ErrFenced) {
		t.Fatalf("the lapsed owner's completion: %v", err)
	}
	cl4 := c4.Record
	cl4.RawBodySHA256 = hashB
	if err := st.Complete(ctx, cl4, idem.Outcome{State: idem.StateCompleted, Response: &idem.Response{Status: 201, Body: []byte("done")}, Expires: now.Add(time.Hour)}, now.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if r := read(); r.State != idem.StateCompleted || r.RawBodySHA256 != hashB || string(r.Response.Body) != "done" || r.Owner != "o4" {
		t.Fatalf("after the last completion: %+v", r)
	}
	for i := range reads {
		if !reflect.DeepEqual(reads[i], snaps[i]) {
			t.Fatalf("read %d changed:\n%+v\nwas\n%+v", i, reads[i], snaps[i])
		}
	}
}

// TestExpiry: a record is live until its Expires (exclusive); at and
// after it, reads miss it, every owner write is fenced, and a claim
// starts afresh (attempt 1, no raw body hash, no response); a completion
// whose retention has already ended leaves a record no read finds.
func TestExpiry(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := memstore.New()
	id := keyspace.ID("acme", "createRun", "k-expiry-000000000000000000001")
	rec := idem.Record{ID: id, Digest: "d1", State: idem.StatePending, Owner: "o1", LeaseExpires: now.Add(time.Hour), Expires: now.Add(time.Minute)}
	c1, _ := st.Claim(ctx, rec, now)
	at := now.Add(time.Minute)
	if _, ok, _ := st.Get(ctx, id, at.Add(-time.Millisecond)); !ok {
		t.Fatal("a record read before its expiry is missing")
	}
	if _, ok, _ := st.Get(ctx, id, at); ok {
		t.Fatal("a record read at its expiry is found")
	}
	for name, err := range map[string]error{
		"complete": st.Complete(ctx, c1.Record, idem.Outcome{State: idem.StateCompleted, Response: &idem.Response{Status: 200}}, at),
		"release":  st.Release(ctx, c1.Record, at),
		"renew":    st.Renew(ctx, id, "o1", at.Add(time.Hour), at),
		"delete":   st.Delete(ctx, id, "o1", at),
	} {
		if !errors.Is(err, idem.ErrFenced) {
			t.Fatalf("%s of an expired record: %v, want ErrFenced", name, err)
		}
	}
	r2 := rec
	r2.Owner, r2.Expires = "o2", at.Add(time.Hour)
	c2, _ := st.Claim(ctx, r2, at)
	if c2.Decision != idem.Claimed || c2.Record.Attempt != 1 {
		t.Fatalf("claim after expiry: %v %+v", c2.Decision, c2.Record)
	}
	cl := c2.Record
	cl.RawBodySHA256 = "ff"
	if err := st.Complete(ctx, cl, idem.Outcome{State: idem.StateCompleted, Response: &idem.Response{Status: 200, Body: []byte("x")}, Expires: at}, at); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := st.Get(ctx, id, at); ok {
		t.Fatal("a completion whose retention had ended is read")
	}
	c3, _ := st.Claim(ctx, r2, at)
	if c3.Decision != idem.Claimed || c3.Record.Attempt != 1 || c3.Record.RawBodySHA256 != "" || c3.Record.Response != nil {
		t.Fatalf("claim after an expired completion: %v %+v", c3.Decision, c3.Record)
	}
}

// TestConcurrentKeys: goroutines claim, renew, release, complete, read
// and delete records of the same and different keys at once (run with
// -race); every record and response a goroutine was handed reads the
// same at the end as when it was handed, and every completed record reads
// back its own response.
// With zones, every write's times carry a location of their own, so the
// store lets go of unused locations while others read.
func TestConcurrentKeys(t *testing.T) {
	t.Run("utc", func(t *testing.T) { concurrentKeys(t, false) })
	t.Run("zones", func(t *testing.T) { concurrentKeys(t, true) })
}

func concurrentKeys(t *testing.T, zones bool) {
	ctx := context.Background()
	utc := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	st := memstore.New()
	shared := keyspace.ID("acme", "createRun", "k-conc-shared-000000000000000")
	respFor := func(g, i int) *idem.Response {
		return &idem.Response{Status: 200 + i%3, Body: bytes.Repeat([]byte{byte(g), byte(i)}, 1+(g*31+i)%400), Headers: map[string][]string{"X-G": {fmt.Sprint(g)}, "X-I": {fmt.Sprint(i), "", "z"}}}
	}
	const workers, rounds = 8, 150
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			fail := func(format string, a ...any) { errs <- fmt.Errorf("worker %d: "+format, append([]any{g}, a...)...) }
			var held, snaps []idem.Record
			hold := func(r idem.Record) { held, snaps = append(held, r), append(snaps, cloneRecord(r)) }
			for i := 0; i < rounds; i++ {
				id := keyspace.ID("acme", "createRun", fmt.Sprintf("k-conc-%02d-%03d-000000000000", g, i%20))
				if i%5 == 0 {
					id = shared
				}
				owner := fmt.Sprintf("o-%d-%d", g, i)
				now := utc
				if zones {
					now = utc.In(time.FixedZone("Z", 3600*(g-4)))
				}
				res, err := st.Claim(ctx, idem.Record{ID: id, Digest: "d", State: idem.StatePending, Owner: owner, LeaseExpires: now.Add(time.Minute), RequestID: owner, Expires: now.Add(time.Hour)}, now)
				if err != nil {
					fail("claim: %v", err)
					return
				}
				hold(res.Record)
				if r, ok, _ := st.Get(ctx, shared, now); ok {
					hold(r)
				}
				if res.Decision == idem.Exists {
					continue
				}
				if err := st.Renew(ctx, id, owner, now.Add(2*time.Minute), now); err != nil {
					fail("renew: %v", err)
					return
				}
				cl := res.Record
				cl.RawBodySHA256 = owner
				switch i % 4 {
				case 0:
					if err := st.Release(ctx, cl, now); err != nil {
						fail("release: %v", err)
						return
					}
				case 1:
					if err := st.Complete(ctx, cl, idem.Outcome{State: idem.StateRetryableFailure, Expires: now.Add(time.Hour)}, now); err != nil {
						fail("retryable: %v", err)
						return
					}
				default:
					want := respFor(g, i)
					if err := st.Complete(ctx, cl, idem.Outcome{State: idem.StateCompleted, Response: want, Expires: now.Add(time.Hour)}, now); err != nil {
						fail("complete: %v", err)
						return
					}
					spoilAny(want)
					r, ok, _ := st.Get(ctx, id, now)
					if !ok || r.Owner != owner || r.RawBodySHA256 != owner || !equalResponse(r.Response, respFor(g, i)) {
						fail("completed record %s reads %+v", id, r)
						return
					}
					hold(r)
					if id != shared && i%3 == 0 {
						// a new record under a deleted key
						if err := st.Delete(ctx, id, owner, now); !errors.Is(err, idem.ErrFenced) {
							fail("delete of a completed record: %v", err)
							return
						}
					}
				}
			}
			for i := range held {
				if !reflect.DeepEqual(held[i], snaps[i]) {
					fail("record %d changed:\n%+v\nwas\n%+v", i, held[i], snaps[i])
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// spoilAny spoils r as spoil does, a response without headers included.
func spoilAny(r *idem.Response) {
	if r != nil && r.Headers == nil {
		r.Headers = map[string][]string{}
	}
	spoil(r)
}
