package inbox_test

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/inbox"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestRefusedWriteReadsTheInboxOnlyWhereTheWriteDidNotReturnIt (RED_TEAM
// 550): a Decide or a Keep whose condition fails learns what the inbox
// holds from the item the failed write returns
// (ReturnValuesOnConditionCheckFailure ALL_OLD), as DynamoDB and moto
// return it: one UpdateItem, no read of the inbox (one item of up to 400
// KB, read consistently: up to 100 read units). Only where the engine
// returns no item (dynalite, DynamoDB Local), or there is no inbox item at
// all, is the item read once.
func TestRefusedWriteReadsTheInboxOnlyWhereTheWriteDidNotReturnIt(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		cnt := dynamotest.NewCounter()
		s, err := inbox.NewDynamo(inbox.DynamoConfig{Client: e.Client(dynamotest.FastRetries, cnt.Middleware()), Table: e.CreateTable(t, "RunsTable")})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		entry := func(id, caller string) inbox.Entry {
			return inbox.Entry{ID: id, Tenant: "acme", Caller: caller, Operation: "cancelRun", RecordID: "acme/runrunrunrunrunrun1",
				DecidedVersion: 1, CurrentVersion: 2, CreatedAt: now}
		}
		const a, b = "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB"
		refused := map[string]int{"UpdateItem": 1}
		if !e.Caps.ReturnValuesOnConditionCheckFailure {
			refused["GetItem"] = 1
		}
		// No inbox item at all: the failed write returns nothing, so the
		// item is read (and found missing) on every engine.
		cnt.Reset()
		if _, err := s.Decide(ctx, "acme", a, inbox.Discarded, "req-1", now); !errors.Is(err, inbox.ErrNotFound) {
			t.Fatalf("decide in no inbox: %v", err)
		}
		if got, want := cnt.Ops(), map[string]int{"UpdateItem": 1, "GetItem": 1}; !maps.Equal(got, want) {
			t.Errorf("decide in no inbox: round trips %v, want %v", got, want)
		}
		if err := s.Keep(ctx, entry(a, ""), ""); err != nil {
			t.Fatal(err)
		}
		if err := s.Keep(ctx, entry(b, "worker-1"), ""); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Decide(ctx, "acme", a, inbox.Discarded, "req-2", now); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			do   func() error
			want func(error) bool
			ops  map[string]int
		}{
			{"a decided entry decided again", func() error {
				_, err := s.Decide(ctx, "acme", a, inbox.Discarded, "req-3", now)
				return err
			}, func(err error) bool { var d *inbox.DecidedError; return errors.As(err, &d) && d.Entry.ID == a }, refused},
			{"an unknown entry decided", func() error {
				_, err := s.Decide(ctx, "acme", "CCCCCCCCCCCCCCCCCCCCCC", inbox.Discarded, "req-4", now)
				return err
			}, func(err error) bool { return errors.Is(err, inbox.ErrNotFound) }, refused},
			{"a decided entry kept again", func() error { return s.Keep(ctx, entry(a, ""), "") },
				func(err error) bool { var d *inbox.DecidedError; return errors.As(err, &d) && d.Entry.ID == a }, refused},
			{"a caller's waiting entry kept again (its refusal re-executed)", func() error { return s.Keep(ctx, entry(b, "worker-1"), "") },
				func(err error) bool { return err == nil }, map[string]int{"UpdateItem": 2, "GetItem": refused["GetItem"]}},
		} {
			cnt.Reset()
			if err := c.do(); !c.want(err) {
				t.Errorf("%s: %v", c.name, err)
			}
			want := maps.Clone(c.ops)
			if want["GetItem"] == 0 {
				delete(want, "GetItem")
			}
			if got := cnt.Ops(); !maps.Equal(got, want) {
				t.Errorf("%s: round trips %v, want %v", c.name, got, want)
			}
		}
	})
}
