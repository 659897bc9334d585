package runstest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/identity"
)

func createReadsBack(t *testing.T, e *env) {
	r := e.newRun(t, 0)
	got := e.get(t, r.ID)
	if got.ID != r.ID || got.Tenant != "acme" || got.WorkflowID != "webhook" || string(got.Inputs) != string(r.Inputs) ||
		got.Status != runs.StatusPending || !got.CreatedAt.Equal(e.now) || !got.UpdatedAt.Equal(e.now) {
		t.Fatalf("read back %+v, wrote %+v", got, r)
	}
	if got.Stamps != identity.CurrentStamps() || got.Version != 1 || got.History.Current() != 1 || got.Epoch != 0 ||
		got.Failures != 0 || !got.Wake.IsZero() || len(got.Log) != 0 {
		t.Fatalf("a new run: %+v, want the current stamps, version 1, epoch 0, nothing else", got)
	}
}

func createExists(t *testing.T, e *env) {
	r := e.newRun(t, 0)
	again := r
	again.WorkflowID = "conformance-noop"
	if err := e.st.Create(e.ctx, again); !errors.Is(err, runs.ErrRunExists) {
		t.Fatalf("create of a taken id: %v, want ErrRunExists", err)
	}
	if got := e.get(t, r.ID); got.WorkflowID != "webhook" {
		t.Fatalf("a refused create changed the run: %+v", got)
	}
}

func createRefused(t *testing.T, e *env) {
	r := runs.NewRun("acme", "webhook", nil, e.now)
	r.Stamps = identity.Stamps{}
	if err := e.st.Create(e.ctx, r); !errors.Is(err, ledger.ErrUnsupportedRecipe) {
		t.Fatalf("create without stamps: %v, want ErrUnsupportedRecipe", err)
	}
	other := runs.NewRun("acme", "webhook", nil, e.now)
	other.Tenant = "globex"
	if err := e.st.Create(e.ctx, other); err == nil {
		t.Fatal("a run under another tenant's id was created")
	}
	for _, id := range []string{r.ID, other.ID} {
		if _, err := e.st.Get(e.ctx, id); !errors.Is(err, runs.ErrRunNotFound) {
			t.Fatalf("a refused create wrote %s: %v", id, err)
		}
	}
}

func createRace(t *testing.T, e *env) {
	r := runs.NewRun("acme", "webhook", nil, e.now)
	wins := 0
	for _, err := range e.race(func(int) error { return e.st.Create(e.ctx, r) }) {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, runs.ErrRunExists):
			t.Fatalf("racing create: %v", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d racing creates of one id won, want 1", wins)
	}
}

// createLostAnswer: the create applied and its answer was lost; the retry
// finds the id taken and the run is there once, as written.
func createLostAnswer(t *testing.T, e *env) {
	r := runs.NewRun("acme", "webhook", nil, e.now)
	e.lose("PutItem")
	if err := e.st.Create(e.ctx, r); err != nil && !errors.Is(err, runs.ErrRunExists) {
		t.Logf("the create whose answer was lost: %v", err)
	}
	if err := e.st.Create(e.ctx, r); !errors.Is(err, runs.ErrRunExists) {
		t.Fatalf("retry of an applied create: %v, want ErrRunExists", err)
	}
	if got := e.get(t, r.ID); got.Version != 1 || got.Status != runs.StatusPending {
		t.Fatalf("after the retry: %+v", got)
	}
}

func linkRetrySet(t *testing.T, e *env) {
	failed := e.newRun(t, 0)
	if _, err := e.st.Transition(e.ctx, failed.ID, []runs.Status{runs.StatusPending}, runs.StatusFailed, "boom", e.now); err != nil {
		t.Fatal(err)
	}
	v := e.get(t, failed.ID).Version
	retry := runs.NewRun("acme", "webhook", nil, e.now)
	retry.RetryOf = failed.ID
	if err := e.st.Create(e.ctx, retry); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // listing it again changes nothing
		if err := e.st.LinkRetry(e.ctx, failed.ID, retry.ID); err != nil {
			t.Fatal(err)
		}
	}
	got := e.get(t, failed.ID)
	if len(got.Retries) != 1 || got.Retries[0] != retry.ID || got.Version != v {
		t.Fatalf("retries %v at version %d, want [%s] at %d", got.Retries, got.Version, retry.ID, v)
	}
	if r := e.get(t, retry.ID); r.RetryOf != failed.ID {
		t.Fatalf("the retry's retryOf %q", r.RetryOf)
	}
	if err := e.st.LinkRetry(e.ctx, runs.NewRunID("acme"), retry.ID); err != nil {
		t.Fatalf("linking to a missing run: %v, want nil", err)
	}
}

func getNotFound(t *testing.T, e *env) {
	if _, err := e.st.Get(e.ctx, runs.NewRunID("acme")); !errors.Is(err, runs.ErrRunNotFound) {
		t.Fatalf("get of no run: %v", err)
	}
}

// cancelWhileListedCase is run only with Harness.NewHooked.
const cancelWhileListedCase = "Create/CancelWhileListed"

// createCancelWhileListed: a client reads a failed run's retries at the
// moment a write of a retry's run is sent (the retry created outside a
// Layer-1 claim, as a retry request without a key is) and cancels the
// retry's id once it is listed. A cancel so made is answered as it may
// be (the run cancelled, or not found where the run is not written
// yet), but the run is never written live after it: a client told its
// cancel reached a listed id never sees that run start (RED_TEAM 345,
// 420). A run written pending with no cancel in between is cancelled by
// the next cancel.
func createCancelWhileListed(t *testing.T, newHooked func(t *testing.T, before func()) map[string]Store) {
	var hook func()
	stores := newHooked(t, func() {
		if hook != nil {
			hook()
		}
	})
	for name, st := range stores {
		t.Run(name, func(t *testing.T) {
			e := &env{st: st, ctx: context.Background(), now: base}
			failed := e.newRun(t, 0)
			if _, err := st.Transition(e.ctx, failed.ID, []runs.Status{runs.StatusPending}, runs.StatusFailed, "boom", e.now); err != nil {
				t.Fatal(err)
			}
			retry := runs.NewRun("acme", "webhook", nil, e.now)
			retry.RetryOf = failed.ID
			var cancels []error
			hook = func() {
				if len(cancels) > 0 || !slices.Contains(e.get(t, failed.ID).Retries, retry.ID) {
					return
				}
				_, err := st.Cancel(e.ctx, retry.ID, live, "once:client", "", e.now)
				cancels = append(cancels, err)
			}
			err := st.Create(e.ctx, retry)
			hook = nil
			if err != nil && !errors.Is(err, runs.ErrRunExists) {
				t.Fatalf("the retry's create: %v", err)
			}
			got := e.get(t, retry.ID)
			if len(cancels) > 0 && got.Status != runs.StatusCancelled {
				t.Fatalf("a cancel made while the retry was listed answered %v, and its run was then written %s", cancels, got.Status)
			}
			if got.Status == runs.StatusPending {
				if r, err := st.Cancel(e.ctx, retry.ID, live, "once:client", "", e.now); err != nil || r.Status != runs.StatusCancelled {
					t.Fatalf("a cancel of the listed retry: %+v %v", r, err)
				}
			}
			if f := e.get(t, failed.ID); !slices.Equal(f.Retries, []string{retry.ID}) {
				t.Fatalf("the failed run lists %v", f.Retries)
			}
		})
	}
}
