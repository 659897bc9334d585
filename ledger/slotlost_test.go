package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
	"github.com/idemkit/idemkit/ledger/memstore"
)

// lostCreateStore applies the next Create and answers it with an error,
// as a write whose every answer was lost.
type lostCreateStore struct {
	ledger.Store
	lose bool
}

func (s *lostCreateStore) Create(ctx context.Context, rec *ledger.Record, now time.Time) (bool, *ledger.Record, error) {
	won, cur, err := s.Store.Create(ctx, rec, now)
	if s.lose && err == nil && won {
		s.lose = false
		return false, nil, errors.New("injected: the claim's answer was lost")
	}
	return won, cur, err
}

// A fire-once slot whose claim landed with its answer lost runs its work
// once, in that call, and never again (RED_TEAM 425); a claim that lost
// to another's is still a losing call, the work not run.
func TestSlotClaimLandedWithItsAnswerLost(t *testing.T) {
	st := &lostCreateStore{Store: memstore.New(), lose: true}
	l, err := ledger.New(ledger.Config{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	slot := identity.Slot{Job: "nightly-report", Slot: "2026-12-07"}
	ran := 0
	job := func(context.Context) error { ran++; return nil }
	r, err := l.FireOnce(context.Background(), slot, job)
	if err != nil || !r.Fired || r.State != ledger.StateCompleted || !r.OK || ran != 1 {
		t.Fatalf("claim landed, answer lost: %+v %v ran %d; want the work run once", r, err, ran)
	}
	st.lose = true // armed for a claim that lands: none does
	for i := 0; i < 2; i++ {
		r, err = l.FireOnce(context.Background(), slot, job)
		if err != nil || r.Fired || r.State != ledger.StateCompleted || ran != 1 {
			t.Fatalf("duplicate %d: %+v %v ran %d; want the recorded success, no work", i, r, err, ran)
		}
	}
}
