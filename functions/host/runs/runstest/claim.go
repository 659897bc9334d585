package runstest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
)

// The stale window of the claim cases: a run is stale once it has made no
// progress for a minute.
const window = time.Minute

func staleLists(t *testing.T, e *env) {
	old, running, young, ended := e.newRun(t, 0), e.running(t, time.Second), e.newRun(t, 2*window), e.newRun(t, 0)
	if _, err := e.st.Transition(e.ctx, ended.ID, live, runs.StatusCompleted, "", e.now); err != nil {
		t.Fatal(err)
	}
	before := e.at(2*window - window/2)
	ids, err := e.st.Stale(e.ctx, before, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, id := range ids {
		got[id] = true
	}
	if len(ids) != 2 || !got[old.ID] || !got[running.ID] {
		t.Fatalf("stale %v, want the old pending and running runs only (not %s young, %s ended)", ids, young.ID, ended.ID)
	}
	if ids, err := e.st.Stale(e.ctx, before, 1); err != nil || len(ids) != 1 {
		t.Fatalf("stale with limit 1: %v %v", ids, err)
	}
}

// staleRace: resumers passing at once (each lists the stale runs, then
// claims every one listed) take each run exactly once.
func staleRace(t *testing.T, e *env) {
	ids := map[string]int{}
	for i := 0; i < 6; i++ {
		ids[e.running(t, 0).ID] = 0
	}
	claimed := make([][]string, e.racers)
	for _, err := range e.race(func(i int) error {
		listed, err := e.st.Stale(e.ctx, e.at(0), 0)
		if err != nil {
			return err
		}
		for _, id := range listed {
			_, err := e.st.Claim(e.ctx, id, e.at(0), e.at(window))
			switch {
			case err == nil:
				claimed[i] = append(claimed[i], id)
			case !errors.Is(err, runs.ErrStatusConflict):
				return err
			}
		}
		return nil
	}) {
		if err != nil {
			t.Fatalf("racing pass: %v", err)
		}
	}
	for _, c := range claimed {
		for _, id := range c {
			ids[id]++
		}
	}
	for id, n := range ids {
		if n != 1 {
			t.Fatalf("run %s claimed %d times by racing passes, want once (%v)", id, n, ids)
		}
	}
}

// staleLostAnswer: the listing's answer was lost; listing again answers
// the same runs (a read changes nothing).
func staleLostAnswer(t *testing.T, e *env) {
	a, b := e.running(t, 0), e.newRun(t, 0)
	e.lose("Query")
	if _, err := e.st.Stale(e.ctx, e.at(0), 0); err != nil {
		t.Logf("the listing whose answer was lost: %v", err)
	}
	ids, err := e.st.Stale(e.ctx, e.at(0), 0)
	if err != nil || len(ids) != 2 || !slices.Contains(ids, a.ID) || !slices.Contains(ids, b.ID) {
		t.Fatalf("listing again: %v %v, want both runs", ids, err)
	}
}

func claimCAS(t *testing.T, e *env) {
	r := e.running(t, 0)
	before := e.at(0)
	now := e.at(window)
	got, err := e.st.Claim(e.ctx, r.ID, before, now)
	if err != nil || got.Epoch != 2 || !got.UpdatedAt.Equal(now) || got.Status != runs.StatusRunning || got.Version != r.Version {
		t.Fatalf("claim: %+v %v, want epoch 2, updatedAt now, the version kept", got, err)
	}
	// Progress since the bound (the claim itself): refused, unchanged.
	cur, err := e.st.Claim(e.ctx, r.ID, before, e.at(2*window))
	if !errors.Is(err, runs.ErrStatusConflict) || cur.Epoch != 2 {
		t.Fatalf("a claim of a run with progress since: %+v %v", cur, err)
	}
	parked := e.newRun(t, 0)
	if err := e.st.Schedule(e.ctx, parked.ID, runs.Wake{At: e.at(time.Hour)}, e.now); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Claim(e.ctx, parked.ID, e.at(window), e.at(2*window)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("a claim of a parked run: %v", err)
	}
	ended := e.newRun(t, 0)
	if _, err := e.st.Transition(e.ctx, ended.ID, live, runs.StatusCancelled, "", e.now); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Claim(e.ctx, ended.ID, e.at(window), e.at(2*window)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("a claim of an ended run: %v", err)
	}
	if _, err := e.st.Claim(e.ctx, runs.NewRunID("acme"), e.at(window), e.at(2*window)); !errors.Is(err, runs.ErrRunNotFound) {
		t.Fatalf("a claim of no run: %v", err)
	}
}

func claimRace(t *testing.T, e *env) {
	r := e.running(t, 0)
	wins := 0
	for _, err := range e.race(func(i int) error {
		// Each resumer reads its own clock: a little later for each.
		_, err := e.st.Claim(e.ctx, r.ID, e.at(0), e.at(window+time.Duration(i)*time.Millisecond))
		return err
	}) {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, runs.ErrStatusConflict):
			t.Fatalf("racing claim: %v", err)
		}
	}
	if got := e.get(t, r.ID); wins != 1 || got.Epoch != 2 {
		t.Fatalf("%d racing claims won (epoch %d), want 1 (2)", wins, got.Epoch)
	}
}

