package regionsim_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/auditor/auditfn"
	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/functions/host/stream"
	"github.com/idemkit/idemkit/internal/regionsim"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/fence"
	fencedynamo "github.com/idemkit/idemkit/ledger/fence/dynamostore"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestAuditCountsAnEscapeInEveryRegion states a limit of the audit
// counters in a multi-region deployment (MULTI_REGION.md, "Conflict
// audit"): each region's auditor reads its own replica's stream, which
// carries the other region's writes as they replicate, and a stream record
// does not say which region wrote it. Under fenced-effects every effect
// record is written in the home region (eu), yet the one attempt that
// escaped there is counted by the auditor of both regions, and neither
// records a conflict.
func TestAuditCountsAnEscapeInEveryRegion(t *testing.T) {
	p := newPair(t, "EffectsTable")
	clock := ledgertest.NewClock(time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	escaped, conflicts := map[string]int{}, 0
	auditors := map[string]*auditfn.Auditor{}
	for _, r := range []string{eu, us} {
		ca, err := conflictaudit.New(conflictaudit.Config{Strategy: fence.FencedEffects, Region: r})
		if err != nil {
			t.Fatal(err)
		}
		auditors[r] = &auditfn.Auditor{Conflicts: ca, Now: clock.Now, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}
	}
	rep, err := newReplicator(t, regionsim.Config{A: p.region(eu), B: p.region(us), KeyAttrs: []string{"pk", "sk"},
		Lag: 500 * time.Millisecond, Timestamp: updatedAt, Now: clock.Now,
		OnChange: func(c regionsim.Change) {
			cnt := auditors[c.Region].Audit(ctx(t), []stream.StreamRecord{{EventName: c.Event, Keys: c.Keys, OldImage: c.Old, NewImage: c.New}})
			mu.Lock()
			defer mu.Unlock()
			escaped[c.Region] += cnt.Escaped[auditfn.TableEffects]
			conflicts += cnt.Conflicts
		}})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := fencedynamo.New(fencedynamo.Config{Client: p.db(eu), Table: p.emu[eu].CreateTable(t, "FenceTable")})
	if err != nil {
		t.Fatal(err)
	}
	owner, err := fence.New(fence.Config{Store: fs, Region: eu, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	w := &twoRegions{p: p, clock: clock}
	l := w.homeLedger(t, us, owner) // a us executor, writing in the home region as the kit wires it
	eff := business(t, "escapes-once")
	if _, err := l.Do(ctx(t), eff, owner.Guard(func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.Uncertain(errors.New("provider timeout"))
	})); !errors.Is(err, ledger.ErrUncertain) {
		t.Fatalf("Do: %v, want the attempt escaped", err)
	}
	for range 3 {
		clock.Advance(time.Second)
		if err := rep.Sync(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if escaped[eu] != 1 || escaped[us] != 1 || conflicts != 0 {
		t.Fatalf("escapes counted eu %d, us %d; conflicts %d; want one escape counted in each region's stream, no conflict",
			escaped[eu], escaped[us], conflicts)
	}
}
