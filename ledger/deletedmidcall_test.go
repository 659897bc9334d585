package ledger_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// replicaStore is one region's replica of a reconciled-records effects
// table (a global table whose other region's TTL deletes replicate here):
// Delete is that deletion arriving, WriteBack the auditor's write-back of
// the deleted record (a put conditional on there being no item). With
// writeBackOnCreate, the write-back lands just before the next Create.
type replicaStore struct {
	mu                sync.Mutex
	inner             ledger.Store
	saved             *ledger.Record
	writeBackOnCreate bool
	now               func() time.Time
	// created, if set, receives each record a Create wrote.
	created chan *ledger.Record
}

func (s *replicaStore) store() ledger.Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inner
}

// Delete removes key's record, as the other region's replicated TTL
// deletion does, keeping its image (the stream's old image).
func (s *replicaStore) Delete(t *testing.T, key string) {
	rec, err := s.store().Get(context.Background(), key)
	if err != nil || rec == nil {
		t.Fatalf("get before the deletion: %v, %v", rec, err)
	}
	s.mu.Lock()
	s.saved, s.inner = rec, memstore.New()
	s.mu.Unlock()
}

// WriteBack is the auditor's write-back of the deleted image: written only
// where there is no item.
func (s *replicaStore) WriteBack(t *testing.T) {
	if _, _, err := s.store().Create(context.Background(), s.saved, s.now()); err != nil {
		t.Fatalf("write-back: %v", err)
	}
}

func (s *replicaStore) Create(ctx context.Context, rec *ledger.Record, now time.Time) (bool, *ledger.Record, error) {
	if s.writeBackOnCreate {
		s.writeBackOnCreate = false
		if _, _, err := s.store().Create(ctx, s.saved, now); err != nil {
			return false, nil, err
		}
	}
	won, cur, err := s.store().Create(ctx, rec, now)
	if won && s.created != nil {
		s.created <- rec
	}
	return won, cur, err
}

func (s *replicaStore) Replace(ctx context.Context, next *ledger.Record, want ledger.Expect, now time.Time) (bool, *ledger.Record, error) {
	return s.store().Replace(ctx, next, want, now)
}

func (s *replicaStore) Get(ctx context.Context, key string) (*ledger.Record, error) {
	return s.store().Get(ctx, key)
}

func (s *replicaStore) ListByRun(ctx context.Context, runID string) ([]*ledger.Record, error) {
	return s.store().ListByRun(ctx, runID)
}

func (s *replicaStore) AddRunRef(ctx context.Context, key, runID string, expiresAt time.Time) error {
	return s.store().AddRunRef(ctx, key, runID, expiresAt)
}