// claimLostAnswer: the claim applied and its answer was lost; the call is
// answered with the run it claimed (RED_TEAM 500: its pass drives it, not
// the next pass a bound later); a later call is a conflict (the claim is
// progress), and the run is claimable again once it has been without
// progress for the bound.
func claimLostAnswer(t *testing.T, e *env) {
	r := e.running(t, 0)
	e.lose("UpdateItem")
	if got, err := e.st.Claim(e.ctx, r.ID, e.at(0), e.at(window)); err != nil || got.Epoch != 2 {
		t.Fatalf("the claim whose answer was lost: %+v %v, want the run at epoch 2", got, err)
	}
	if _, err := e.st.Claim(e.ctx, r.ID, e.at(0), e.at(window)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("retry of an applied claim: %v, want ErrStatusConflict", err)
	}
	if e.stale(t, e.at(window-time.Millisecond), r.ID) {
		t.Fatal("a claimed run is stale before the bound passed again")
	}
	got, err := e.st.Claim(e.ctx, r.ID, e.at(window), e.at(2*window))
	if err != nil || got.Epoch != 3 {
		t.Fatalf("the claim a window later: %+v %v, want epoch 3", got, err)
	}
}

func adoptTakesAnew(t *testing.T, e *env) {
	r := e.running(t, 0)
	for want := int64(2); want <= 3; want++ {
		got, err := e.st.Adopt(e.ctx, r.ID, e.at(time.Second))
		if err != nil || got.Epoch != want || !got.UpdatedAt.Equal(e.at(time.Second)) || got.Version != r.Version {
			t.Fatalf("adopt: %+v %v, want epoch %d, the version kept", got, err, want)
		}
	}
	if _, err := e.st.Transition(e.ctx, r.ID, live, runs.StatusCompleted, "", e.now); err != nil {
		t.Fatal(err)
	}
	if cur, err := e.st.Adopt(e.ctx, r.ID, e.at(time.Hour)); !errors.Is(err, runs.ErrStatusConflict) || cur.Status != runs.StatusCompleted {
		t.Fatalf("adopting an ended run: %+v %v", cur, err)
	}
	if _, err := e.st.Adopt(e.ctx, runs.NewRunID("acme"), e.now); !errors.Is(err, runs.ErrRunNotFound) {
		t.Fatalf("adopting no run: %v", err)
	}
}

func adoptRace(t *testing.T, e *env) {
	r := e.running(t, 0)
	epochs := make([]int64, e.racers)
	for _, err := range e.race(func(i int) error {
		got, err := e.st.Adopt(e.ctx, r.ID, e.at(time.Second))
		epochs[i] = got.Epoch
		return err
	}) {
		if err != nil {
			t.Fatalf("racing adopt: %v", err)
		}
	}
	seen := map[int64]bool{}
	for _, ep := range epochs {
		if ep < 2 || seen[ep] {
			t.Fatalf("racing adopters' epochs %v: each must hold its own", epochs)
		}
		seen[ep] = true
	}
	if got := e.get(t, r.ID); got.Epoch != int64(1+e.racers) {
		t.Fatalf("epoch %d after %d adopters, want %d", got.Epoch, e.racers, 1+e.racers)
	}
}

// adoptLostAnswer: the adoption applied and its answer was lost; the call
// is answered with the epoch it took, once (RED_TEAM 500); a later call
// holds a later epoch, and the earlier one is fenced.
func adoptLostAnswer(t *testing.T, e *env) {
	r := e.running(t, 0)
	e.lose("UpdateItem")
	if got, err := e.st.Adopt(e.ctx, r.ID, e.at(time.Second)); err != nil || got.Epoch != r.Epoch+1 || e.get(t, r.ID).Epoch != r.Epoch+1 {
		t.Fatalf("the adoption whose answer was lost: %+v %v, want epoch %d, taken once", got, err, r.Epoch+1)
	}
	retry, err := e.st.Adopt(e.ctx, r.ID, e.at(time.Second))
	if err != nil || retry.Epoch < r.Epoch+2 || retry.Epoch != e.get(t, r.ID).Epoch {
		t.Fatalf("retry of an applied adoption: %+v %v, want a later epoch than the lost one, the stored one", retry, err)
	}
	if _, err := e.st.Renew(e.ctx, r.ID, retry.Epoch-1, e.at(2*time.Second)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("a renewal under the lost epoch: %v, want ErrStatusConflict", err)
	}
	if _, err := e.st.Renew(e.ctx, r.ID, retry.Epoch, e.at(2*time.Second)); err != nil {
		t.Fatalf("a renewal under the retry's epoch: %v", err)
	}
}

