package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/inbox"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestHandBackOnAnInboxFilledMeanwhile: a resubmission holds an entry; while
// it runs, other refused writes fill the room its decision left and the
// item to its last byte. The resubmission hands the entry back (Decide to
// Waiting, as the api does when its updated entry cannot be kept): the
// store's contract is that an inbox too full for Keep still decides every
// entry it holds.
func TestHandBackOnAnInboxFilledMeanwhile(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		s, err := inbox.NewDynamo(inbox.DynamoConfig{Client: e.Client(dynamotest.FastRetries), Table: e.CreateTable(t, "RunsTable")})
		if err != nil {
			t.Fatal(err)
		}
		ctx, at := context.Background(), time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
		of := func(n, size int) inbox.Entry {
			return inbox.Entry{ID: inbox.EntryID(idem.ClaimInfo{ID: fmt.Sprintf("fill-%d", n), OriginalRequestID: "r"}, true), Tenant: "acme",
				Operation: "cancelRun", RecordID: "acme/runrunrunrunrunrun1", DecidedVersion: 1, CurrentVersion: 3,
				CreatedAt: at.Add(time.Duration(n) * time.Millisecond), Reason: strings.Repeat("x", size)}
		}
		held := of(0, 10)
		if err := s.Keep(ctx, held, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Decide(ctx, "acme", held.ID, inbox.Resubmitting, "holder", at); err != nil {
			t.Fatal(err)
		}
		// Fill the item with new entries, then grow the last one (the same
		// write refused again, its reason longer) to the item's last byte.
		n, last := 1, inbox.Entry{}
		for size := 40000; size >= 1; {
			switch err := s.Keep(ctx, of(n, size), ""); {
			case err == nil:
				last = of(n, size)
				n++
			case errors.Is(err, inbox.ErrFull):
				size /= 2
			default:
				t.Fatal(err)
			}
		}
		lo, hi := len(last.Reason), len(last.Reason)+4096
		for lo+1 < hi {
			mid := (lo + hi) / 2
			grown := last
			grown.Reason = strings.Repeat("x", mid)
			switch err := s.Keep(ctx, grown, ""); {
			case err == nil:
				lo = mid
			case errors.Is(err, inbox.ErrFull):
				hi = mid
			default:
				t.Fatal(err)
			}
		}
		if _, err := s.Decide(ctx, "acme", held.ID, inbox.Waiting, "holder", at); err != nil {
			t.Fatalf("the holder could not hand its entry back: %v", err)
		}
		if g, err := s.Get(ctx, "acme", held.ID); err != nil || g.State != inbox.Waiting {
			t.Fatalf("the entry after the hand-back: %+v, %v", g, err)
		}
		if _, err := s.Decide(ctx, "acme", held.ID, inbox.Discarded, "d", at); err != nil {
			t.Fatalf("the entry handed back could not be discarded: %v", err)
		}
	})
}

// TestCallerCountsAreForgotten: every caller that ever kept a new entry
// leaves its count (n_<caller>) on the tenant's one inbox item. Once none
// of its entries is left (decided and forgotten after the retention), the
// count must go too, or callers come and go until the item holds nothing
// but counts and refuses every new entry. Callers' names here are long so
// that a few hundred fill the item (the api's are 22 characters: some
// fifteen thousand callers over the inbox's life).
func TestCallerCountsAreForgotten(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		s, err := inbox.NewDynamo(inbox.DynamoConfig{Client: e.Client(dynamotest.FastRetries), Table: e.CreateTable(t, "RunsTable"),
			Config: inbox.Config{Retention: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, at := context.Background(), time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
		of := func(n int) inbox.Entry {
			return inbox.Entry{ID: inbox.EntryID(idem.ClaimInfo{ID: fmt.Sprintf("caller-%d", n), OriginalRequestID: "r"}, true), Tenant: "acme",
				Caller: fmt.Sprintf("%04d", n) + strings.Repeat("c", 2000), Operation: "cancelRun", RecordID: "acme/runrunrunrunrunrun1",
				DecidedVersion: 1, CurrentVersion: 3, CreatedAt: at, Reason: "offline"}
		}
		// Callers come, keep one write each, and see it discarded; every
		// so often a decision an hour later forgets what was decided.
		for n := 0; n < 300; n++ {
			now := at.Add(time.Duration(n) * time.Hour)
			e := of(n)
			e.CreatedAt = now
			if err := s.Keep(ctx, e, ""); err != nil {
				t.Fatalf("caller %d of an inbox holding no waiting write: %v", n, err)
			}
			if _, err := s.Decide(ctx, "acme", e.ID, inbox.Discarded, "d", now); err != nil {
				t.Fatal(err)
			}
		}
	})
}
