package ledgertest

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/idemkit/idemkit/ledger/identity"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/idemkit/idemkit/internal/shared"
	"github.com/idemkit/idemkit/ledger"
)

var (
	schemaOnce sync.Once
	schema     *jsonschema.Schema
	schemaErr  error
)

// ProjectionSchema compiles ../shared/openwop/schemas/v2/effect-ledger-
// projection.schema.json (with ids.schema.json for its $refs), asserting
// formats such as date-time.
func ProjectionSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	dir := shared.Path(t, "openwop", "schemas", "v2")
	schemaOnce.Do(func() {
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		for _, name := range []string{"ids.schema.json", "effect-ledger-projection.schema.json"} {
			f, err := os.Open(dir + "/" + name)
			if err != nil {
				schemaErr = err
				return
			}
			doc, err := jsonschema.UnmarshalJSON(f)
			f.Close()
			if err != nil {
				schemaErr = err
				return
			}
			if err := c.AddResource("https://openwop.dev/spec/v2/"+name, doc); err != nil {
				schemaErr = err
				return
			}
		}
		schema, schemaErr = c.Compile("https://openwop.dev/spec/v2/effect-ledger-projection.schema.json")
	})
	if schemaErr != nil {
		t.Fatalf("projection schema: %v", schemaErr)
	}
	return schema
}

// ValidateProjection marshals p and validates it against the schema.
func ValidateProjection(t testing.TB, p ledger.Projection) []byte {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := ProjectionSchema(t).Validate(inst); err != nil {
		t.Fatalf("projection does not validate: %v\n%s", err, b)
	}
	return b
}

// testWitness produces every attempt state in one run and checks the
// projection: schema-valid, one row per attempt, providerKey equal to the
// key the provider received, no payloads.
func testWitness(t *testing.T, e *env) {
	ctx := context.Background()
	run := e.runID()
	l := e.ledger()
	mk := func(node string, ord uint64) ledger.Effect {
		return ledger.Effect{Identity: e.activity(run, node, ord), RunID: run, NodeID: node}
	}
	secret := "sk_live_SECRET_PAYLOAD"
	pay := func(ctx context.Context, c ledger.Call) ([]byte, error) {
		return e.prov.Call(ctx, c.ProviderKey, secret)
	}
	// completed
	mustDo(t, l, mk("charge", 0), pay)
	// released then completed
	if _, err := l.Do(ctx, mk("mail", 0), func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.NotSent(errors.New("dns"))
	}); !errors.Is(err, ledger.ErrNotSent) {
		t.Fatal(err)
	}
	mustDo(t, l, mk("mail", 0), pay)
	// escaped then completed
	e.store.failOnce(ledger.StateCompleted, errCrash)
	if _, err := l.Do(ctx, mk("ship", 0), pay); !errors.Is(err, errCrash) {
		t.Fatal(err)
	}
	e.clock.Advance(31 * time.Second)
	mustDo(t, l, mk("ship", 0), pay)
	// claimed (still running)
	release, done := e.holdEffect(mk("slow", 0))
	defer func() { close(release); <-done }()
	// a business identity in the same run
	mustDo(t, l, ledger.Effect{Identity: e.business("refund", "o-1"), RunID: run, NodeID: "refund"}, pay)

	p := e.witness(l, run, 7)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), secret) || strings.Contains(string(b), "effect-") {
		t.Fatalf("projection carries provider payloads: %s", b)
	}
	states := map[ledger.AttemptState]int{}
	keys := map[string]bool{}
	for _, k := range e.prov.Keys() {
		keys[k] = true
	}
	for _, r := range p.Effects {
		states[r.State]++
		if !keys[r.ProviderKey] && r.NodeID != "slow" {
			t.Fatalf("row providerKey %q was never sent to the provider", r.ProviderKey)
		}
		if r.Keying == identity.KeyingActivityRecipe && r.InvocationID == "" {
			t.Fatalf("activity row without invocationId: %+v", r)
		}
	}
	want := map[ledger.AttemptState]int{ledger.AttemptCompleted: 4, ledger.AttemptReleased: 1, ledger.AttemptEscaped: 1, ledger.AttemptClaimed: 1}
	for s, n := range want {
		if states[s] != n {
			t.Fatalf("states %v, want %v\n%s", states, want, b)
		}
	}
	// Another run's projection is empty, and valid.
	other, err := l.Witness(ctx, e.runID())
	if err != nil || len(other.Effects) != 0 {
		t.Fatalf("other run: %+v, %v", other, err)
	}
	ValidateProjection(t, other)
}

