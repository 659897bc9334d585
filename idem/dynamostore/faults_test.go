package dynamostore_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/aws/smithy-go"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestSDKRetriesNeverExecuteTwice: throttled attempts (never sent) and
// attempts whose write was applied but whose response was lost are retried
// by the SDK; each store operation still has exactly one effect, and a claim
// that meets its own applied write is the winner, not a duplicate.
func TestSDKRetriesNeverExecuteTwice(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		now := v.now

		t.Run("ThrottledClaim", func(t *testing.T) {
			id := newID()
			v.f.FailNext("PutItem", 2, dynamotest.Throttle())
			v.cnt.Reset()
			rec := v.claim(t, pending(id, "o1", now), now, idem.Claimed)
			if rec.Attempt != 1 || v.cnt.Total() != 1 || v.f.Fired() == 0 || v.f.Pending() != 0 {
				t.Fatalf("attempt %d, trips %d, pending faults %d", rec.Attempt, v.cnt.Total(), v.f.Pending())
			}
			v.claim(t, pending(id, "o2", now), now, idem.Exists)
		})

		t.Run("ClaimAppliedResponseLost", func(t *testing.T) {
			id := newID()
			v.f.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
			rec := v.claim(t, pending(id, "o1", now), now, idem.Claimed)
			if rec.Owner != "o1" || rec.Attempt != 1 || rec.RequestID != "req-o1" {
				t.Fatalf("own claim: %+v", rec)
			}
			// Exactly one winner: everyone else sees o1's claim.
			other := v.claim(t, pending(id, "o2", now), now, idem.Exists)
			if other.Owner != "o1" {
				t.Fatalf("record owner %s", other.Owner)
			}
			if err := v.s.Complete(ctxT(t), v.rec(id, "o1"), done("one", now), now); err != nil {
				t.Fatal(err)
			}
		})

		t.Run("ClaimAppliedAllResponsesLost", func(t *testing.T) {
			// The claim is applied but every attempt's response is lost: the
			// caller gets an error and does not run. Its record stays pending
			// (the crash-between-steps case) until the lease ends; then a
			// retry reclaims it, attempt 2.
			id := newID()
			v.f.FailNextAfterSend("PutItem", 3, dynamotest.ResponseLost())
			if _, err := v.s.Claim(ctxT(t), pending(id, "o1", now), now); err == nil {
				t.Fatal("claim with every response lost succeeded")
			}
			v.claim(t, pending(id, "o2", now), now, idem.Exists)
			at := now.Add(lease)
			rec := v.claim(t, pending(id, "o3", at), at, idem.Reclaimed)
			if rec.Attempt != 2 {
				t.Fatalf("attempt %d", rec.Attempt)
			}
		})

		t.Run("ReclaimAppliedResponseLost", func(t *testing.T) {
			id := newID()
			v.claim(t, pending(id, "o1", now), now, idem.Claimed)
			if err := v.s.Release(ctxT(t), v.rec(id, "o1"), now); err != nil {
				t.Fatal(err)
			}
			v.f.FailNextAfterSend("UpdateItem", 1, dynamotest.ResponseLost())
			rec := v.claim(t, pending(id, "o2", now), now, idem.Reclaimed)
			if rec.Owner != "o2" || rec.Attempt != 2 || rec.RequestID != "req-o1" {
				t.Fatalf("own reclaim: %+v", rec)
			}
			got, _, _ := v.s.Get(ctxT(t), id, now)
			if got.Attempt != 2 || got.Owner != "o2" {
				t.Fatalf("stored: %+v", got)
			}
		})

		t.Run("LeaseReclaimAppliedResponseLost", func(t *testing.T) {
			// A reclaim of a pending record whose lease expired, applied
			// but its answer lost: the SDK's retry fails the condition
			// against the reclaim's own write. It is still the lease
			// reclaim it was (LeaseExpired, which the Guard counts in
			// openwop.idempotency.reclaims_total), as when the first answer
			// arrives; before, it was reported as a reclaim without it.
			id := newID()
			v.claim(t, pending(id, "o1", now), now, idem.Claimed)
			at := now.Add(lease)
			for _, lost := range []bool{false, true} {
				if lost {
					id = newID()
					v.claim(t, pending(id, "o1", now), now, idem.Claimed)
					v.f.FailNextAfterSend("UpdateItem", 1, dynamotest.ResponseLost())
				}
				res, err := v.s.Claim(ctxT(t), pending(id, "o2", at), at)
				if err != nil || res.Decision != idem.Reclaimed || res.Record.Owner != "o2" || res.Record.Attempt != 2 || !res.LeaseExpired {
					t.Fatalf("answer lost %v: %+v %v; want reclaimed by o2, attempt 2, its lease expired", lost, res, err)
				}
				if lost && (v.f.Pending() != 0 || v.f.Fired() == 0) {
					t.Fatalf("the loss was not injected: pending %d", v.f.Pending())
				}
			}
		})

		t.Run("CompleteAppliedResponseLost", func(t *testing.T) {
			for name, size := range map[string]int{"inline": 100, "chunked": 1 << 20} {
				t.Run(name, func(t *testing.T) {
					id := newID()
					v.claim(t, pending(id, "o1", now), now, idem.Claimed)
					body := make([]byte, size)
					_, _ = rand.Read(body)
					out := done("", now)
					out.Response.Body = body
					v.f.PassNext("PutItem", chunksOf(size)) // the chunk items go through
					v.f.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
					if err := v.s.Complete(ctxT(t), v.rec(id, "o1"), out, now); err != nil {
						t.Fatalf("completion whose first response was lost: %v", err)
					}
					rec := v.claim(t, pending(id, "o2", now), now, idem.Exists)
					if !bytes.Equal(rec.Response.Body, body) {
						t.Fatal("replay differs")
					}
				})
			}
		})

		t.Run("ReleaseAndDeleteAppliedResponseLost", func(t *testing.T) {
			id := newID()
			v.claim(t, pending(id, "o1", now), now, idem.Claimed)
			v.f.FailNextAfterSend("UpdateItem", 1, dynamotest.ResponseLost())
			rel := v.rec(id, "o1")
			rel.RawBodySHA256 = strings.Repeat("c", 64) // the released attempt's, recognised on the retry
			if err := v.s.Release(ctxT(t), rel, now); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if got, _, _ := v.s.Get(ctxT(t), id, now); got.State != idem.StateRetryableFailure || got.RawBodySHA256 != rel.RawBodySHA256 {
				t.Fatalf("released: %+v", got)
			}
			// A genuine second Release (one request) is fenced.
			if err := v.s.Release(ctxT(t), rel, now); !errors.Is(err, idem.ErrFenced) {
				t.Fatalf("second Release: %v", err)
			}
			v.claim(t, pending(id, "o2", now), now, idem.Reclaimed)
			v.f.FailNextAfterSend("DeleteItem", 1, dynamotest.ResponseLost())
			if err := v.s.Delete(ctxT(t), id, "o2", now); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if _, ok, _ := v.s.Get(ctxT(t), id, now); ok {
				t.Fatal("record still there")
			}
			if err := v.s.Delete(ctxT(t), id, "o2", now); !errors.Is(err, idem.ErrFenced) {
				t.Fatalf("second Delete: %v", err)
			}
		})

		t.Run("StaleOwnerRetryIsStillFenced", func(t *testing.T) {
			// A retried write of a stale owner must not mistake another
			// owner's record for its own.
			id := newID()
			v.claim(t, pending(id, "slow", now), now, idem.Claimed)
			at := now.Add(lease)
			v.claim(t, pending(id, "fast", at), at, idem.Reclaimed)
			v.f.FailNext("PutItem", 1, dynamotest.Throttle())
			if err := v.s.Complete(ctxT(t), v.rec(id, "slow"), done("slow", at), at); !errors.Is(err, idem.ErrFenced) {
				t.Fatalf("stale Complete: %v", err)
			}
			v.f.FailNextAfterSend("UpdateItem", 1, dynamotest.ResponseLost())
			if err := v.s.Release(ctxT(t), v.rec(id, "slow"), at); !errors.Is(err, idem.ErrFenced) {
				t.Fatalf("stale Release: %v", err)
			}
			got, _, _ := v.s.Get(ctxT(t), id, at)
			if got.Owner != "fast" || got.State != idem.StatePending {
				t.Fatalf("record: %+v", got)
			}
		})

		t.Run("CompleteFailsBeforeSend", func(t *testing.T) {
			// A non-retryable failure before sending leaves the claim
			// pending and owned; the owner can complete afterwards.
			id := newID()
			v.claim(t, pending(id, "o1", now), now, idem.Claimed)
			boom := &smithy.GenericAPIError{Code: "ValidationException", Message: "injected"}
			v.f.FailNext("PutItem", 1, boom)
			if err := v.s.Complete(ctxT(t), v.rec(id, "o1"), done("x", now), now); !errors.As(err, new(*smithy.GenericAPIError)) {
				t.Fatalf("want the injected error, got %v", err)
			}
			got, _, _ := v.s.Get(ctxT(t), id, now)
			if got.State != idem.StatePending {
				t.Fatalf("record changed: %+v", got)
			}
			if err := v.s.Complete(ctxT(t), v.rec(id, "o1"), done("x", now), now); err != nil {
				t.Fatal(err)
			}
		})

		t.Run("CrashAfterChunksBeforeCompletion", func(t *testing.T) {
			// Chunks written, completion never sent (process dies): the
			// record stays pending, the lease expires, a retry reclaims and
			// completes with its own chunks; the replay is the retry's body.
			id := newID()
			v.claim(t, pending(id, "o1", now), now, idem.Claimed)
			first := make([]byte, 1<<20)
			_, _ = rand.Read(first)
			out := done("", now)
			out.Response.Body = first
			v.f.PassNext("PutItem", chunksOf(len(first))) // the chunk items are written
			v.f.FailNext("PutItem", 1, errors.New("crash"))
			if err := v.s.Complete(ctxT(t), v.rec(id, "o1"), out, now); err == nil {
				t.Fatal("completion did not fail")
			}
			at := now.Add(lease)
			v.claim(t, pending(id, "o2", at), at, idem.Reclaimed)
			second := make([]byte, 1<<20)
			_, _ = rand.Read(second)
			out.Response.Body = second
			if err := v.s.Complete(ctxT(t), v.rec(id, "o2"), out, at); err != nil {
				t.Fatal(err)
			}
			if err := v.s.Complete(ctxT(t), v.rec(id, "o1"), done("late", at), at); !errors.Is(err, idem.ErrFenced) {
				t.Fatalf("late first owner: %v", err)
			}
			rec := v.claim(t, pending(id, "o3", at), at, idem.Exists)
			if !bytes.Equal(rec.Response.Body, second) {
				t.Fatal("replay is not the winner's body")
			}
		})
	})
}

