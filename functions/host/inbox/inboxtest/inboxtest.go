// Package inboxtest is the conformance suite every inbox.Store passes.
//
// A store runs it from a test:
//
//	func TestConformance(t *testing.T) {
//		inboxtest.Run(t, inboxtest.Harness{NewStore: func(t *testing.T, cfg inbox.Config) inbox.Store { return inbox.NewMem(cfg) }})
//	}
//
// The cases, each a subtest of Run:
//
//   - KeepListGet: an entry is kept once per id, listed oldest first as
//     kept (its changes, reason and time intact), and never listed, found
//     or decided across tenants.
//   - DiscardIsFinal: a waiting entry discarded leaves the listing, Get
//     shows it discarded by its decision, and nothing moves it again
//     (another discard, a resubmission, a Keep).
//   - ResubmitHoldsThenFinishes: a resubmission holds the entry (still
//     listed), only its holder finishes it, and a resubmission refused
//     again hands it back waiting (Keep by the holder), updated, or as it
//     was (Decide to Waiting by the holder).
//   - RacingDecisions: the compare-and-set of Resubmitting and Discarded:
//     many discards and resubmissions (distinct decisions) race on one
//     waiting entry; exactly one wins, every loser gets a *DecidedError
//     naming the winner's state and decision.
//   - RacingFinish: the compare-and-set of Resubmitted: the holder and
//     many others race to finish a held entry; only the holder succeeds.
//   - RacingKeep: the compare-and-set of Keep: a holder handing the entry
//     back races discards; either the hand-back comes first and one
//     discard wins, or the entry stays held; never both a discard and a
//     waiting entry.
//   - LostResponse: for every compare-and-set (Resubmitting, Resubmitted,
//     Discarded, Keep by the holder), a decision whose answer was lost is
//     retried with the same by and answered as if it had been seen, while
//     another decision still loses; with Harness.LoseNextResponse the
//     write really applies and its response is dropped in transport.
//   - Forgets: a final entry decided Config.Retention before a later
//     decision is forgotten (ErrNotFound); a waiting or held one never.
//   - CallerShare: a caller holds at most Config.MaxPerCaller listed
//     entries (waiting or held): one more new entry of that caller is
//     ErrFull, nothing written, while another caller's is kept; the same
//     entry kept again, and a hand-back, are never refused for it; an
//     entry decided (discarded, resubmitted) frees its place; entries of
//     the tenant-wide caller ("") take no share; new entries of one caller
//     racing at the share keep exactly the share, and racing after
//     decisions freed places keep exactly the places freed.
package inboxtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/inbox"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/decided"
)

// Harness is what a store hands the suite.
type Harness struct {
	// NewStore returns a fresh (or isolated) store with cfg. Called once
	// per subtest. Required.
	NewStore func(t *testing.T, cfg inbox.Config) inbox.Store
	// LoseNextResponse, if set, makes the next write of the stores
	// NewStore returned in this test apply and then lose its response
	// (for Dynamo: fault injection after the request was sent). Default
	// nil: LostResponse drops the first answer itself.
	LoseNextResponse func(t *testing.T)
	// Goroutines sizes the racing cases. Default 16.
	Goroutines int
}

// Run runs the suite against the stores h.NewStore returns.
func Run(t *testing.T, h Harness) {
	if h.NewStore == nil {
		t.Fatal("inboxtest: Harness.NewStore is required")
	}
	if h.Goroutines <= 0 {
		h.Goroutines = 16
	}
	for _, c := range []struct {
		name string
		run  func(*testing.T, Harness)
	}{
		{"KeepListGet", keepListGet},
		{"DiscardIsFinal", discardIsFinal},
		{"ResubmitHoldsThenFinishes", resubmitHoldsThenFinishes},
		{"RacingDecisions", racingDecisions},
		{"RacingFinish", racingFinish},
		{"RacingKeep", racingKeep},
		{"LostResponse", lostResponse},
		{"Forgets", forgets},
		{"CallerShare", callerShare},
		{"CallerShareIsPerTenant", callerSharePerTenant},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, h) })
	}
}

