package runs

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestCancelOfAListedRetryNotYetWritten: without the completion
// transaction a retry is listed on its failed run before its run is
// written, so a retry whose run write failed is listed with no run, and
// its request's re-execution writes it later. A cancel of that id (from
// pending) is ErrRunNotFound, as before, and leaves a marker no read
// takes for a run; the re-execution's Create then writes the run
// cancelled by that cancel, never pending (it used to write it pending,
// for the executor to start after the caller was told it did not exist).
// The 404 costs one write more, a cancel of a run that exists none; a
// second cancel of the id is ErrRunNotFound again; the marker's write
// and the cancelled run's, each applied with its answer lost, are retried
// into the same answers; a cancel whose marker
// write finds the run written since cancels it; a transactional store
// writes no marker. On every engine.
func TestCancelOfAListedRetryNotYetWritten(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		faults := dynamotest.NewFaults()
		cnt := dynamotest.NewCounter()
		rs := &DynamoRuns{Client: e.Client(dynamotest.FastRetries, faults.Middleware(), cnt.Middleware()), Table: e.CreateTable(t, "RunsTable")}
		ctx := context.Background()
		now := time.Now().UTC().Truncate(time.Millisecond)
		live := []Status{StatusPending, StatusRunning}
		failed := NewRun("acme", "webhook", nil, now)
		if err := rs.Create(ctx, failed); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.Transition(ctx, failed.ID, []Status{StatusPending}, StatusFailed, "boom", now); err != nil {
			t.Fatal(err)
		}
		retry := NewRun("acme", "webhook", nil, now)
		retry.RetryOf = failed.ID
		faults.FailNext("PutItem", 50, dynamotest.InternalServerError())
		if err := rs.Create(ctx, retry); err == nil {
			t.Fatal("a Create whose run write failed answered nil")
		}
		faults.Clear()

		cnt.Reset()
		if _, err := rs.Cancel(ctx, retry.ID, live, "rec-cancel", "not wanted", now); !errors.Is(err, ErrRunNotFound) {
			t.Fatalf("a cancel of the listed retry not written: %v, want ErrRunNotFound", err)
		}
		// Its refused update and the read telling no run is there (no
		// item to return), as before, and the marker's write.
		want := map[string]int{"UpdateItem": 1, "GetItem": 1, "PutItem": 1}
		if got := cnt.Ops(); !maps.Equal(got, want) {
			t.Errorf("the cancel answered not found cost %v; want %v", got, want)
		}
		if _, err := rs.Get(ctx, retry.ID); !errors.Is(err, ErrRunNotFound) {
			t.Fatalf("get after the cancel: %v, want ErrRunNotFound", err)
		}
		if _, err := rs.Cancel(ctx, retry.ID, live, "rec-other", "", now); !errors.Is(err, ErrRunNotFound) {
			t.Fatalf("a second cancel: %v, want ErrRunNotFound", err)
		}

		// The request runs again: its run is written cancelled.
		var found *RunExistsError
		if err := rs.Create(ctx, retry); !errors.As(err, &found) {
			t.Fatalf("the re-execution's create: %v; want a *RunExistsError", err)
		}
		got, err := rs.Get(ctx, retry.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != StatusCancelled || got.CancelledBy != "rec-cancel" || got.CancelReason != "not wanted" ||
			got.RetryOf != failed.ID || got.Version != 2 || got.Epoch != 0 || !found.Listed || found.Run.Status != StatusCancelled {
			t.Fatalf("the run written after its cancel: %+v (handed back %+v); want it cancelled by the first cancel, version 2, listed", got, found)
		}
		if f, _ := rs.Get(ctx, failed.ID); !slices.Equal(f.Retries, []string{retry.ID}) {
			t.Fatalf("the failed run lists %v", f.Retries)
		}
		if _, err := rs.Transition(ctx, retry.ID, []Status{StatusPending}, StatusRunning, "", now); !errors.Is(err, ErrStatusConflict) {
			t.Fatalf("an executor's take of the run: %v, want ErrStatusConflict", err)
		}
		// Again: the run as it is.
		found = nil
		if err := rs.Create(ctx, retry); !errors.As(err, &found) || found.Run.Status != StatusCancelled || !found.Listed {
			t.Fatalf("the create again: %v %+v", err, found)
		}

		// Lost answers: the marker's write applied and its answer lost is
		// retried by the SDK into ErrRunNotFound; the cancelled run's
		// write so lost, into that run.
		lost := NewRun("acme", "webhook", nil, now)
		lost.RetryOf = failed.ID
		faults.FailNext("PutItem", 50, dynamotest.InternalServerError())
		if err := rs.Create(ctx, lost); err == nil {
			t.Fatal("a Create whose run write failed answered nil")
		}
		faults.Clear()
		fired := faults.Fired()
		faults.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
		if _, err := rs.Cancel(ctx, lost.ID, live, "rec-lost", "", now); !errors.Is(err, ErrRunNotFound) {
			t.Fatalf("a cancel whose marker write's answer was lost: %v, want ErrRunNotFound", err)
		}
		faults.PassNext("PutItem", 1) // the run's write, refused by the marker
		faults.FailNextAfterSend("PutItem", 1, dynamotest.ResponseLost())
		found = nil
		if err := rs.Create(ctx, lost); !errors.As(err, &found) || found.Run.Status != StatusCancelled || found.Run.CancelledBy != "rec-lost" || !found.Listed {
			t.Fatalf("a re-execution whose cancelled run write's answer was lost: %v %+v", err, found)
		}
		if n := faults.Fired() - fired; n != 2 {
			t.Fatalf("%d faults met; want the two lost answers", n)
		}
		faults.Clear()

		// The marker's write finds the run written since the cancel
		// found none: the run is cancelled.
		late := NewRun("acme", "webhook", nil, now)
		if err := rs.Create(ctx, late); err != nil {
			t.Fatal(err)
		}
		if r, err := rs.cancelUnwritten(ctx, late.ID, live, "rec-late", "", now); err != nil || r.Status != StatusCancelled || r.CancelledBy != "rec-late" {
			t.Fatalf("a marker write finding the run: %+v %v; want it cancelled", r, err)
		}

		// With the transaction no id is listed before it is written: no
		// marker.
		tx := &DynamoRuns{Client: rs.Client, Table: rs.Table, Transactional: true}
		unused := NewRunID("acme")
		cnt.Reset()
		if _, err := tx.Cancel(ctx, unused, live, "rec", "", now); !errors.Is(err, ErrRunNotFound) || cnt.Ops()["PutItem"] != 0 {
			t.Fatalf("a transactional store's cancel of an unused id: %v, %v", err, cnt.Ops())
		}
	})
}