var slotTests = []test{
	{"FireOnce", testSlotFireOnce},
	{"NeverReleasedOnFailureOrCrash", testSlotNeverReleased},
	{"KeyspaceSeparation", testSlotKeyspace},
	{"Race16", testSlotRace16},
}

// testSlotRace16: 16 instances fire one slot at once, each through its own
// Ledger: the work runs once, and every losing call sees the slot claimed
// or completed, never fired.
func testSlotRace16(t *testing.T, e *env) {
	slot := identity.Slot{Job: "schedule-fire:race-" + rnd(4), Slot: "2026-12-07T00:00:00Z"}
	var calls atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	res := make([]ledger.SlotResult, 16)
	errs := make([]error, 16)
	for i := range res {
		l := e.ledger()
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res[i], errs[i] = l.FireOnce(context.Background(), slot, func(context.Context) error { calls.Add(1); return nil })
		}()
	}
	close(start)
	wg.Wait()
	fired := 0
	for i, r := range res {
		if errs[i] != nil {
			t.Fatalf("instance %d: %v", i, errs[i])
		}
		if r.Fired {
			fired++
		} else if r.State != ledger.StateClaimed && r.State != ledger.StateCompleted {
			t.Fatalf("instance %d lost in state %q", i, r.State)
		}
	}
	if fired != 1 || calls.Load() != 1 {
		t.Fatalf("fired %d, work ran %d times; want 1 and 1", fired, calls.Load())
	}
}

func testSlotFireOnce(t *testing.T, e *env) {
	l := e.ledger()
	slot := identity.Slot{Job: "schedule-fire:nightly-" + rnd(4), Slot: "2026-09-18T00:00:00Z"}
	calls := 0
	fn := func(context.Context) error { calls++; return nil }
	e.resetRT()
	r, err := l.FireOnce(context.Background(), slot, fn)
	e.checkRT("slot fire", 2, 2)
	if err != nil || !r.Fired || !r.OK || r.State != ledger.StateCompleted {
		t.Fatalf("first FireOnce %+v %v", r, err)
	}
	e.resetRT()
	r, err = e.ledger().FireOnce(context.Background(), slot, fn)
	e.checkRT("slot duplicate", 1, e.h.DuplicateRoundTrips)
	if err != nil || r.Fired || !r.OK || calls != 1 {
		t.Fatalf("second FireOnce %+v %v calls %d", r, err, calls)
	}
}

func testSlotNeverReleased(t *testing.T, e *env) {
	l := e.ledger()
	ctx := context.Background()
	calls := 0
	boom := errors.New("job failed half-way")
	failing := identity.Slot{Job: "job-" + rnd(4), Slot: "1"}
	if r, err := l.FireOnce(ctx, failing, func(context.Context) error { calls++; return boom }); !errors.Is(err, boom) || !r.Fired || r.OK {
		t.Fatalf("failing FireOnce %+v %v", r, err)
	}
	e.clock.Advance(time.Hour)
	r, err := l.FireOnce(ctx, failing, func(context.Context) error { calls++; return nil })
	if err != nil || r.Fired || r.OK || r.Error != boom.Error() || calls != 1 {
		t.Fatalf("FireOnce after a failure %+v %v calls %d; want not fired, failure recorded", r, err, calls)
	}
	// A firer that dies before recording keeps the slot forever, lease or not.
	crashed := identity.Slot{Job: "job-" + rnd(4), Slot: "1"}
	e.store.failOnce(ledger.StateCompleted, errCrash)
	if _, err := l.FireOnce(ctx, crashed, func(context.Context) error { calls++; return nil }); !errors.Is(err, errCrash) {
		t.Fatalf("crashed FireOnce %v", err)
	}
	e.clock.Advance(24 * time.Hour)
	r, err = e.ledger().FireOnce(ctx, crashed, func(context.Context) error { calls++; return nil })
	if err != nil || r.Fired || r.State != ledger.StateClaimed || calls != 2 {
		t.Fatalf("FireOnce after a crash %+v %v calls %d; want not fired", r, err, calls)
	}
}