var base = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// entry returns a waiting entry of tenant refused at base+d.
func entry(tenant string, n int, d time.Duration) inbox.Entry {
	return inbox.Entry{ID: inbox.EntryID(idem.ClaimInfo{ID: fmt.Sprintf("claim-%d", n), OriginalRequestID: "r"}, true), Tenant: tenant,
		Caller: "caller-a", Operation: "cancelRun", RecordID: tenant + "/runrunrunrunrunrun1", DecidedVersion: 1, CurrentVersion: 3,
		CreatedAt: base.Add(d), Reason: fmt.Sprintf("offline \"%d\" ✓", n),
		Changes: []decided.FieldChange{{Field: "status", Old: json.RawMessage(`"pending"`), New: json.RawMessage(`"running"`), Version: 3}}}
}

func keep(t *testing.T, s inbox.Store, e inbox.Entry, by string) {
	t.Helper()
	if err := s.Keep(context.Background(), e, by); err != nil {
		t.Fatalf("Keep %s: %v", e.ID, err)
	}
}

func get(t *testing.T, s inbox.Store, tenant, id string) inbox.Entry {
	t.Helper()
	e, err := s.Get(context.Background(), tenant, id)
	if err != nil {
		t.Fatalf("Get %s: %v", id, err)
	}
	return e
}

func listed(t *testing.T, s inbox.Store, tenant string) []string {
	t.Helper()
	l, err := s.List(context.Background(), tenant)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	ids := []string{}
	for _, e := range l {
		ids = append(ids, e.ID)
	}
	return ids
}

// decidedBy asserts err is a *DecidedError whose entry is in state by by.
func decidedBy(t *testing.T, err error, state inbox.State, by string) {
	t.Helper()
	var de *inbox.DecidedError
	if !errors.As(err, &de) || !errors.Is(err, inbox.ErrDecided) || de.Entry.State != state || de.Entry.By != by {
		t.Fatalf("want a DecidedError (%s by %s), got %v", state, by, err)
	}
}

func keepListGet(t *testing.T, h Harness) {
	s, ctx := h.NewStore(t, inbox.Config{}), context.Background()
	a1, a2, g1 := entry("acme", 1, 0), entry("acme", 2, time.Second), entry("globex", 1, 0)
	for _, e := range []inbox.Entry{a2, a1, a1, g1} {
		keep(t, s, e, "")
	}
	l, err := s.List(ctx, "acme")
	if err != nil || len(l) != 2 || l[0].ID != a1.ID || l[1].ID != a2.ID || string(l[0].Changes[0].New) != `"running"` ||
		!l[0].CreatedAt.Equal(base) || l[0].State != inbox.Waiting || l[0].Caller != "caller-a" || l[0].CurrentVersion != 3 ||
		l[0].Reason != a1.Reason || l[1].Reason != a2.Reason {
		t.Fatalf("acme's inbox: %+v %v", l, err)
	}
	// An entry without a reason has none.
	none := entry("acme", 3, 2*time.Second)
	none.Reason = ""
	keep(t, s, none, "")
	if e := get(t, s, "acme", none.ID); e.Reason != "" {
		t.Fatalf("an entry without a reason: %+v", e)
	}
	if ids := listed(t, s, "initech"); len(ids) != 0 {
		t.Fatalf("an empty inbox: %v", ids)
	}
	if e := get(t, s, "acme", a2.ID); e.ID != a2.ID || e.State != inbox.Waiting || e.By != "" || e.Reason != a2.Reason {
		t.Fatalf("Get: %+v", e)
	}
	if _, err := s.Get(ctx, "initech", a2.ID); !errors.Is(err, inbox.ErrNotFound) {
		t.Fatalf("another tenant's entry: %v", err)
	}
	if _, err := s.Decide(ctx, "initech", a2.ID, inbox.Discarded, "d1", base); !errors.Is(err, inbox.ErrNotFound) {
		t.Fatalf("another tenant decided it: %v", err)
	}
	if ids := listed(t, s, "globex"); len(ids) != 1 || ids[0] != g1.ID {
		t.Fatalf("globex's own entry: %v", ids)
	}
	if !inbox.ValidEntryID(a1.ID) || inbox.ValidEntryID("../x") || inbox.ValidEntryID("") {
		t.Fatal("ValidEntryID")
	}
}

