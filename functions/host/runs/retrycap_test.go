package runs

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestCreateRetryIsCapped: Create lists a retry on its failed run only
// while the run lists fewer than MaxRetries (or the retry already); past
// that it is a *RetryLimitError with the count, the failed run's list
// unchanged and no run written at the retry's id (DynamoRuns without
// transactions lists it before it writes the run). The capped listing costs
// no round trip on success (PutItem and UpdateItem, as before). LinkRetry,
// the listing of a run an earlier execution wrote, is not capped. On
// MemRuns and every engine; a transactional store outside a Layer-1
// claim (a retry sent without a key) commits the run and its capped
// listing in one TransactWriteItems (RED_TEAM 369), refused at the cap
// alike.
func TestCreateRetryIsCapped(t *testing.T) {
	t.Run("memory", func(t *testing.T) { createRetryIsCapped(t, NewMemRuns(), nil) })
	forEachWriteMode(t, func(t *testing.T, e *dynamotest.Emulator, transactional bool) {
		cnt := dynamotest.NewCounter()
		createRetryIsCapped(t, &DynamoRuns{Client: e.Client(dynamotest.FastRetries, cnt.Middleware()), Table: e.CreateTable(t, "RunsTable"), Transactional: transactional}, cnt)
	})
}

func createRetryIsCapped(t *testing.T, rs RunStore, cnt *dynamotest.Counter) {
	wantCost := map[string]int{"PutItem": 1, "UpdateItem": 1}
	if d, ok := rs.(*DynamoRuns); ok && d.Transactional {
		wantCost = map[string]int{"TransactWriteItems": 1}
	}
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	failed := NewRun("acme", "webhook", nil, now)
	if err := rs.Create(ctx, failed); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Transition(ctx, failed.ID, []Status{StatusPending}, StatusFailed, "boom", now); err != nil {
		t.Fatal(err)
	}
	for i := range MaxRetries - 1 {
		if err := rs.LinkRetry(ctx, failed.ID, fmt.Sprintf("acme/%022d", i)); err != nil {
			t.Fatal(err)
		}
	}
	retry := func() Run {
		r := NewRun("acme", "webhook", nil, now)
		r.RetryOf = failed.ID
		return r
	}
	listed := func() []string {
		t.Helper()
		f, err := rs.Get(ctx, failed.ID)
		if err != nil {
			t.Fatal(err)
		}
		return f.Retries
	}
	last := retry()
	if cnt != nil {
		cnt.Reset()
	}
	if err := rs.Create(ctx, last); err != nil {
		t.Fatalf("retry %d of %d: %v", MaxRetries, MaxRetries, err)
	}
	if cnt != nil && !maps.Equal(cnt.Ops(), wantCost) {
		t.Fatalf("a listed retry cost %v; want %v", cnt.Ops(), wantCost)
	}
	if got := listed(); len(got) != MaxRetries || !slices.Contains(got, last.ID) {
		t.Fatalf("after retry %d the failed run lists %d", MaxRetries, len(got))
	}
	over := retry()
	var limit *RetryLimitError
	if err := rs.Create(ctx, over); !errors.As(err, &limit) || !errors.Is(err, ErrRetryLimit) || limit.Retries != MaxRetries {
		t.Fatalf("retry %d: %v; want a *RetryLimitError of %d", MaxRetries+1, err, MaxRetries)
	}
	if got := listed(); len(got) != MaxRetries || slices.Contains(got, over.ID) {
		t.Fatalf("the refused retry was listed (%d listed)", len(got))
	}
	// No run is written for a refused retry: none the executor could
	// take from the runs stream (RED_TEAM 316).
	if r, err := rs.Get(ctx, over.ID); !errors.Is(err, ErrRunNotFound) {
		t.Fatalf("the refused retry's run: %s %v; want none", r.Status, err)
	}
	// The id already listed is not refused: the listing is a set.
	if err := rs.LinkRetry(ctx, failed.ID, over.ID); err != nil {
		t.Fatal(err)
	}
	again := retry()
	again.ID = fmt.Sprintf("acme/%022d", 0)
	if err := rs.Create(ctx, again); err != nil {
		t.Fatalf("a retry whose id is listed, at the cap: %v", err)
	}
	if got := listed(); len(got) != MaxRetries+1 {
		t.Fatalf("LinkRetry past the cap: %d listed, want %d", len(got), MaxRetries+1)
	}
}