func testSlotKeyspace(t *testing.T, e *env) {
	ctx := context.Background()
	l := e.ledger()
	run := e.runID()
	// A slot and an effect built from the very same strings are different
	// records; both fire.
	job, occ := "schedule-fire:job-"+rnd(4), "slot-1"
	slot := identity.Slot{Job: job, Slot: occ}
	key, err := slot.Key()
	if err != nil || !strings.HasPrefix(key, "host#") {
		t.Fatalf("slot key %q %v", key, err)
	}
	r, err := l.FireOnce(ctx, slot, func(context.Context) error { return nil })
	if err != nil || !r.Fired {
		t.Fatal(r, err)
	}
	eff := ledger.Effect{Identity: e.business(job, occ), RunID: run, NodeID: "n"}
	if res := mustDo(t, l, eff, e.charge(nil)); res.Replayed {
		t.Fatal("an effect was suppressed by a host slot")
	}
	// A hand-made identity cannot name the host keyspace.
	forged := eff.Identity
	forged.EffectID = strings.TrimPrefix(key, "host#")
	forged.EffectID = "host#" + forged.EffectID
	if _, err := l.Do(ctx, ledger.Effect{Identity: forged}, e.charge(nil)); !errors.Is(err, ledger.ErrInvalidIdentity) {
		t.Fatalf("forged effectId into the host keyspace: %v", err)
	}
	forged.EffectID = e.tenant + "/" + strings.TrimPrefix(key, "host#")
	forged.ProviderKey = identity.ProviderKey(forged.EffectID)
	if res, err := l.Do(ctx, ledger.Effect{Identity: forged}, e.charge(nil)); err != nil || res.Replayed {
		t.Fatalf("an effectId equal to the slot hash reached the slot: %+v %v", res, err)
	}
	// The slot is still fired once, and never listed in a witness.
	if r, _ := l.FireOnce(ctx, slot, func(context.Context) error { return nil }); r.Fired {
		t.Fatal("slot re-fired")
	}
	p, err := l.Witness(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range p.Effects {
		if row.EffectID != eff.Identity.EffectID {
			t.Fatalf("witness lists %+v", row)
		}
	}
}

// testEscapedShowsFireTime: an attempt that escaped (its executor died after
// the fire mark) is shown at the time it FIRED, not at the time the next
// executor found it stalled and reclaimed it; every fired attempt carries
// its fire time, and the rows with a fire time are exactly the attempts that
// may have reached the provider.
func testEscapedShowsFireTime(t *testing.T, e *env) {
	l := e.ledger()
	eff := e.effect()
	eff.RunID, eff.NodeID = e.runID(), "deliver"
	e.store.failOnce(ledger.StateCompleted, errCrash)
	firedAt := e.clock.Now().UTC().Truncate(time.Millisecond)
	if _, err := l.Do(context.Background(), eff, e.charge(nil)); !errors.Is(err, errCrash) {
		t.Fatalf("crashed Do: %v", err)
	}
	e.clock.Advance(31 * time.Second)
	// Before any reclaim the witness already shows it escaped, at its fire
	// time.
	p, err := l.Witness(context.Background(), eff.RunID)
	if err != nil {
		t.Fatal(err)
	}
	ValidateProjection(t, p)
	if len(p.Effects) != 1 || p.Effects[0].State != ledger.AttemptEscaped || p.Effects[0].At != firedAt.Format(time.RFC3339Nano) {
		t.Fatalf("before the reclaim: %+v, want one escaped row at %s", p.Effects, firedAt)
	}
	reclaimAt := e.clock.Now()
	mustDo(t, e.ledger(), eff, e.charge(nil))
	p, err = l.Witness(context.Background(), eff.RunID)
	if err != nil {
		t.Fatal(err)
	}
	ValidateProjection(t, p)
	if len(p.Effects) != 2 {
		t.Fatalf("rows %+v", p.Effects)
	}
	esc, done := p.Effects[0], p.Effects[1]
	if esc.State != ledger.AttemptEscaped || esc.At != firedAt.Format(time.RFC3339Nano) || !esc.Fired || !esc.FiredAt.Equal(firedAt) {
		t.Fatalf("escaped row %+v: want at = fired at %s (not the reclaim at %s)", esc, firedAt, reclaimAt)
	}
	if esc.EndedAt.Before(reclaimAt.Truncate(time.Millisecond)) {
		t.Fatalf("escaped row ended %s, before the reclaim %s", esc.EndedAt, reclaimAt)
	}
	if done.State != ledger.AttemptCompleted || !done.Fired || done.FiredAt.IsZero() || done.EndedAt.Before(done.FiredAt) {
		t.Fatalf("completed row %+v", done)
	}
	fired := 0
	for _, r := range p.Effects {
		if r.Fired && !r.FiredAt.IsZero() {
			fired++
		}
	}
	if fired != e.prov.Requests() {
		t.Fatalf("%d rows with a fire time, provider got %d requests", fired, e.prov.Requests())
	}
}