func discardIsFinal(t *testing.T, h Harness) {
	s, ctx := h.NewStore(t, inbox.Config{}), context.Background()
	a, b := entry("acme", 1, 0), entry("acme", 2, time.Second)
	keep(t, s, a, "")
	keep(t, s, b, "")
	e, err := s.Decide(ctx, "acme", a.ID, inbox.Discarded, "d1", base.Add(time.Minute))
	if err != nil || e.State != inbox.Discarded || e.By != "d1" || !e.DecidedAt.Equal(base.Add(time.Minute)) || e.RecordID != a.RecordID || e.Reason != a.Reason {
		t.Fatalf("discard: %+v %v", e, err)
	}
	if ids := listed(t, s, "acme"); len(ids) != 1 || ids[0] != b.ID {
		t.Fatalf("a discarded entry is listed: %v", ids)
	}
	if g := get(t, s, "acme", a.ID); g.State != inbox.Discarded || g.By != "d1" || !reflect.DeepEqual(g, e) {
		t.Fatalf("Get after discard: %+v, want the entry the decision answered, %+v", g, e)
	}
	for _, to := range []inbox.State{inbox.Discarded, inbox.Resubmitting, inbox.Resubmitted} {
		_, err := s.Decide(ctx, "acme", a.ID, to, "d2", base.Add(time.Minute))
		decidedBy(t, err, inbox.Discarded, "d1")
	}
	decidedBy(t, s.Keep(ctx, a, ""), inbox.Discarded, "d1")
	decidedBy(t, s.Keep(ctx, a, "d1"), inbox.Discarded, "d1")
	if g := get(t, s, "acme", a.ID); g.State != inbox.Discarded {
		t.Fatalf("a discarded entry revived: %+v", g)
	}
	if _, err := s.Decide(ctx, "acme", entry("acme", 9, 0).ID, inbox.Discarded, "d1", base); !errors.Is(err, inbox.ErrNotFound) {
		t.Fatalf("an unknown entry: %v", err)
	}
}

