// Package fencetest is the conformance suite every fence.Store must pass:
// token monotonicity (sequential, concurrent, across expiry and deletion),
// the point-of-no-return condition (only the newest token passes, once; a
// stale token is rejected even under 32 racing executors), and the refusal
// to issue a token after a pass. The same suite runs against
// fence/memstore and, through internal/dynamotest, fence/dynamostore on
// DynamoDB Local, moto and dynalite.
package fencetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger/fence"
)

// Harness plugs a Store into the suite.
type Harness struct {
	// NewStore returns an empty store (or one no other test writes to).
	// Called once per subtest. Required.
	NewStore func(t *testing.T) fence.Store
	// Delete removes an effect's fence item (as TTL or the sweeper would).
	// Required: monotonicity across deletion is part of the contract.
	Delete func(t *testing.T, s fence.Store, effectID string)
}

var t0 = time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

func seed(t time.Time) uint64 { return uint64(t.UnixMilli()) << 10 }

// EffectID returns a fresh random effect id.
func EffectID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "acme:" + hex.EncodeToString(b)
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	if h.NewStore == nil || h.Delete == nil {
		t.Fatal("fencetest: Harness.NewStore and Harness.Delete are required")
	}
	ctx := context.Background()

	t.Run("TokensIncrease", func(t *testing.T) {
		s, id := h.NewStore(t), EffectID()
		var last uint64
		for i := 0; i < 5; i++ {
			tok, p, err := s.Acquire(ctx, id, seed(t0), t0, t0.Add(15*day))
			if err != nil || p != nil {
				t.Fatalf("Acquire %d: %v %v", i, p, err)
			}
			if tok <= last {
				t.Fatalf("token %d after %d: not increasing", tok, last)
			}
			last = tok
		}
		if last != seed(t0)+5 {
			t.Fatalf("last token %d, want seed+5", last)
		}
	})

	t.Run("ConcurrentTokensDistinct", func(t *testing.T) {
		s, id := h.NewStore(t), EffectID()
		const n = 32
		toks := make([]uint64, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				tok, _, err := s.Acquire(ctx, id, seed(t0), t0, t0.Add(15*day))
				if err != nil {
					t.Error(err)
				}
				toks[i] = tok
			})
		}
		wg.Wait()
		seen := map[uint64]bool{}
		for _, tok := range toks {
			if tok == 0 || seen[tok] {
				t.Fatalf("tokens not distinct: %v", toks)
			}
			seen[tok] = true
		}
	})

	t.Run("OnlyNewestTokenPasses", func(t *testing.T) {
		s, id := h.NewStore(t), EffectID()
		t1, _, _ := s.Acquire(ctx, id, seed(t0), t0, t0.Add(15*day))
		t2, _, err := s.Acquire(ctx, id, seed(t0), t0, t0.Add(15*day))
		if err != nil {
			t.Fatal(err)
		}
		ok, cur, err := s.Pass(ctx, id, t1, "eu-west-1", t0)
		if err != nil || ok {
			t.Fatalf("stale token passed: ok=%v err=%v", ok, err)
		}
		if cur == nil || cur.Token != t2 || cur.Passed != nil {
			t.Fatalf("current after stale pass = %+v", cur)
		}
		if ok, _, err = s.Pass(ctx, id, t2, "us-east-1", t0.Add(time.Second)); err != nil || !ok {
			t.Fatalf("newest token refused: ok=%v err=%v", ok, err)
		}
		// A retry of the same pass (e.g. after a lost response) is ok.
		if ok, _, err = s.Pass(ctx, id, t2, "us-east-1", t0.Add(time.Second)); err != nil || !ok {
			t.Fatalf("retried pass refused: ok=%v err=%v", ok, err)
		}
		it, err := s.Get(ctx, id)
		if err != nil || it == nil || it.Passed == nil {
			t.Fatalf("Get = %+v, %v", it, err)
		}
		if it.Passed.Token != t2 || it.Passed.Region != "us-east-1" || !it.Passed.At.Equal(t0.Add(time.Second)) {
			t.Fatalf("passed = %+v", it.Passed)
		}
	})

	t.Run("NoTokenAfterPass", func(t *testing.T) {
		s, id := h.NewStore(t), EffectID()
		tok, _, _ := s.Acquire(ctx, id, seed(t0), t0, t0.Add(15*day))
		if ok, _, err := s.Pass(ctx, id, tok, "eu-west-1", t0); err != nil || !ok {
			t.Fatalf("pass: %v %v", ok, err)
		}
		nt, p, err := s.Acquire(ctx, id, seed(t0), t0.Add(time.Minute), t0.Add(15*day))
		if err != nil {
			t.Fatal(err)
		}
		if nt != 0 || p == nil || p.Token != tok || p.Region != "eu-west-1" {
			t.Fatalf("Acquire after pass = %d, %+v; want no token and the passed one", nt, p)
		}
		// A later, higher token never existed, so the passed one still stands.
		if ok, _, _ := s.Pass(ctx, id, tok+1, "", t0); ok {
			t.Fatal("an unissued token passed")
		}
	})

	t.Run("PassOfUnknownEffectRefused", func(t *testing.T) {
		s := h.NewStore(t)
		if ok, cur, err := s.Pass(ctx, EffectID(), 7, "", t0); err != nil || ok || cur != nil {
			t.Fatalf("Pass on absent item = %v %+v %v", ok, cur, err)
		}
	})

	t.Run("RefusedAcquireKeepsThePass", func(t *testing.T) {
		// A refused Acquire extends the passed item's retention to its
		// expires (never shortens it), so a pass outlives the effect record
		// that each refused attempt keeps.
		s, id := h.NewStore(t), EffectID()
		tok, _, _ := s.Acquire(ctx, id, seed(t0), t0, t0.Add(15*day))
		if ok, _, _ := s.Pass(ctx, id, tok, "eu", t0); !ok {
			t.Fatal("pass refused")
		}
		at := t0.Add(13 * day)
		if nt, p, err := s.Acquire(ctx, id, seed(at), at, at.Add(15*day)); err != nil || p == nil || p.Token != tok || nt != 0 {
			t.Fatalf("Acquire after pass = %d, %+v, %v", nt, p, err)
		}
		if it, err := s.Get(ctx, id); err != nil || it == nil || !it.ExpiresAt.Equal(at.Add(15*day)) || it.Token != tok {
			t.Fatalf("item after a refused Acquire = %+v, %v; want the same token, retention to %v", it, err, at.Add(15*day))
		}
		later := t0.Add(16 * day)
		if _, p, err := s.Acquire(ctx, id, seed(later), later, t0.Add(20*day)); err != nil || p == nil || p.Token != tok {
			t.Fatalf("Acquire past the first retention = %+v, %v; want the pass of token %d", p, err, tok)
		}
		if it, _ := s.Get(ctx, id); it == nil || !it.ExpiresAt.Equal(at.Add(15*day)) {
			t.Fatalf("a refused Acquire shortened the retention: %+v", it)
		}
	})

	t.Run("KeepExtendsOnlyItsOwnToken", func(t *testing.T) {
		// Keep extends the retention of the item of the newest token (the
		// one that passed, once one did) to expires, never shortening it,
		// while the item is within its retention; it creates nothing, and
		// leaves another token's item and an ended item as they are.
		s, id := h.NewStore(t), EffectID()
		if ok, err := s.Keep(ctx, id, 7, t0, t0.Add(15*day)); err != nil || ok {
			t.Fatalf("Keep of an absent item = %v, %v; want refused", ok, err)
		}
		if it, err := s.Get(ctx, id); err != nil || it != nil {
			t.Fatalf("Keep of an absent item created %+v, %v", it, err)
		}
		tok, _, _ := s.Acquire(ctx, id, seed(t0), t0, t0.Add(15*day))
		expect := func(what string, exp time.Time, passed bool) {
			t.Helper()
			it, err := s.Get(ctx, id)
			if err != nil || it == nil || it.Token != tok || !it.ExpiresAt.Equal(exp) || (it.Passed != nil) != passed {
				t.Fatalf("item %s = %+v, %v; want token %d kept to %v (passed %v)", what, it, err, tok, exp, passed)
			}
		}
		if ok, err := s.Keep(ctx, id, tok, t0.Add(day), t0.Add(16*day)); err != nil || !ok {
			t.Fatalf("Keep of the issued token = %v, %v", ok, err)
		}
		expect("after Keep", t0.Add(16*day), false)
		if ok, err := s.Keep(ctx, id, tok, t0.Add(day), t0.Add(10*day)); err != nil || !ok {
			t.Fatalf("Keep to an earlier time = %v, %v; want ok (kept as long already)", ok, err)
		}
		expect("after a Keep to an earlier time", t0.Add(16*day), false)
		if ok, _, _ := s.Pass(ctx, id, tok, "eu", t0); !ok {
			t.Fatal("pass refused")
		}
		for range 2 { // the second is a retry whose first try applied
			if ok, err := s.Keep(ctx, id, tok, t0.Add(2*day), t0.Add(17*day)); err != nil || !ok {
				t.Fatalf("Keep of the passed token = %v, %v", ok, err)
			}
		}
		expect("after Keep of the pass", t0.Add(17*day), true)
		if ok, err := s.Keep(ctx, id, tok+1, t0.Add(2*day), t0.Add(20*day)); err != nil || ok {
			t.Fatalf("Keep of another token = %v, %v; want refused", ok, err)
		}
		expect("after Keep of another token", t0.Add(17*day), true)
		if ok, err := s.Keep(ctx, id, tok, t0.Add(18*day), t0.Add(30*day)); err != nil || ok {
			t.Fatalf("Keep past the item's retention = %v, %v; want refused", ok, err)
		}
		expect("after Keep past its retention", t0.Add(17*day), true)

		s2, id2 := h.NewStore(t), EffectID()
		old, _, _ := s2.Acquire(ctx, id2, seed(t0), t0, t0.Add(15*day))
		newer, _, _ := s2.Acquire(ctx, id2, seed(t0), t0, t0.Add(15*day))
		if ok, err := s2.Keep(ctx, id2, old, t0, t0.Add(20*day)); err != nil || ok {
			t.Fatalf("Keep of a superseded token = %v, %v; want refused", ok, err)
		}
		if it, _ := s2.Get(ctx, id2); it == nil || it.Token != newer || !it.ExpiresAt.Equal(t0.Add(15*day)) {
			t.Fatalf("Keep of a superseded token changed the item: %+v", it)
		}
	})

	t.Run("ReopenForgetsOnlyItsOwnPass", func(t *testing.T) {
		s, id := h.NewStore(t), EffectID()
		if ok, _, err := s.Reopen(ctx, id, 7); err != nil || !ok {
			t.Fatalf("Reopen of an absent item = %v, %v; want ok (nothing to forget)", ok, err)
		}
		early, _, _ := s.Acquire(ctx, id, seed(t0), t0, t0.Add(15*day))
		if ok, _, err := s.Reopen(ctx, id, early); err != nil || !ok {
			t.Fatalf("Reopen before any pass = %v, %v; want ok", ok, err)
		}
		// Reopened before it passed, the token is retired: the attempt
		// holding it may have stalled before its pass, and was settled.
		if ok, _, _ := s.Pass(ctx, id, early, "eu", t0); ok {
			t.Fatal("a token reopened before its pass passed")
		}
		tok, _, _ := s.Acquire(ctx, id, seed(t0), t0, t0.Add(15*day))
		if tok <= early {
			t.Fatalf("Acquire after a Reopen before any pass = %d, want above %d", tok, early)
		}
		if ok, _, err := s.Reopen(ctx, id, early); err != nil || !ok {
			t.Fatalf("Reopen of a retired token = %v, %v; want ok (nothing to forget)", ok, err)
		}
		if ok, _, _ := s.Pass(ctx, id, tok, "eu", t0); !ok {
			t.Fatal("pass refused (a Reopen of a retired token retired the newest)")
		}
		if ok, cur, err := s.Reopen(ctx, id, tok-1); err != nil || ok || cur == nil || cur.Passed == nil || cur.Passed.Token != tok {
			t.Fatalf("Reopen of another token = %v, %+v, %v; want refused, naming the pass of %d", ok, cur, err, tok)
		}
		for range 2 { // the second is a retry whose first try applied
			if ok, _, err := s.Reopen(ctx, id, tok); err != nil || !ok {
				t.Fatalf("Reopen of the passed token = %v, %v", ok, err)
			}
		}
		// A late pass of the reopened token (the retry of a pass whose
		// answer was lost, landing after the reopen) is refused at once,
		// not only after the next Acquire: else a retry of the Reopen would
		// erase it unseen and the next attempt fire a second time.
		if ok, _, _ := s.Pass(ctx, id, tok, "eu", t0); ok {
			t.Fatal("the reopened token passed again before the next Acquire")
		}
		if ok, _, err := s.Reopen(ctx, id, tok); err != nil || !ok {
			t.Fatalf("a retried Reopen after a refused late pass = %v, %v; want ok", ok, err)
		}
		nt, p, err := s.Acquire(ctx, id, seed(t0), t0, t0.Add(15*day))
		if err != nil || p != nil || nt <= tok {
			t.Fatalf("Acquire after Reopen = %d, %+v, %v; want a token above %d", nt, p, err, tok)
		}
		if ok, _, _ := s.Pass(ctx, id, tok, "eu", t0); ok {
			t.Fatal("the reopened token passed again")
		}
		if ok, _, _ := s.Pass(ctx, id, nt, "eu", t0); !ok {
			t.Fatal("the token after Reopen was refused")
		}
	})

	t.Run("ExpiredPassReissues", func(t *testing.T) {
		s, id := h.NewStore(t), EffectID()
		tok, _, _ := s.Acquire(ctx, id, seed(t0), t0, t0.Add(15*day))
		if ok, _, _ := s.Pass(ctx, id, tok, "", t0); !ok {
			t.Fatal("pass refused")
		}
		// Past retention the item counts as absent, but tokens keep rising.
		later := t0.Add(16 * day)
		nt, p, err := s.Acquire(ctx, id, seed(later), later, later.Add(15*day))
		if err != nil || p != nil || nt <= tok {
			t.Fatalf("Acquire past retention = %d, %+v, %v (old token %d)", nt, p, err, tok)
		}
		if ok, _, _ := s.Pass(ctx, id, tok, "", later); ok {
			t.Fatal("the old generation's token passed again")
		}
		if ok, _, _ := s.Pass(ctx, id, nt, "", later); !ok {
			t.Fatal("the new token was refused")
		}
	})

	t.Run("ReopenOnceRetiresThePassedToken", func(t *testing.T) {
		// One Reopen of the passed token, not retried, already retires it:
		// the late pass of that token (a retry whose answer was lost) is
		// refused before any retry of the Reopen or the next Acquire.
		s, id := h.NewStore(t), EffectID()
		tok, _, _ := s.Acquire(ctx, id, seed(t0), t0, t0.Add(15*day))
		if ok, _, _ := s.Pass(ctx, id, tok, "eu", t0); !ok {
			t.Fatal("pass refused")
		}
		if ok, _, err := s.Reopen(ctx, id, tok); err != nil || !ok {
			t.Fatalf("Reopen of the passed token = %v, %v", ok, err)
		}
		if ok, _, _ := s.Pass(ctx, id, tok, "eu", t0); ok {
			t.Fatal("the token passed again after one Reopen")
		}
		if it, err := s.Get(ctx, id); err != nil || it == nil || it.Passed != nil {
			t.Fatalf("item after one Reopen and a late pass = %+v, %v; want no pass", it, err)
		}
	})

	t.Run("RetentionEndsAtItsInstant", func(t *testing.T) {
		// An item's retention ends at ExpiresAt itself: at that instant a
		// pass no longer blocks a new token, and Keep no longer extends it
		// (DynamoDB's conditions: expiresAtMs <= :now reissues,
		// expiresAtMs > :now keeps).
		s, id := h.NewStore(t), EffectID()
		end := t0.Add(15 * day)
		tok, _, _ := s.Acquire(ctx, id, seed(t0), t0, end)
		if ok, _, _ := s.Pass(ctx, id, tok, "eu", t0); !ok {
			t.Fatal("pass refused")
		}
		if ok, err := s.Keep(ctx, id, tok, end, end.Add(day)); err != nil || ok {
			t.Fatalf("Keep at the instant retention ends = %v, %v; want refused", ok, err)
		}
		if it, _ := s.Get(ctx, id); it == nil || !it.ExpiresAt.Equal(end) {
			t.Fatalf("Keep at the instant retention ends changed the item: %+v", it)
		}
		if _, p, _ := s.Acquire(ctx, id, seed(t0), end.Add(-time.Millisecond), end); p == nil {
			t.Fatal("Acquire a millisecond before retention ends issued a token past the pass")
		}
		nt, p, err := s.Acquire(ctx, id, seed(t0), end, end.Add(15*day))
		if err != nil || p != nil || nt <= tok {
			t.Fatalf("Acquire at the instant retention ends = %d, %+v, %v; want a token above %d", nt, p, err, tok)
		}
	})

	t.Run("GetReturnsACopy", func(t *testing.T) {
		// The item Get returns is the caller's: changing it changes
		// nothing stored (as with any store behind a network).
		s, id := h.NewStore(t), EffectID()
		tok, _, _ := s.Acquire(ctx, id, seed(t0), t0, t0.Add(15*day))
		if ok, _, _ := s.Pass(ctx, id, tok, "eu", t0); !ok {
			t.Fatal("pass refused")
		}
		it, err := s.Get(ctx, id)
		if err != nil || it == nil || it.Passed == nil {
			t.Fatalf("Get = %+v, %v", it, err)
		}
		it.Token, it.ExpiresAt, it.Passed.Token, it.Passed.Region = 0, t0, 0, "us"
		if again, _ := s.Get(ctx, id); again == nil || again.Token != tok || !again.ExpiresAt.Equal(t0.Add(15*day)) || again.Passed == nil || again.Passed.Token != tok || again.Passed.Region != "eu" {
			t.Fatalf("the item after its caller changed a Get's answer: %+v", again)
		}
	})

	t.Run("MonotonicAcrossDeletion", func(t *testing.T) {
		s, id := h.NewStore(t), EffectID()
		var old uint64
		for range 3 {
			old, _, _ = s.Acquire(ctx, id, seed(t0), t0, t0.Add(15*day))
		}
		h.Delete(t, s, id)
		later := t0.Add(16 * day)
		nt, _, err := s.Acquire(ctx, id, seed(later), later, later.Add(15*day))
		if err != nil || nt <= old {
			t.Fatalf("token after deletion %d <= %d (%v)", nt, old, err)
		}
		if ok, _, _ := s.Pass(ctx, id, old, "", later); ok {
			t.Fatal("a token of the deleted generation passed")
		}
	})

	t.Run("RacingExecutorsOnePass", func(t *testing.T) {
		// 32 executors each take a token and try the point of no return:
		// exactly one passes (the newest token at the time its pass lands
		// is always held by someone who then passes, unless a pass already
		// happened), every other one is rejected.
		s, id := h.NewStore(t), EffectID()
		const n = 32
		var passed, stale, refused atomic.Int32
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				tok, p, err := s.Acquire(ctx, id, seed(t0), t0, t0.Add(15*day))
				if err != nil {
					t.Error(err)
					return
				}
				if p != nil {
					refused.Add(1)
					return
				}
				ok, _, err := s.Pass(ctx, id, tok, "", t0)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					passed.Add(1)
				} else {
					stale.Add(1)
				}
			})
		}
		wg.Wait()
		if passed.Load() != 1 || passed.Load()+stale.Load()+refused.Load() != n {
			t.Fatalf("passed=%d stale=%d refused=%d; want exactly one pass", passed.Load(), stale.Load(), refused.Load())
		}
	})
}