// TestFencedChunkedCompletionLeavesNoChunks: a stale owner's large response
// is written as chunks before its fenced completion fails; the chunks are
// then deleted.
func TestFencedChunkedCompletionLeavesNoChunks(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		now := v.now
		id := newID()
		v.claim(t, pending(id, "slow", now), now, idem.Claimed)
		at := now.Add(lease)
		v.claim(t, pending(id, "fast", at), at, idem.Reclaimed)
		body := make([]byte, 3<<20)
		_, _ = rand.Read(body)
		out := done("", at)
		out.Response.Body = body
		if err := v.s.Complete(ctxT(t), v.rec(id, "slow"), out, at); !errors.Is(err, idem.ErrFenced) {
			t.Fatalf("stale chunked Complete: %v", err)
		}
		if n := v.chunkItems(t); n != 0 {
			t.Fatalf("%d chunk items left behind", n)
		}
	})
}

// TestNoTransactions: where the endpoint has no transactions (dynalite), a
// completion with business writes fails with a typed error and writes
// nothing; where it has them, they commit atomically and a lost response is
// not a second commit.
func TestTransactionalCompletion(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		v := setup(t, e)
		biz := e.CreateTable(t, "RunsTable")
		now := v.now
		id := newID()
		v.claim(t, pending(id, "o1", now), now, idem.Claimed)
		out := done("created", now)
		out.Writes = []any{businessPut(biz, "run-1")}
		if !e.Caps.Transactions {
			err := v.s.Complete(ctxT(t), v.rec(id, "o1"), out, now)
			if !errors.Is(err, dynamostore.ErrNoTransactions) || !errors.Is(err, idem.ErrUnsupportedWrite) {
				t.Fatalf("want ErrNoTransactions, got %v", err)
			}
			if businessExists(t, v.c, biz, "run-1") {
				t.Fatal("business write applied without a transaction")
			}
			if got, _, _ := v.s.Get(ctxT(t), id, now); got.State != idem.StatePending {
				t.Fatalf("record changed: %+v", got)
			}
			return
		}
		v.f.FailNextAfterSend("TransactWriteItems", 1, dynamotest.ResponseLost())
		w := businessPut(biz, "run-1")
		out.Writes = []any{&w}
		if err := v.s.Complete(ctxT(t), v.rec(id, "o1"), out, now); err != nil {
			t.Fatalf("transactional completion whose response was lost: %v", err)
		}
		if !businessExists(t, v.c, biz, "run-1") {
			t.Fatal("business write missing")
		}
		rec := v.claim(t, pending(id, "o2", now), now, idem.Exists)
		if string(rec.Response.Body) != "created" {
			t.Fatalf("replay %q", rec.Response.Body)
		}
	})
}

// chunksOf is the number of chunk items an incompressible body of size
// bytes is stored in (0: inline, within the record's 1 KB): 350 KB each,
// the blob a few bytes longer than the body. Sizes in these tests are far
// from a chunk boundary and from the inline limit.
func chunksOf(size int) int {
	const chunk = 350 << 10
	if size < 512 {
		return 0
	}
	return (size + 64 + chunk - 1) / chunk
}