func resubmitHoldsThenFinishes(t *testing.T, h Harness) {
	s, ctx := h.NewStore(t, inbox.Config{}), context.Background()
	a := entry("acme", 1, 0)
	keep(t, s, a, "")
	e, err := s.Decide(ctx, "acme", a.ID, inbox.Resubmitting, "r1", base)
	if err != nil || e.State != inbox.Resubmitting || e.By != "r1" || e.Reason != a.Reason {
		t.Fatalf("take: %+v %v", e, err)
	}
	if ids := listed(t, s, "acme"); len(ids) != 1 {
		t.Fatalf("a held entry is listed: %v", ids)
	}
	_, err = s.Decide(ctx, "acme", a.ID, inbox.Discarded, "d1", base)
	decidedBy(t, err, inbox.Resubmitting, "r1")
	_, err = s.Decide(ctx, "acme", a.ID, inbox.Resubmitted, "r2", base)
	decidedBy(t, err, inbox.Resubmitting, "r1")
	decidedBy(t, s.Keep(ctx, a, ""), inbox.Resubmitting, "r1")
	decidedBy(t, s.Keep(ctx, a, "r2"), inbox.Resubmitting, "r1")
	// Refused again: the holder hands it back, updated.
	upd := a
	upd.CurrentVersion, upd.CreatedAt = 5, base.Add(time.Hour)
	keep(t, s, upd, "r1")
	if g := get(t, s, "acme", a.ID); g.State != inbox.Waiting || g.By != "" || g.CurrentVersion != 5 || !g.CreatedAt.Equal(base.Add(time.Hour)) || g.Reason != a.Reason {
		t.Fatalf("handed back: %+v", g)
	}
	// Taken again (by another decision), handed back as it was (Decide
	// to Waiting: only by its holder, again to its retry), and taken and
	// finished.
	if _, err := s.Decide(ctx, "acme", a.ID, inbox.Resubmitting, "r2", base); err != nil {
		t.Fatal(err)
	}
	_, err = s.Decide(ctx, "acme", a.ID, inbox.Waiting, "r1", base)
	decidedBy(t, err, inbox.Resubmitting, "r2")
	for range 2 {
		e, err = s.Decide(ctx, "acme", a.ID, inbox.Waiting, "r2", base)
		if err != nil || e.State != inbox.Waiting || e.By != "" || !e.DecidedAt.IsZero() || e.CurrentVersion != 5 || !e.CreatedAt.Equal(base.Add(time.Hour)) {
			t.Fatalf("handed back as it was: %+v %v", e, err)
		}
	}
	if g := get(t, s, "acme", a.ID); g.State != inbox.Waiting || g.By != "" || g.CurrentVersion != 5 || g.Reason != a.Reason {
		t.Fatalf("handed back as it was: %+v", g)
	}
	if _, err := s.Decide(ctx, "acme", a.ID, inbox.Resubmitting, "r2", base); err != nil {
		t.Fatal(err)
	}
	e, err = s.Decide(ctx, "acme", a.ID, inbox.Resubmitted, "r2", base.Add(time.Minute))
	if err != nil || e.State != inbox.Resubmitted || e.By != "r2" {
		t.Fatalf("finish: %+v %v", e, err)
	}
	if ids := listed(t, s, "acme"); len(ids) != 0 {
		t.Fatalf("a resubmitted entry is listed: %v", ids)
	}
	_, err = s.Decide(ctx, "acme", a.ID, inbox.Discarded, "d1", base)
	decidedBy(t, err, inbox.Resubmitted, "r2")
	decidedBy(t, s.Keep(ctx, a, "r2"), inbox.Resubmitted, "r2")
}

// race runs n decisions at once; it returns each one's error.
func race(n int, decide func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			errs[i] = decide(i)
		}(i)
	}
	close(start)
	wg.Wait()
	return errs
}

