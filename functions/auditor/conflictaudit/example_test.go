package conflictaudit_test

import (
	"fmt"
	"github.com/idemkit/idemkit/ledger/identity"
	"time"

	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/ledger"
)

// Two regions each won their local claim of the same effect during a
// partition; on healing, us-east-1's write overwrote eu-west-1's. The
// eu-west-1 stream carries the overwrite, which Detect recognises.
func ExampleDetect() {
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	rec := func(owner string, created time.Time) *ledger.Record {
		return &ledger.Record{Key: "effect#acme/x", Kind: identity.KindEffect, EffectID: "acme/x",
			State: ledger.StateFiring, Owner: owner, Attempt: 1, CreatedAt: created,
			ExpiresAt: created.Add(ledger.MinRetention),
			Attempts:  []ledger.Attempt{{N: 1, State: ledger.AttemptClaimed, Fired: true}}}
	}
	c := conflictaudit.Detect(rec("eu", t0), rec("us", t0.Add(3*time.Millisecond)))
	fmt.Println(c.Reason, c.Winner.Owner, c.Loser.Owner, c.Winner.FireMarked && c.Loser.FireMarked)
	// Output: same-attempt-other-owner us eu true
}
