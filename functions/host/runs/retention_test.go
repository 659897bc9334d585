package runs

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// TestMemRunsExpireThroughTheClock: an ended run of a MemRuns with a
// retention is served until its expiry by the injected clock and reads as
// missing from then on, as DynamoDB's TTL deletes it: Get, every write
// and LinkRetry; a live run is never dropped however long it lives; a
// store without a retention keeps every run.
func TestMemRunsExpireThroughTheClock(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	now := start
	m := NewMemRuns()
	m.Retention, m.Now = 14*24*time.Hour, func() time.Time { return now }
	kept := NewMemRuns()
	kept.Now = m.Now
	newRun := func(st *MemRuns) Run {
		t.Helper()
		r := NewRun("acme", "webhook", json.RawMessage(`{}`), now)
		if err := st.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	ended, forever, liveRun := newRun(m), newRun(kept), newRun(m)
	end := start.Add(90 * time.Second)
	got, err := m.Transition(ctx, ended.ID, []Status{StatusPending}, StatusCompleted, "", end)
	if err != nil || !got.ExpiresAt.Equal(end.Add(m.Retention)) {
		t.Fatalf("completed: %+v %v, want expiresAt %v", got.ExpiresAt, err, end.Add(m.Retention))
	}
	if _, err := kept.Transition(ctx, forever.ID, []Status{StatusPending}, StatusCompleted, "", end); err != nil {
		t.Fatal(err)
	}

	now = got.ExpiresAt.Add(-time.Second)
	if _, err := m.Get(ctx, ended.ID); err != nil {
		t.Fatalf("a second before its expiry: %v, want the run", err)
	}
	now = got.ExpiresAt
	if _, err := m.Get(ctx, ended.ID); !errors.Is(err, ErrRunNotFound) {
		t.Fatalf("at its expiry: %v, want ErrRunNotFound", err)
	}
	if _, err := m.Transition(ctx, ended.ID, []Status{StatusCompleted}, StatusFailed, "", now); !errors.Is(err, ErrRunNotFound) {
		t.Fatalf("a write to an expired run: %v, want ErrRunNotFound", err)
	}
	if err := m.LinkRetry(ctx, ended.ID, NewRunID("acme")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(ctx, ended.ID); !errors.Is(err, ErrRunNotFound) {
		t.Fatalf("LinkRetry brought an expired run back: %v", err)
	}

	now = start.Add(10 * 365 * 24 * time.Hour)
	if r, err := m.Get(ctx, liveRun.ID); err != nil || !r.ExpiresAt.IsZero() {
		t.Fatalf("a live run ten years on: %+v %v, want it served without an expiry", r.ExpiresAt, err)
	}
	if ids, err := m.Stale(ctx, now, 0); err != nil || len(ids) != 1 || ids[0] != liveRun.ID {
		t.Fatalf("stale runs: %v %v, want the live run only", ids, err)
	}
	if r, err := kept.Get(ctx, forever.ID); err != nil || !r.ExpiresAt.IsZero() {
		t.Fatalf("a store without a retention: %+v %v, want the run kept, no expiry", r.ExpiresAt, err)
	}
}

// TestMemRunsBreachStampsExpiry: a run failed on a breached cap carries
// the same expiry as any other end.
func TestMemRunsBreachStampsExpiry(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	m := NewMemRuns()
	m.Retention, m.Now = 24*time.Hour, func() time.Time { return now }
	r := NewRun("acme", "webhook", json.RawMessage(`{}`), now)
	if err := m.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := m.Breach(ctx, r.ID, LogEvent{Type: EventCapBreached, At: now, Payload: json.RawMessage(`{}`)}, "run_timeout", "timeout", now)
	if err != nil || !got.ExpiresAt.Equal(now.Add(24*time.Hour)) {
		t.Fatalf("breach: %v %v", got.ExpiresAt, err)
	}
}