// TestScopeHolderCancelledBeforeItsRunIsWritten: a cancel's marker at the
// run id of a scope holder never written fences that id as a takeover's
// tombstone does (a run that is no retry is never written over it): the
// scope is taken over after the grace, and the interrupted create,
// resumed, is refused as held. Were the marker not taken as a fence, the
// takeover's tombstone would find the id taken and no create could ever
// take the scope over. On every engine.
func TestScopeHolderCancelledBeforeItsRunIsWritten(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		d := &DynamoRuns{Client: e.Client(dynamotest.FastRetries), Table: e.CreateTable(t, "RunsTable")}
		t0 := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
		crashed := scopeTestRun(t0)
		if err := d.acquireScope(ctx, scopeKey("acme", "s"), crashed); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Cancel(ctx, crashed.ID, []Status{StatusPending, StatusRunning}, "rec", "", t0); !errors.Is(err, ErrRunNotFound) {
			t.Fatalf("a cancel of the unwritten holder: %v, want ErrRunNotFound", err)
		}
		late := scopeTestRun(t0.Add(ScopeHoldGrace + time.Second))
		if err := d.CreateScoped(ctx, late, "s"); err != nil {
			t.Fatalf("after the grace: %v, want the scope taken over", err)
		}
		if err := d.CreateScoped(ctx, crashed, "s"); !errors.Is(err, ErrScopeHeld) {
			t.Fatalf("the cancelled holder's create resumed: %v, want ErrScopeHeld", err)
		}
		if _, err := d.Get(ctx, crashed.ID); !errors.Is(err, ErrRunNotFound) {
			t.Fatalf("the cancelled holder reads as a run: %v", err)
		}
	})
}