func racingDecisions(t *testing.T, h Harness) {
	s, ctx := h.NewStore(t, inbox.Config{}), context.Background()
	for round := 0; round < 4; round++ {
		a := entry("acme", 100+round, 0)
		keep(t, s, a, "")
		to := func(i int) inbox.State {
			if (i+round)%2 == 0 {
				return inbox.Discarded
			}
			return inbox.Resubmitting
		}
		errs := race(h.Goroutines, func(i int) error {
			_, err := s.Decide(ctx, "acme", a.ID, to(i), fmt.Sprintf("by-%d", i), base)
			return err
		})
		winners := []int{}
		for i, err := range errs {
			if err == nil {
				winners = append(winners, i)
			} else if !errors.Is(err, inbox.ErrDecided) {
				t.Fatalf("round %d: decision %d: %v", round, i, err)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d decisions won one entry (%v)", round, len(winners), winners)
		}
		w := winners[0]
		g := get(t, s, "acme", a.ID)
		if g.State != to(w) || g.By != fmt.Sprintf("by-%d", w) {
			t.Fatalf("round %d: winner %d (%s) but the entry is %s by %s", round, w, to(w), g.State, g.By)
		}
		for i, err := range errs {
			if i != w {
				decidedBy(t, err, to(w), g.By)
			}
		}
	}
}

func racingFinish(t *testing.T, h Harness) {
	s, ctx := h.NewStore(t, inbox.Config{}), context.Background()
	a := entry("acme", 1, 0)
	keep(t, s, a, "")
	if _, err := s.Decide(ctx, "acme", a.ID, inbox.Resubmitting, "by-0", base); err != nil {
		t.Fatal(err)
	}
	errs := race(h.Goroutines, func(i int) error {
		_, err := s.Decide(ctx, "acme", a.ID, inbox.Resubmitted, fmt.Sprintf("by-%d", i), base)
		return err
	})
	for i, err := range errs {
		switch {
		case i == 0 && err != nil:
			t.Fatalf("the holder could not finish: %v", err)
		case i != 0 && err == nil:
			t.Fatalf("decision %d finished an entry another holds", i)
		}
	}
	if g := get(t, s, "acme", a.ID); g.State != inbox.Resubmitted || g.By != "by-0" {
		t.Fatalf("after the race: %+v", g)
	}
}

func racingKeep(t *testing.T, h Harness) {
	s, ctx := h.NewStore(t, inbox.Config{}), context.Background()
	for round := 0; round < 4; round++ {
		a := entry("acme", 200+round, 0)
		keep(t, s, a, "")
		if _, err := s.Decide(ctx, "acme", a.ID, inbox.Resubmitting, "holder", base); err != nil {
			t.Fatal(err)
		}
		var keepErr error
		errs := race(h.Goroutines, func(i int) error {
			if i == 0 {
				keepErr = s.Keep(ctx, a, "holder")
				return keepErr
			}
			_, err := s.Decide(ctx, "acme", a.ID, inbox.Discarded, fmt.Sprintf("by-%d", i), base)
			return err
		})
		if keepErr != nil {
			t.Fatalf("round %d: the holder could not hand the entry back: %v", round, keepErr)
		}
		wins := 0
		for _, err := range errs[1:] {
			if err == nil {
				wins++
			} else if !errors.Is(err, inbox.ErrDecided) {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		g := get(t, s, "acme", a.ID)
		switch {
		case wins == 1 && g.State == inbox.Discarded:
		case wins == 0 && g.State == inbox.Waiting:
		default:
			t.Fatalf("round %d: %d discards won, the entry is %s", round, wins, g.State)
		}
	}
}

func lostResponse(t *testing.T, h Harness) {
	s, ctx := h.NewStore(t, inbox.Config{}), context.Background()
	lose := func() {
		if h.LoseNextResponse != nil {
			h.LoseNextResponse(t)
		}
	}
	// decide makes the decision, its answer lost, then its retry.
	decide := func(id string, to inbox.State, by string) {
		t.Helper()
		lose()
		_, _ = s.Decide(ctx, "acme", id, to, by, base) // the answer never reached the caller
		e, err := s.Decide(ctx, "acme", id, to, by, base.Add(time.Second))
		if err != nil || e.By != by || (e.State != to && !(to == inbox.Resubmitting && e.State == inbox.Resubmitted)) {
			t.Fatalf("the retry of %s by %s: %+v %v", to, by, e, err)
		}
	}
	a, b := entry("acme", 1, 0), entry("acme", 2, 0)
	keep(t, s, a, "")
	keep(t, s, b, "")
	decide(a.ID, inbox.Discarded, "d1")
	_, err := s.Decide(ctx, "acme", a.ID, inbox.Resubmitting, "r1", base)
	decidedBy(t, err, inbox.Discarded, "d1")

	decide(b.ID, inbox.Resubmitting, "r1")
	_, err = s.Decide(ctx, "acme", b.ID, inbox.Discarded, "d2", base)
	decidedBy(t, err, inbox.Resubmitting, "r1")
	// The holder's hand-back whose answer was lost, retried.
	lose()
	_ = s.Keep(ctx, b, "r1")
	keep(t, s, b, "r1")
	if g := get(t, s, "acme", b.ID); g.State != inbox.Waiting {
		t.Fatalf("after the hand-back: %+v", g)
	}
	decide(b.ID, inbox.Resubmitting, "r2")
	decide(b.ID, inbox.Resubmitted, "r2")
	// A retry of the taking that finds its own resubmission finished.
	if e, err := s.Decide(ctx, "acme", b.ID, inbox.Resubmitting, "r2", base); err != nil || e.State != inbox.Resubmitted {
		t.Fatalf("a retry after the finish: %+v %v", e, err)
	}
	_, err = s.Decide(ctx, "acme", b.ID, inbox.Discarded, "d2", base)
	decidedBy(t, err, inbox.Resubmitted, "r2")
}

func forgets(t *testing.T, h Harness) {
	s, ctx := h.NewStore(t, inbox.Config{Retention: time.Hour}), context.Background()
	old, held, waiting, fresh, later := entry("acme", 1, 0), entry("acme", 2, 0), entry("acme", 3, 0), entry("acme", 4, 0), entry("acme", 5, 0)
	for _, e := range []inbox.Entry{old, held, waiting, fresh, later} {
		keep(t, s, e, "")
	}
	if _, err := s.Decide(ctx, "acme", old.ID, inbox.Discarded, "d1", base); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decide(ctx, "acme", held.ID, inbox.Resubmitting, "r1", base); err != nil {
		t.Fatal(err)
	}
	// Within the retention: remembered.
	if _, err := s.Decide(ctx, "acme", fresh.ID, inbox.Discarded, "d2", base.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if g := get(t, s, "acme", old.ID); g.State != inbox.Discarded {
		t.Fatalf("forgotten too soon: %+v", g)
	}
	// Past it: forgotten by the next decision; the others stay.
	if _, err := s.Decide(ctx, "acme", later.ID, inbox.Discarded, "d3", base.Add(time.Hour+time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "acme", old.ID); !errors.Is(err, inbox.ErrNotFound) {
		t.Fatalf("not forgotten: %v", err)
	}
	if g := get(t, s, "acme", held.ID); g.State != inbox.Resubmitting {
		t.Fatalf("a held entry was forgotten: %+v", g)
	}
	if g := get(t, s, "acme", waiting.ID); g.State != inbox.Waiting {
		t.Fatalf("a waiting entry was forgotten: %+v", g)
	}
	if g := get(t, s, "acme", fresh.ID); g.State != inbox.Discarded {
		t.Fatalf("a recent decision was forgotten: %+v", g)
	}
}

func callerShare(t *testing.T, h Harness) {
	const share = 3
	s, ctx := h.NewStore(t, inbox.Config{MaxPerCaller: share}), context.Background()
	of := func(caller string, n int) inbox.Entry {
		e := entry("acme", n, time.Duration(n)*time.Second)
		e.Caller = caller
		return e
	}
	for n := range share {
		keep(t, s, of("caller-a", n), "")
	}
	if err := s.Keep(ctx, of("caller-a", 10), ""); !errors.Is(err, inbox.ErrFull) {
		t.Fatalf("a new entry past the caller's share: %v", err)
	}
	if _, err := s.Get(ctx, "acme", of("caller-a", 10).ID); !errors.Is(err, inbox.ErrNotFound) {
		t.Fatalf("the refused entry was written: %v", err)
	}
	keep(t, s, of("caller-b", 20), "")
	for n := range share + 2 {
		keep(t, s, of("", 30+n), "")
	}
	// The same entry again, and a hand-back, at the share.
	again := of("caller-a", 0)
	again.CurrentVersion = 7
	keep(t, s, again, "")
	if _, err := s.Decide(ctx, "acme", again.ID, inbox.Resubmitting, "r1", base); err != nil {
		t.Fatal(err)
	}
	again.CurrentVersion = 8
	keep(t, s, again, "r1")
	// A decision frees a place.
	if _, err := s.Decide(ctx, "acme", of("caller-a", 1).ID, inbox.Discarded, "d1", base); err != nil {
		t.Fatal(err)
	}
	keep(t, s, of("caller-a", 11), "")
	if err := s.Keep(ctx, of("caller-a", 12), ""); !errors.Is(err, inbox.ErrFull) {
		t.Fatalf("a new entry past the caller's share after a decision: %v", err)
	}
	if _, err := s.Decide(ctx, "acme", of("caller-a", 2).ID, inbox.Resubmitting, "r2", base); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decide(ctx, "acme", of("caller-a", 2).ID, inbox.Resubmitted, "r2", base); err != nil {
		t.Fatal(err)
	}
	keep(t, s, of("caller-a", 12), "")
	// Racing at the share: exactly the share kept.
	errs := race(h.Goroutines, func(i int) error { return s.Keep(ctx, of("caller-c", 100+i), "") })
	kept := 0
	for _, err := range errs {
		switch {
		case err == nil:
			kept++
		case !errors.Is(err, inbox.ErrFull):
			t.Fatalf("a racing keep: %v", err)
		}
	}
	l, err := s.List(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, e := range l {
		per[e.Caller]++
	}
	if kept != share || per["caller-c"] != share || per["caller-a"] != share || per["caller-b"] != 1 || per[""] != share+2 {
		t.Fatalf("%d racing keeps succeeded; listed per caller %v", kept, per)
	}
	// Racing after decisions freed places (the caller's count ran ahead of
	// its entries): exactly the freed places kept, however the racers'
	// reads and writes interleave.
	for freed := 1; freed <= 2; freed++ {
		caller := fmt.Sprintf("caller-d%d", freed)
		for n := range share {
			keep(t, s, of(caller, 200+10*freed+n), "")
		}
		for n := range freed {
			if _, err := s.Decide(ctx, "acme", of(caller, 200+10*freed+n).ID, inbox.Discarded, "d", base); err != nil {
				t.Fatal(err)
			}
		}
		errs := race(h.Goroutines, func(i int) error { return s.Keep(ctx, of(caller, 1000+100*freed+i), "") })
		kept := 0
		for _, err := range errs {
			switch {
			case err == nil:
				kept++
			case !errors.Is(err, inbox.ErrFull):
				t.Fatalf("%d freed: a racing keep: %v", freed, err)
			}
		}
		if got := len(listedOf(t, s, caller)); kept != freed || got != share {
			t.Fatalf("%d places freed: %d racing keeps succeeded; the caller lists %d entries, its share is %d", freed, kept, got, share)
		}
	}
}

// callerSharePerTenant: a caller's share is counted within one tenant; the
// same caller name at its share in another tenant takes no place here.
func callerSharePerTenant(t *testing.T, h Harness) {
	const share = 2
	s, ctx := h.NewStore(t, inbox.Config{MaxPerCaller: share}), context.Background()
	for n := range share {
		keep(t, s, entry("globex", n, time.Duration(n)*time.Second), "")
	}
	if err := s.Keep(ctx, entry("globex", 9, 9*time.Second), ""); !errors.Is(err, inbox.ErrFull) {
		t.Fatalf("a new entry past the caller's share in its tenant: %v", err)
	}
	for n := range share {
		keep(t, s, entry("acme", 10+n, time.Duration(n)*time.Second), "")
	}
	if got := len(listedOf(t, s, "caller-a")); got != share {
		t.Fatalf("acme lists %d entries of the caller, want %d (its share, untouched by another tenant's)", got, share)
	}
}

// listedOf returns the ids of caller's listed entries in tenant acme.
func listedOf(t *testing.T, s inbox.Store, caller string) []string {
	t.Helper()
	l, err := s.List(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range l {
		if e.Caller == caller {
			ids = append(ids, e.ID)
		}
	}
	return ids
}
