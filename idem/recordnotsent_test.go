package idem_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
)

// unsentStore fails every completion whose response is kept, as a store
// that keeps a large response beside the record does when that part's
// write is throttled past its retries: an outage, before any write of the
// record (or of its Transact writes) is sent (idem.ErrRecordNotSent).
// With notKeptDown it fails the not-kept completion too, as an outage
// whose write was sent; with releaseDown every Release. It counts the
// calls.
type unsentStore struct {
	idem.Store
	mu                       sync.Mutex
	notKeptDown, releaseDown bool
	pass                     bool                    // every call goes through
	stall                    bool                    // the response's part is not written before the call's deadline
	during                   func(claim idem.Record) // called in the failing completion
	unsent, gets, releases   int
}

func (s *unsentStore) Complete(ctx context.Context, claim idem.Record, out idem.Outcome, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := out.Response; !s.pass && r != nil && r.NotKept == 0 {
		s.unsent++
		if s.during != nil {
			s.during(claim)
		}
		if s.stall {
			<-ctx.Done()
			return fmt.Errorf("%w: %w: chunk PutItem: %w", idem.ErrRecordNotSent, idem.ErrStoreUnavailable, ctx.Err())
		}
		return fmt.Errorf("%w: %w: chunk PutItem: throttled", idem.ErrRecordNotSent, idem.ErrStoreUnavailable)
	}
	if s.notKeptDown {
		return fmt.Errorf("PutItem: throttled: %w", idem.ErrStoreUnavailable)
	}
	return s.Store.Complete(ctx, claim, out, now)
}

func (s *unsentStore) Release(ctx context.Context, claim idem.Record, now time.Time) error {
	s.mu.Lock()
	s.releases++
	down := s.releaseDown
	s.mu.Unlock()
	if down {
		return fmt.Errorf("UpdateItem: throttled: %w", idem.ErrStoreUnavailable)
	}
	return s.Store.Release(ctx, claim, now)
}

func (s *unsentStore) Get(ctx context.Context, id string, now time.Time) (idem.Record, bool, error) {
	s.mu.Lock()
	s.gets++
	s.mu.Unlock()
	return s.Store.Get(ctx, id, now)
}

