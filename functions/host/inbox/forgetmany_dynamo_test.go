package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/inbox"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestManyDecidedEntriesAreForgotten: when more entries were decided within
// one retention than one write's expression can name (DynamoDB bounds an
// expression to 4 KB), the decisions after the retention still forget them
// all, a bounded number per decision, oldest first. Before, the one forget
// write named every one of them, DynamoDB refused it on every later
// decision, and the final entries stayed until the inbox was full.
func TestManyDecidedEntriesAreForgotten(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		s, err := inbox.NewDynamo(inbox.DynamoConfig{Client: e.Client(dynamotest.FastRetries), Table: e.CreateTable(t, "RunsTable"),
			Config: inbox.Config{Retention: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, at := context.Background(), time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
		of := func(n int, now time.Time) inbox.Entry {
			return inbox.Entry{ID: inbox.EntryID(idem.ClaimInfo{ID: fmt.Sprintf("many-%d", n), OriginalRequestID: "r"}, true), Tenant: "acme",
				Caller: fmt.Sprintf("caller-%d", n%7), Operation: "cancelRun", RecordID: "acme/runrunrunrunrunrun1",
				DecidedVersion: 1, CurrentVersion: 3, CreatedAt: now, Reason: "offline"}
		}
		const old = 150
		for n := 0; n < old; n++ {
			now := at.Add(time.Duration(n) * time.Second)
			en := of(n, now)
			if err := s.Keep(ctx, en, ""); err != nil {
				t.Fatalf("keep %d: %v", n, err)
			}
			if _, err := s.Decide(ctx, "acme", en.ID, inbox.Discarded, "d", now); err != nil {
				t.Fatalf("decide %d: %v", n, err)
			}
		}
		// Past the retention: each decision forgets what it can.
		for n := old; n < old+12; n++ {
			now := at.Add(2*time.Hour + time.Duration(n)*time.Second)
			en := of(n, now)
			if err := s.Keep(ctx, en, ""); err != nil {
				t.Fatalf("keep %d: %v", n, err)
			}
			if _, err := s.Decide(ctx, "acme", en.ID, inbox.Discarded, "d", now); err != nil {
				t.Fatalf("decide %d: %v", n, err)
			}
		}
		left := 0
		for n := 0; n < old; n++ {
			if _, err := s.Get(ctx, "acme", of(n, at).ID); !errors.Is(err, inbox.ErrNotFound) {
				left++
			}
		}
		if left != 0 {
			t.Fatalf("%d of %d entries decided more than a retention ago are still kept after 12 decisions", left, old)
		}
	})
}