// Under reconciled-records (no fencer), the other region's TTL deletion of
// an effect record performed anew (a live record here: that region still
// held the old, expired one) can arrive while this region's executor is in
// its provider call. Before, the executor's outcome write then found no item
// and was refused (ErrLeaseLost: "another executor reclaimed"), the
// auditor's write-back restored the firing image, and once its lease ended
// the effect's retry reclaimed it as escaped and called the provider a
// second time: two calls in one region, with no duplicate and no crash.
// Now an outcome write that finds no item (the ledger deletes none, and
// TTL none within its retention in this replica) writes the outcome where
// there is none, and where the write-back landed first, over it (the same
// owner's firing image): one call, and the retry replays the outcome.
func TestOutcomeRecordedWhenTheOtherRegionsTTLDeletedTheRecordMidCall(t *testing.T) {
	for _, tc := range []struct {
		name string
		// writeBackFirst: the auditor's write-back lands between the
		// refused outcome write and the write that records it.
		writeBackFirst bool
	}{{"outcome before the write-back", false}, {"write-back before the outcome's second write", true}} {
		t.Run(tc.name, func(t *testing.T) {
			clk := ledgertest.NewClock(time.Date(2026, 12, 7, 21, 0, 0, 0, time.UTC))
			st := &replicaStore{inner: memstore.New(), now: clk.Now}
			l, err := ledger.New(ledger.Config{Store: st, Lease: 30 * time.Second, Wait: -1, Test: ledger.TestConfig{Clock: clk}})
			if err != nil {
				t.Fatal(err)
			}
			id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "order-ttl-mid-call"})
			if err != nil {
				t.Fatal(err)
			}
			eff := ledger.Effect{Identity: id}
			ctx := context.Background()
			var calls atomic.Int32
			call := func(_ context.Context, c ledger.Call) ([]byte, error) {
				calls.Add(1)
				if calls.Load() == 1 {
					// The other region's TTL deletion arrives during the call.
					st.Delete(t, "effect#"+c.EffectID)
					st.writeBackOnCreate = tc.writeBackFirst
				}
				return []byte("charged"), nil
			}
			res, err := l.Do(ctx, eff, call)
			if err != nil {
				t.Fatalf("first Do: %v (its outcome not recorded: the record was deleted by the other region mid-call)", err)
			}
			if string(res.Value) != "charged" {
				t.Fatalf("first Do: value %q", res.Value)
			}
			if !tc.writeBackFirst {
				st.WriteBack(t) // the auditor's write-back: there is an item, nothing written
			}
			clk.Advance(time.Minute) // past the first attempt's lease
			res, err = l.Do(ctx, eff, call)
			if err != nil {
				t.Fatalf("second Do: %v", err)
			}
			if n := calls.Load(); n != 1 {
				t.Fatalf("%d provider calls, want 1", n)
			}
			if !res.Replayed || string(res.Value) != "charged" {
				t.Fatalf("second Do: replayed %v value %q, want the recorded outcome replayed", res.Replayed, res.Value)
			}
			rec, err := st.Get(ctx, "effect#"+res.EffectID)
			if err != nil || rec == nil || rec.State != ledger.StateCompleted || rec.Attempt != 1 {
				t.Fatalf("record %+v, %v: want completed at attempt 1", rec, err)
			}
		})
	}
}

// The same deletion before a lease renewal of a long call: before, the
// renewal found no item and cut the call as a lost lease (ErrLeaseLost),
// unrecorded though its request may have left; the write-back restored the
// firing image and the retry called the provider again. Now the renewal
// writes the record again and the call goes on: one call, its outcome
// recorded and replayed.
func TestRenewalRecreatesARecordTheOtherRegionsTTLDeletedMidCall(t *testing.T) {
	clk := ledgertest.NewClock(time.Date(2026, 12, 7, 21, 0, 0, 0, time.UTC))
	tk := ledgertest.NewTicker()
	st := &replicaStore{inner: memstore.New(), now: clk.Now, created: make(chan *ledger.Record, 4)}
	l, err := ledger.New(ledger.Config{Store: st, Lease: 30 * time.Second, Heartbeat: 10 * time.Second, Wait: -1,
		Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: clk.Now, NewTickerFunc: tk.New}}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "charge", Key: "order-ttl-long-call"})
	if err != nil {
		t.Fatal(err)
	}
	eff := ledger.Effect{Identity: id}
	ctx := context.Background()
	var calls atomic.Int32
	call := func(ctx context.Context, c ledger.Call) ([]byte, error) {
		if calls.Add(1) > 1 {
			return []byte("charged"), nil
		}
		<-st.created                       // the claim's own Create: only the renewal's may answer the select below
		st.Delete(t, "effect#"+c.EffectID) // the other region's TTL deletion arrives
		clk.Advance(10 * time.Second)
		tk.Tick() // a renewal, received by the heartbeat
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx) // the call cut, its request perhaps sent
		case rec := <-st.created:
			if rec.State != ledger.StateFiring {
				t.Errorf("the renewal wrote a %s record, want firing", rec.State)
			}
		}
		return []byte("charged"), nil
	}
	res, err := l.Do(ctx, eff, call)
	if err != nil {
		t.Fatalf("first Do: %v (the call cut by a renewal that found the record deleted)", err)
	}
	st.WriteBack(t) // the auditor's write-back: there is an item, nothing written
	clk.Advance(time.Minute)
	res, err = l.Do(ctx, eff, call)
	if err != nil {
		t.Fatalf("second Do: %v", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d provider calls, want 1", n)
	}
	if !res.Replayed || string(res.Value) != "charged" {
		t.Fatalf("second Do: replayed %v value %q, want the recorded outcome replayed", res.Replayed, res.Value)
	}
}
