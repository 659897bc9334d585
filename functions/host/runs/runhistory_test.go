package runs

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem/decided"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// runVersionsSuite proves, on any RunStore, that a run carries a version
// and a per-field change log: every write that changes a tracked field is
// one new version, and runHistory reports the changes since a version with
// the values then and now, to the run's tenant only.
func runVersionsSuite(t *testing.T, runs RunStore) {
	ctx := context.Background()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	r := NewRun("acme", "conformance-noop", nil, now)
	r.RetryOf = "acme/failedfailedfailed1"
	if err := runs.Create(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := runs.Get(ctx, r.ID)
	if err != nil || got.Version != 1 || got.History.Current() != 1 || got.RetryOf != r.RetryOf {
		t.Fatalf("created: version %d, log %d, retryOf %q, %v", got.Version, got.History.Current(), got.RetryOf, err)
	}
	h := runHistory{Runs: runs}
	if cs, cur, err := h.ChangesSince(ctx, "acme", r.ID, 1); err != nil || cur != 1 || len(cs) != 0 {
		t.Fatalf("no change yet: %v %d %v", cs, cur, err)
	}
	// An unrelated field (lastError) changes: version 2.
	if _, err := runs.NoteFailure(ctx, r.ID, "timeout", now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	cs, cur, err := h.ChangesSince(ctx, "acme", r.ID, 1)
	if err != nil || cur != 2 || len(cs) != 1 || cs[0].Field != fieldLastError || string(cs[0].Old) != "null" || string(cs[0].New) != `"timeout"` || cs[0].Version != 2 {
		t.Fatalf("after NoteFailure: %+v %d %v", cs, cur, err)
	}
	// Parked, then running, then failed: versions 3, 4, 5.
	w := Wake{At: now.Add(time.Minute), Attempt: 1, MaxAttempts: 3}
	if err := runs.Schedule(ctx, r.ID, w, now.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := runs.Transition(ctx, r.ID, []Status{StatusPending}, StatusRunning, "", now.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	fin, err := runs.Transition(ctx, r.ID, []Status{StatusRunning}, StatusFailed, "node deliver: 400", now.Add(4*time.Second))
	if err != nil || fin.Version != 5 {
		t.Fatalf("failed: version %d, %v", fin.Version, err)
	}
	// A refused transition is no version.
	if _, err := runs.Transition(ctx, r.ID, []Status{StatusPending}, StatusCancelled, "", now); !errors.Is(err, ErrStatusConflict) {
		t.Fatal(err)
	}
	cs, cur, err = h.ChangesSince(ctx, "acme", r.ID, 2)
	if err != nil || cur != 5 {
		t.Fatalf("since 2: %d %v", cur, err)
	}
	byField := map[string]decided.FieldChange{}
	for _, c := range cs {
		byField[c.Field] = c
	}
	if c := byField[FieldStatus]; string(c.Old) != `"pending"` || string(c.New) != `"failed"` || c.Version != 5 {
		t.Fatalf("status change %+v (%s -> %s)", c, c.Old, c.New)
	}
	if c := byField[fieldError]; string(c.Old) != "null" || string(c.New) != `"node deliver: 400"` {
		t.Fatalf("error change %s -> %s", c.Old, c.New)
	}
	if c := byField[fieldWake]; string(c.Old) != "null" || string(c.New) != "null" || c.Version != 5 {
		t.Fatalf("wake change %s -> %s @%d", c.Old, c.New, c.Version)
	}
	if _, ok := byField[fieldLastError]; ok || len(cs) != 3 {
		t.Fatalf("since 2: %+v", cs)
	}
	// The wake's value at version 3, as logged.
	cs, _, _ = h.ChangesSince(ctx, "acme", r.ID, 3)
	for _, c := range cs {
		if c.Field == fieldWake {
			var old Wake
			if err := json.Unmarshal(c.Old, &old); err != nil || !old.At.Equal(w.At) || old.MaxAttempts != 3 {
				t.Fatalf("wake at version 3: %s", c.Old)
			}
		}
	}
	// Another tenant, an unknown run, a version the run never had.
	if _, _, err := h.ChangesSince(ctx, "globex", r.ID, 1); !errors.Is(err, decided.ErrRecordNotFound) {
		t.Fatalf("another tenant: %v", err)
	}
	if _, _, err := h.ChangesSince(ctx, "acme", NewRunID("acme"), 1); !errors.Is(err, decided.ErrRecordNotFound) {
		t.Fatalf("unknown run: %v", err)
	}
	if _, _, err := h.ChangesSince(ctx, "acme", r.ID, 6); !errors.Is(err, decided.ErrVersionAhead) {
		t.Fatalf("future version: %v", err)
	}
}

func TestRunVersionsAndHistoryMemory(t *testing.T) { runVersionsSuite(t, NewMemRuns()) }

func TestRunVersionsAndHistoryDynamo(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		runVersionsSuite(t, &DynamoRuns{Client: e.Client(dynamotest.FastRetries), Table: e.CreateTable(t, "RunsTable")})
	})
}
