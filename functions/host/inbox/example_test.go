package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idemkit/functions/host/inbox"
)

// A discard and a resubmission decide one waiting entry: the first wins,
// the other is told what happened, and the winner's retry (its first
// answer lost) succeeds again.
func ExampleMem_Decide() {
	ctx, now := context.Background(), time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	s := inbox.NewMem(inbox.Config{})
	e := inbox.Entry{ID: "AAAAAAAAAAAAAAAAAAAAAA", Tenant: "acme", Operation: "cancelRun", RecordID: "acme/run1", CreatedAt: now}
	_ = s.Keep(ctx, e, "")

	got, err := s.Decide(ctx, "acme", e.ID, inbox.Discarded, "discard-1", now)
	fmt.Println(got.State, err)

	_, err = s.Decide(ctx, "acme", e.ID, inbox.Resubmitting, "resubmit-1", now)
	var lost *inbox.DecidedError
	fmt.Println(errors.As(err, &lost), lost.Entry.State, lost.Entry.By)

	got, err = s.Decide(ctx, "acme", e.ID, inbox.Discarded, "discard-1", now)
	fmt.Println(got.State, err)
	// Output:
	// discarded <nil>
	// true discarded discard-1
	// discarded <nil>
}
