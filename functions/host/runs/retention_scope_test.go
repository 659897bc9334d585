package runs

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestScopeHolderDeletedByItsRetention: a scope whose holder ended under a
// run retention and was then deleted (RunsTable's TTL; MemRuns' clock
// passing its expiry) is free to the next create of the scope at once (no
// ScopeHoldGrace wait, as for an interrupted create: the hold began long
// before), which fences the deleted run's id with a tombstone: a late
// Put of that id never lands, and the tombstone never reads as a run. The
// scope's item is kept, naming the new holder; no item carries expiresAt
// but the ended run's.
func TestScopeHolderDeletedByItsRetention(t *testing.T) {
	const retention = 14 * 24 * time.Hour
	t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	t.Run("memory", func(t *testing.T) {
		now := t0
		m := NewMemRuns()
		m.Retention, m.Now = retention, func() time.Time { return now }
		holder := scopeTestRun(t0)
		if err := m.CreateScoped(ctx, holder, "s"); err != nil {
			t.Fatal(err)
		}
		ended, err := m.Transition(ctx, holder.ID, []Status{StatusPending}, StatusCompleted, "", t0.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		now = ended.ExpiresAt
		next := scopeTestRun(now)
		if err := m.CreateScoped(ctx, next, "s"); err != nil {
			t.Fatalf("the scope of a deleted holder: %v, want taken", err)
		}
		if _, err := m.Get(ctx, holder.ID); !errors.Is(err, ErrRunNotFound) {
			t.Fatalf("the deleted holder: %v, want not found", err)
		}
		if err := m.Create(ctx, holder); !errors.Is(err, ErrRunExists) {
			t.Fatalf("a late create of the deleted holder's id: %v, want refused", err)
		}
		if err := m.CreateScoped(ctx, scopeTestRun(now), "s"); !errors.Is(err, ErrScopeHeld) {
			t.Fatalf("a third create while the new holder is live: %v, want ErrScopeHeld", err)
		}
	})
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := e.Client(dynamotest.FastRetries)
		d := &DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable"), Retention: retention}
		holder := scopeTestRun(t0)
		if err := d.CreateScoped(ctx, holder, "s"); err != nil {
			t.Fatal(err)
		}
		ended, err := d.Transition(ctx, holder.ID, []Status{StatusPending}, StatusCompleted, "", t0.Add(time.Minute))
		if err != nil || ended.ExpiresAt.IsZero() {
			t.Fatalf("end: %v %v, want an expiry", ended.ExpiresAt, err)
		}
		raw := func(pk string) map[string]types.AttributeValue {
			t.Helper()
			out, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(d.Table), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{runAttrPK: sAV(pk)}})
			if err != nil {
				t.Fatal(err)
			}
			return out.Item
		}
		if _, ok := raw(scopeKey("acme", "s"))[attrExpiresAt]; ok {
			t.Fatal("the scope item carries expiresAt")
		}
		// RunsTable's TTL deletes the ended run.
		if _, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(d.Table),
			Key: map[string]types.AttributeValue{runAttrPK: sAV(holder.ID)}}); err != nil {
			t.Fatal(err)
		}
		next := scopeTestRun(ended.ExpiresAt.Add(time.Hour))
		if err := d.CreateScoped(ctx, next, "s"); err != nil {
			t.Fatalf("the scope of a deleted holder: %v, want taken", err)
		}
		if h, _, err := d.scopeHolder(ctx, scopeKey("acme", "s")); err != nil || h != next.ID {
			t.Fatalf("scope holder %q %v, want %s", h, err, next.ID)
		}
		tomb := raw(holder.ID)
		if _, ok := tomb[runAttrTakenOver]; !ok {
			t.Fatalf("the deleted holder's id holds %v, want a tombstone", tomb)
		}
		if _, ok := tomb[attrExpiresAt]; ok {
			t.Fatal("the tombstone carries expiresAt")
		}
		if _, err := d.Get(ctx, holder.ID); !errors.Is(err, ErrRunNotFound) {
			t.Fatalf("the tombstone reads as %v, want ErrRunNotFound", err)
		}
		if err := d.Create(ctx, holder); !errors.Is(err, ErrRunExists) {
			t.Fatalf("a late Put of the deleted holder's id: %v, want refused", err)
		}
		if r, err := d.Get(ctx, next.ID); err != nil || !r.ExpiresAt.IsZero() {
			t.Fatalf("the new holder: %v %v, want live without an expiry", r.ExpiresAt, err)
		}
	})
}
