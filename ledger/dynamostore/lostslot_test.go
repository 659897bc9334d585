package dynamostore_test

import (
	"context"
	"testing"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
)

// A FireOnce slot's claim (the insert-if-absent PutItem) is applied and
// its answer lost: once or twice (the SDK's retry recognises the claim as
// its own), or then throttled until the SDK gives up. Before, the last
// left the slot claimed by no one for its whole retention, the job it
// guards never run: FireOnce returned the store's error without calling
// its work, and every later FireOnce saw the slot claimed. Now the claim
// is read back, found carrying the call's owner token, and the work runs,
// once; every later FireOnce sees it done (RED_TEAM 425).
func TestLostAnswerSlotClaim(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, c := range dynamotest.Losses("PutItem") {
			t.Run(slug(c.Name), func(t *testing.T) {
				v := newEnv(t, e)
				slot := identity.Slot{Job: "nightly-report", Slot: "2026-12-07-" + slug(c.Name)}
				ran := 0
				job := func(context.Context) error { ran++; return nil }
				c.Arm(v.faults)
				r, err := v.l.FireOnce(context.Background(), slot, job)
				if v.faults.Pending() != 0 {
					t.Fatalf("pending faults %d", v.faults.Pending())
				}
				if err != nil || !r.Fired || r.State != ledger.StateCompleted || !r.OK || ran != 1 {
					t.Fatalf("claim with its answers lost: %+v %v ran %d; want the work run once", r, err, ran)
				}
				for i := 0; i < 2; i++ {
					r, err = v.l.FireOnce(context.Background(), slot, job)
					if err != nil || r.Fired || r.State != ledger.StateCompleted || !r.OK || ran != 1 {
						t.Fatalf("duplicate %d: %+v %v ran %d; want the recorded success, no work", i, r, err, ran)
					}
				}
			})
		}
	})
}
