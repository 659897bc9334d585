package memstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/idem/internal/lazyraw"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/idem/memstore"
)

// notTheClaims is the raw body hash lazyStore puts in the record it claims:
// under the lazy handshake the store must take the claim's from the
// lazyraw.Source, never from the record.
const notTheClaims = "not-the-claims-raw-body-hash"

// lazyStore is the memory store with every Claim made as a Guard makes it
// once the store has shown that it takes the raw body's hash lazily
// (lazyraw.Call with Lazy set). Its Claim fails when the store asked for
// the hash more than once, wrote a record without asking, or did not
// answer the handshake as itself.
type lazyStore struct{ *memstore.Store }

// rawSource is a lazyraw.Source that counts the calls.
type rawSource struct {
	value string
	calls atomic.Int32
}

func (r *rawSource) RawBodySHA256() string {
	r.calls.Add(1)
	return r.value
}

// claimLazy claims rec as a Guard does under the lazy handshake: the hash
// rec carries is given by a Source instead, which it returns.
func claimLazy(st *memstore.Store, ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, *rawSource, error) {
	src := &rawSource{value: rec.RawBodySHA256}
	rec.RawBodySHA256 = notTheClaims
	call := &lazyraw.Call{Lazy: true, Raw: src}
	res, err := st.Claim(context.WithValue(ctx, lazyraw.Key{}, call), rec, now)
	if err == nil && !call.AnsweredBy(st) {
		err = fmt.Errorf("the store did not answer the handshake as itself")
	}
	return res, src, err
}

func (l lazyStore) Claim(ctx context.Context, rec idem.Record, now time.Time) (idem.ClaimResult, error) {
	res, src, err := claimLazy(l.Store, ctx, rec, now)
	if err != nil {
		return res, err
	}
	switch n := src.calls.Load(); {
	case n > 1:
		return res, fmt.Errorf("asked for the raw body hash %d times, want at most once", n)
	case n == 0 && res.Decision != idem.Exists:
		return res, fmt.Errorf("wrote a record (%v) without asking for the raw body hash", res.Decision)
	}
	return res, nil
}

// TestConformanceLazyRaw: the whole conformance suite again with every
// Claim made under the lazy raw-hash handshake the Guard uses with this
// store: the decisions and the stored records are Claim's, the hash is
// asked for at most once and only to write it.
func TestConformanceLazyRaw(t *testing.T) {
	h := harness()
	h.NewStore = func(t *testing.T) idem.Store { return lazyStore{memstore.New()} }
	h.TxWrites.Exists = func(t *testing.T, s idem.Store, name string) bool {
		_, ok := s.(lazyStore).Item(name)
		return ok
	}
	idemtest.Run(t, h)
}

// TestLazyRawAsksOnlyToWrite: under the lazy handshake a first claim and a
// reclaim (retryable failure, expired lease) ask for the raw body hash
// once and store it; a claim answered Exists (a live pending record,
// another digest, a replay of a final record, a mismatch) does not ask.
func TestLazyRawAsksOnlyToWrite(t *testing.T) {
	st := memstore.New()
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	raw := func(owner string) string {
		sum := sha256.Sum256([]byte("raw body of " + owner))
		return hex.EncodeToString(sum[:])
	}
	const digestA, digestB = "test-recipe-v1:sha256:a", "test-recipe-v1:sha256:b"
	pending := func(id, digest, owner string, at time.Time) idem.Record {
		return idem.Record{ID: id, Digest: digest, State: idem.StatePending, Owner: owner, LeaseExpires: at.Add(30 * time.Second),
			RequestID: "req-" + owner, RawBodySHA256: raw(owner), Expires: at.Add(time.Hour)}
	}
	claim := func(rec idem.Record, at time.Time, want idem.Decision, wantAsks int32) idem.Record {
		t.Helper()
		res, src, err := claimLazy(st, ctx, rec, at)
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		if res.Decision != want {
			t.Fatalf("decision %v, want %v", res.Decision, want)
		}
		if n := src.calls.Load(); n != wantAsks {
			t.Fatalf("%v: asked for the raw body hash %d times, want %d", res.Decision, n, wantAsks)
		}
		return res.Record
	}
	id := keyspace.ID("tenant", "POST /runs", "key-1")
	if got := claim(pending(id, digestA, "owner-1", now), now, idem.Claimed, 1); got.RawBodySHA256 != raw("owner-1") {
		t.Fatalf("claimed: raw %q", got.RawBodySHA256)
	}
	claim(pending(id, digestA, "owner-2", now), now, idem.Exists, 0) // pending, lease live
	claim(pending(id, digestB, "owner-2", now), now, idem.Exists, 0) // another digest
	if err := st.Release(ctx, id, "owner-1", now); err != nil {
		t.Fatal(err)
	}
	rec := claim(pending(id, digestA, "owner-3", now), now, idem.Reclaimed, 1)
	if rec.RawBodySHA256 != raw("owner-3") {
		t.Fatalf("reclaimed: raw %q", rec.RawBodySHA256)
	}
	if err := st.Complete(ctx, rec, idem.Outcome{State: idem.StateCompleted, Response: &idem.Response{Status: 201, Body: []byte(`{}`)}, Expires: now.Add(time.Hour)}, now); err != nil {
		t.Fatal(err)
	}
	if got := claim(pending(id, digestA, "owner-4", now), now, idem.Exists, 0); got.RawBodySHA256 != raw("owner-3") || got.State != idem.StateCompleted {
		t.Fatalf("replay: %+v", got)
	}
	claim(pending(id, digestB, "owner-4", now), now, idem.Exists, 0) // a mismatch
	id2 := keyspace.ID("tenant", "POST /runs", "key-2")
	claim(pending(id2, digestA, "owner-5", now), now, idem.Claimed, 1)
	later := now.Add(31 * time.Second)
	if got := claim(pending(id2, digestA, "owner-6", later), later, idem.Reclaimed, 1); got.RawBodySHA256 != raw("owner-6") {
		t.Fatalf("lease reclaim: raw %q", got.RawBodySHA256)
	}
	if n := st.Calls()["Claim"]; n != 8 {
		t.Fatalf("Claim calls counted %d, want 8 (one round trip each)", n)
	}
}