func renewCAS(t *testing.T, e *env) {
	r := e.running(t, 0)
	// A heartbeat every half window keeps the run out of Stale for ten
	// windows.
	for i := 1; i <= 20; i++ {
		now := e.at(time.Duration(i) * window / 2)
		got, err := e.st.Renew(e.ctx, r.ID, r.Epoch, now)
		if err != nil || !got.UpdatedAt.Equal(now) || got.Epoch != r.Epoch || got.Version != r.Version {
			t.Fatalf("renewal %d: %+v %v", i, got, err)
		}
		if e.stale(t, now.Add(-window), r.ID) {
			t.Fatalf("a renewed run is stale after renewal %d", i)
		}
	}
	if _, err := e.st.Claim(e.ctx, r.ID, e.at(9*window), e.at(10*window)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("a claim of a renewed run: %v, want ErrStatusConflict", err)
	}
	if _, err := e.st.Renew(e.ctx, r.ID, r.Epoch-1, e.at(11*window)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("a renewal under an earlier epoch: %v", err)
	}
	if _, err := e.st.Transition(e.ctx, r.ID, live, runs.StatusCompleted, "", e.at(11*window)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Renew(e.ctx, r.ID, r.Epoch, e.at(12*window)); !errors.Is(err, runs.ErrStatusConflict) {
		t.Fatalf("a renewal of an ended run: %v", err)
	}
	if _, err := e.st.Renew(e.ctx, runs.NewRunID("acme"), 1, e.now); !errors.Is(err, runs.ErrRunNotFound) {
		t.Fatalf("a renewal of no run: %v", err)
	}
	// A pending run never taken renews under epoch 0.
	p := e.newRun(t, 0)
	if _, err := e.st.Renew(e.ctx, p.ID, 0, e.at(time.Second)); err != nil {
		t.Fatalf("a renewal of a run never taken, under epoch 0: %v", err)
	}
}

// renewRaceWithClaim: a heartbeat and resumers racing on a run at the edge
// of its window: exactly one side wins. Either the renewal lands first
// (every claim refused) or a claim does (the renewal refused, one claim).
func renewRaceWithClaim(t *testing.T, e *env) {
	for round := 0; round < 4; round++ {
		r := e.running(t, 0)
		var renewed bool
		claims := 0
		errs := e.race(func(i int) error {
			if i == 0 {
				_, err := e.st.Renew(e.ctx, r.ID, r.Epoch, e.at(window))
				renewed = err == nil
				return err
			}
			_, err := e.st.Claim(e.ctx, r.ID, e.at(0), e.at(window))
			return err
		})
		for i, err := range errs {
			switch {
			case err == nil && i > 0:
				claims++
			case err != nil && !errors.Is(err, runs.ErrStatusConflict):
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if renewed == (claims == 1) || claims > 1 {
			t.Fatalf("round %d: renewed %v and %d claims won, want exactly one side", round, renewed, claims)
		}
	}
}

// renewLostAnswer: the renewal applied and its answer was lost; the retry
// succeeds again.
func renewLostAnswer(t *testing.T, e *env) {
	r := e.running(t, 0)
	e.lose("UpdateItem")
	for i := 0; i < 2; i++ {
		if got, err := e.st.Renew(e.ctx, r.ID, r.Epoch, e.at(time.Second)); err != nil || !got.UpdatedAt.Equal(e.at(time.Second)) {
			t.Fatalf("renewal %d: %+v %v", i+1, got, err)
		}
	}
}

// staleLeavesParked: a parked run (its next try scheduled, Due lists it
// when due) is not listed by Stale however long ago it parked, so parked
// runs never fill a pass's limit ahead of the runs the pass is for: a
// pass that listed them claimed none of them (Claim refuses a parked
// run) and never reached a stranded run listed after them (RED_TEAM
// 510). Once resumed it is listed again when it stops progressing.
func staleLeavesParked(t *testing.T, e *env) {
	parked := e.running(t, 0)
	if _, err := e.st.Park(e.ctx, parked.ID, parked.Epoch, runs.Wake{At: e.at(time.Hour)}, e.now); err != nil {
		t.Fatal(err)
	}
	scheduled := e.newRun(t, 0)
	if err := e.st.Schedule(e.ctx, scheduled.ID, runs.Wake{At: e.at(time.Hour)}, e.now); err != nil {
		t.Fatal(err)
	}
	stranded := e.running(t, time.Second)
	before := e.at(window)
	for _, limit := range []int{1, 0} {
		ids, err := e.st.Stale(e.ctx, before, limit)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) != 1 || ids[0] != stranded.ID {
			t.Fatalf("stale (limit %d): %v, want the stranded run %s alone (not the parked %s and %s)", limit, ids, stranded.ID, parked.ID, scheduled.ID)
		}
	}
	if _, err := e.st.Resume(e.ctx, parked.ID, e.at(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if !e.stale(t, e.at(2*time.Hour), parked.ID) {
		t.Fatal("a resumed run whose executor stopped is not listed stale")
	}
}