// TestCompletionNotSentRecordsItNotKept: a completion without
// idem.Transact writes that the store failed before its write of the
// record was sent (idem.ErrRecordNotSent beside the outage: the chunk
// items of a large response throttled past the retries) leaves a record
// that is still this claim's; the Guard records the not-kept outcome in
// its place (one small write), so the handler runs once: its caller gets
// the true response, Guard.Once its value, and every duplicate 410
// idemkit.response_not_kept (idem.ErrNotKept), before and after the
// lease, never 409 in flight and then a second run. Nothing is read back
// (nothing of the failed write can have landed). When the not-kept write
// fails as an outage too, it is 503 with the record left claimed, as
// before. With Transact writes nothing committed: the claim is released
// (503, Guard.Once idem.ErrNotCommitted), the retry runs the handler and
// commits its write once, and a release that fails is not followed by a
// read back either. A reclaim while the part was failing fences the
// not-kept write: 409 taken over, the new owner's claim untouched.
func TestCompletionNotSentRecordsItNotKept(t *testing.T) {
	body := `{"id":"r-1"}`
	t.Run("HTTPAPI", func(t *testing.T) {
		s := &unsentStore{}
		e := newEnv(t, func(cfg *idem.Config) { s.Store = cfg.Store; cfg.Store = s })
		h := &handler{status: 201, body: body}
		ev := v2event("POST", "POST /runs", testKey, `{"a":1}`)
		if first := e.call(h, ev); first.StatusCode != 201 || first.Body != body || headerOf(first.Headers).Get("OpenWOP-Idempotent-Replay") != "" {
			t.Fatalf("first: %d %s; want the handler's own 201", first.StatusCode, first.Body)
		}
		if s.unsent != 1 || s.gets != 0 || s.releases != 0 {
			t.Fatalf("%d completions not sent, %d reads, %d releases; want 1, 0, 0", s.unsent, s.gets, s.releases)
		}
		for i := range 2 {
			if i == 1 {
				e.clock.Advance(2 * e.guard.Config().Lease)
			}
			r := e.call(h, ev)
			wantNotKept(t, r.StatusCode, headerOf(r.Headers), []byte(r.Body), 201, len(body))
		}
		if h.Calls() != 1 {
			t.Fatalf("handler ran %d times, want once", h.Calls())
		}
		if logs := e.logs.String(); !strings.Contains(logs, "could not write the response, recorded as not kept") || !strings.Contains(logs, "chunk PutItem") {
			t.Fatalf("the failed write and the not-kept outcome are not logged:\n%s", logs)
		}
	})

	t.Run("Once", func(t *testing.T) {
		s := &unsentStore{}
		e := newEnv(t, func(cfg *idem.Config) { s.Store = cfg.Store; cfg.Store = s })
		runs := 0
		w := idem.Work{Key: testKey, Operation: "charge", Payload: []byte(`{"a":1}`),
			Run: func(context.Context) ([]byte, error) { runs++; return []byte(`{"charged":true}`), nil }}
		val, ran, err := e.guard.Once(context.Background(), w)
		if err != nil || !ran || string(val) != `{"charged":true}` {
			t.Fatalf("Once = %q, ran %t, %v; want the value, ran, no error", val, ran, err)
		}
		e.clock.Advance(2 * e.guard.Config().Lease)
		val, ran, err = e.guard.Once(context.Background(), w)
		if !errors.Is(err, idem.ErrNotKept) || ran || runs != 1 {
			t.Fatalf("Once again = %q, ran %t, %v (runs %d); want ErrNotKept, not run", val, ran, err, runs)
		}
	})

	// The part's writes stalled until the call's deadline (the store
	// stalling, not refusing): the not-kept write gets a deadline of its
	// own (RED_TEAM 420), not the one already passed, which would fail it
	// unsent and leave the record claimed for a second run.
	t.Run("stalled past the store timeout", func(t *testing.T) {
		s := &unsentStore{stall: true}
		e := newEnv(t, func(cfg *idem.Config) { s.Store = cfg.Store; cfg.Store = s; cfg.StoreTimeout = time.Second })
		h := &handler{status: 201, body: body}
		ev := v2event("POST", "POST /runs", testKey, `{"a":1}`)
		if first := e.call(h, ev); first.StatusCode != 201 || first.Body != body {
			t.Fatalf("first: %d %s; want the handler's own 201", first.StatusCode, first.Body)
		}
		e.clock.Advance(2 * e.guard.Config().Lease)
		r := e.call(h, ev)
		wantNotKept(t, r.StatusCode, headerOf(r.Headers), []byte(r.Body), 201, len(body))
		if h.Calls() != 1 {
			t.Fatalf("handler ran %d times, want once", h.Calls())
		}
	})

	// Another invocation reclaimed the record while the completion's part
	// was failing (its lease ended): the not-kept write is fenced like
	// every completion, and the first caller is told its claim was
	// taken over, never written over the new owner.
	t.Run("reclaimed meanwhile", func(t *testing.T) {
		s := &unsentStore{}
		var reclaimed string
		s.during = func(claim idem.Record) {
			reclaimed = claim.ID
			at := claim.LeaseExpires.Add(time.Second)
			rec := idem.Record{ID: claim.ID, Digest: claim.Digest, Owner: "other-owner", State: idem.StatePending,
				LeaseExpires: at.Add(time.Minute), RequestID: "req-other", Expires: at.Add(time.Hour)}
			if res, err := s.Store.Claim(context.Background(), rec, at); err != nil || res.Decision != idem.Reclaimed {
				t.Errorf("reclaim: %v %v", res.Decision, err)
			}
		}
		e := newEnv(t, func(cfg *idem.Config) { s.Store = cfg.Store; cfg.Store = s })
		h := &handler{status: 201, body: body}
		first := e.call(h, v2event("POST", "POST /runs", testKey, `{"a":1}`))
		if first.StatusCode != 409 || !strings.Contains(first.Body, "idempotency_in_flight") {
			t.Fatalf("first: %d %s; want 409 in flight (taken over)", first.StatusCode, first.Body)
		}
		if rec, found, err := s.Store.Get(context.Background(), reclaimed, e.clock.Now()); err != nil || !found ||
			rec.State != idem.StatePending || rec.Owner != "other-owner" {
			t.Fatalf("record after the fenced not-kept write: %+v, found %t, %v; want the new owner's pending claim", rec, found, err)
		}
	})

	t.Run("not-kept write down too", func(t *testing.T) {
		s := &unsentStore{notKeptDown: true}
		e := newEnv(t, func(cfg *idem.Config) { s.Store = cfg.Store; cfg.Store = s })
		h := &handler{status: 201, body: body}
		ev := v2event("POST", "POST /runs", testKey, `{"a":1}`)
		if first := e.call(h, ev); first.StatusCode != 503 || !strings.Contains(first.Body, idem.CodeStoreUnavailable) {
			t.Fatalf("first: %d %s; want 503", first.StatusCode, first.Body)
		}
		if r := e.call(h, ev); r.StatusCode != 409 || !strings.Contains(r.Body, "idempotency_in_flight") || h.Calls() != 1 {
			t.Fatalf("retry: %d %s (runs %d); want 409 in flight", r.StatusCode, r.Body, h.Calls())
		}
	})

	for _, releaseDown := range []bool{false, true} {
		t.Run(fmt.Sprintf("Transact/release down %t", releaseDown), func(t *testing.T) {
			s := &unsentStore{releaseDown: releaseDown}
			e := newEnv(t, func(cfg *idem.Config) { s.Store = cfg.Store; cfg.Store = s })
			ms := s.Store.(*memstore.Store)
			h := &handler{status: 201, body: body, before: func(ctx context.Context) {
				_ = idem.Transact(ctx, memstore.Write{Key: "order-1", Value: []byte("o")})
			}}
			ev := v2event("POST", "POST /runs", testKey, `{"a":1}`)
			if first := e.call(h, ev); first.StatusCode != 503 {
				t.Fatalf("first: %d %s; want 503", first.StatusCode, first.Body)
			}
			if _, committed := ms.Item("order-1"); committed || s.gets != 0 || s.releases != 1 {
				t.Fatalf("write committed %t, %d reads, %d releases; want none, none, one", committed, s.gets, s.releases)
			}
			w := idem.Work{Key: "other-key-1", Operation: "charge", Payload: []byte(`{"a":1}`),
				Run: func(ctx context.Context) ([]byte, error) {
					return []byte(`{}`), idem.Transact(ctx, memstore.Write{Key: "charge-1", Value: []byte("c")})
				}}
			if _, _, err := e.guard.Once(context.Background(), w); !errors.Is(err, idem.ErrNotCommitted) || !errors.Is(err, idem.ErrStoreUnavailable) {
				t.Fatalf("Once: %v; want ErrNotCommitted wrapping ErrStoreUnavailable", err)
			}
			if releaseDown {
				return // the record stays claimed until its lease ends; nothing committed
			}
			s.mu.Lock()
			s.pass = true
			s.mu.Unlock()
			for i := range 2 {
				r := e.call(h, ev)
				if r.StatusCode != 201 || r.Body != body || (headerOf(r.Headers).Get("OpenWOP-Idempotent-Replay") == "true") != (i == 1) {
					t.Fatalf("retry %d: %d %s; want the handler's 201, then its replay", i, r.StatusCode, r.Body)
				}
			}
			if _, committed := ms.Item("order-1"); !committed || h.Calls() != 2 {
				t.Fatalf("write committed %t, handler ran %d times; want committed, twice (the first committed nothing)", committed, h.Calls())
			}
		})
	}
}