// TestCancelMarkerExpiry: a store given a MarkerRetention (Layer 1 off,
// where every run id is new, RED_TEAM 370) writes a cancel's marker with
// the TTL attribute expiresAt at the cancel's time (the clock it is
// handed) + MarkerRetention, in whole seconds; the request that listed the
// id, writing its run after the cancel, still writes it cancelled, and
// the run carries no expiry of the marker's (its own retention's alone).
// Without a MarkerRetention the marker carries none (kept forever). Its
// cost is unchanged: the cancel answered not found is still its refused
// update, the read and the marker's PutItem. On every engine.
func TestCancelMarkerExpiry(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		ctx := context.Background()
		live := []Status{StatusPending, StatusRunning}
		faults := dynamotest.NewFaults()
		cnt := dynamotest.NewCounter()
		c := e.Client(dynamotest.FastRetries, faults.Middleware(), cnt.Middleware())
		t0 := time.Date(2026, 12, 7, 8, 0, 0, 500_000_000, time.UTC)
		stored := func(d *DynamoRuns, id string) (int64, bool) {
			t.Helper()
			it, err := d.getItem(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			n, ok := it[attrExpiresAt].(*types.AttributeValueMemberN)
			if !ok {
				return 0, false
			}
			sec, err := strconv.ParseInt(n.Value, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return sec, true
		}
		for _, keep := range []time.Duration{24 * time.Hour, 0} {
			d := &DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable"), MarkerRetention: keep}
			failed := NewRun("acme", "webhook", nil, t0)
			if err := d.Create(ctx, failed); err != nil {
				t.Fatal(err)
			}
			if _, err := d.Transition(ctx, failed.ID, []Status{StatusPending}, StatusFailed, "boom", t0); err != nil {
				t.Fatal(err)
			}
			retry := NewRun("acme", "webhook", nil, t0)
			retry.RetryOf = failed.ID
			faults.FailNext("PutItem", 50, dynamotest.InternalServerError())
			if err := d.Create(ctx, retry); err == nil {
				t.Fatal("a Create whose run write failed answered nil")
			}
			faults.Clear()
			cnt.Reset()
			if _, err := d.Cancel(ctx, retry.ID, live, "once:client", "", t0); !errors.Is(err, ErrRunNotFound) {
				t.Fatalf("the cancel: %v, want ErrRunNotFound", err)
			}
			if want := map[string]int{"UpdateItem": 1, "GetItem": 1, "PutItem": 1}; !maps.Equal(cnt.Ops(), want) {
				t.Errorf("the cancel answered not found cost %v; want %v", cnt.Ops(), want)
			}
			sec, ok := stored(d, retry.ID)
			switch {
			case keep > 0 && (!ok || sec != t0.Add(keep).Unix()):
				t.Fatalf("the marker's expiresAt %d (%v); want %d, the cancel's time + %v", sec, ok, t0.Add(keep).Unix(), keep)
			case keep == 0 && ok:
				t.Fatalf("without a MarkerRetention the marker expires at %d", sec)
			}
			var found *RunExistsError
			if err := d.Create(ctx, retry); !errors.As(err, &found) || found.Run.Status != StatusCancelled {
				t.Fatalf("the run written after the cancel: %v; want it cancelled", err)
			}
			if got, err := d.Get(ctx, retry.ID); err != nil || got.Status != StatusCancelled || !got.ExpiresAt.IsZero() {
				t.Fatalf("the run: %+v %v; want cancelled, no expiry", got, err)
			}
			if sec, ok := stored(d, retry.ID); ok {
				t.Fatalf("the cancelled run kept the marker's expiresAt %d", sec)
			}
		}
	})
}
