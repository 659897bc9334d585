// Package ledgertest is the conformance suite every ledger.Store must pass,
// plus test helpers (a counting fake Provider honouring Idempotency-Key, a
// manual Clock, a manual heartbeat Ticker). The same suite runs against ledger/memstore and, through
// internal/dynamotest, against ledger/dynamostore on DynamoDB Local, moto and dynalite.
//
// The suite drives the stores both directly (the conditional semantics of
// Create and Replace) and through ledger.Do / ledger.FireOnce, with tests that
// try to break exactly-once: 32 racing executors, heartbeats refused after a
// reclaim, clock skew, attempt and value caps, a crash between the
// provider call and the outcome write, a stale owner writing after its claim
// was reclaimed, expired leases, stale fencing tokens, digest mismatches.
package ledgertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"github.com/idemkit/idemkit/ledger/identity"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/clock"
	"github.com/idemkit/idemkit/internal/emf"
	"github.com/idemkit/idemkit/internal/emulator/proc"
	"github.com/idemkit/idemkit/ledger"
)

// Harness plugs a Store into the suite.
type Harness struct {
	// NewStore returns an empty store (or one no other test writes to).
	// Called once per subtest. Required.
	NewStore func(t *testing.T) ledger.Store
	// RoundTrips, if set, returns the backend round trips made since the last
	// ResetRoundTrips (e.g. a dynamotest.Counter's Total); the suite then
	// asserts the round-trip budget on the backend too. The suite always
	// asserts it on Store calls.
	RoundTrips      func() int
	ResetRoundTrips func()
	// DuplicateRoundTrips is the expected backend round trips of a
	// duplicate: 1 (default) when a failed conditional write returns the
	// existing record, 2 when the backend needs a read after it.
	DuplicateRoundTrips int
}

// Run runs the whole suite.
func Run(t *testing.T, h Harness) {
	if h.NewStore == nil {
		t.Fatal("ledgertest: Harness.NewStore is required")
	}
	if h.DuplicateRoundTrips == 0 {
		h.DuplicateRoundTrips = 1
	}
	groups := []struct {
		prefix string
		tests  []test
	}{
		{"Store/", storeTests},
		{"Do/", doTests},
		{"Do/", auditTests},
		{"Hardening/", hardeningTests},
		{"Retry/", retryTests},
		{"Slot/", slotTests},
	}
	for _, g := range groups {
		for _, tc := range g.tests {
			t.Run(g.prefix+tc.name, func(t *testing.T) { tc.fn(t, newEnv(t, h)) })
		}
	}
}

type test struct {
	name string
	fn   func(t *testing.T, e *env)
}

// hookStore wraps the store under test: it counts calls and lets a test
// fail a write (simulating a crash or an injected backend error).
type hookStore struct {
	ledger.Store
	calls         atomic.Int64
	mu            sync.Mutex
	beforeReplace func(next *ledger.Record) error
	afterReplace  func(next *ledger.Record, want ledger.Expect, ok bool, err error)
	afterCreate   func(rec *ledger.Record, won bool, err error) error
	loseAnswer    func(next *ledger.Record, ok bool, err error) error
	refErr        error
	renewErr      error
	renewStall    bool
	// stallGiven receives, for each stalled renewal, how long its context
	// gave it (its deadline from the call's start, wall time).
	stallGiven chan time.Duration
	// stallWrite, when set, picks the Replace calls stallWrites holds.
	stallWrite func(next *ledger.Record, want ledger.Expect) bool
	stalls     chan stalledWrite
	refs       atomic.Int64
}

// stalledWrite is a write stallWrites held: how long its context gave it
// (its deadline from the call's start, wall time; bounded false when it had
// no deadline) and whether that context had ended when the call came.
type stalledWrite struct {
	given   time.Duration
	bounded bool
	ended   bool
}

// stallCap is how long stallWrites holds a write whose context never ends,
// so that a test of an unbounded write fails instead of hanging.
const stallCap = 5 * time.Second

var errStallCap = errors.New("ledgertest: stalled write released after its context never ended")

func (s *hookStore) Create(ctx context.Context, r *ledger.Record, now time.Time) (bool, *ledger.Record, error) {
	s.calls.Add(1)
	won, cur, err := s.Store.Create(ctx, r, now)
	s.mu.Lock()
	after := s.afterCreate
	s.mu.Unlock()
	if after != nil {
		if herr := after(r, won, err); herr != nil {
			return false, nil, herr
		}
	}
	return won, cur, err
}

// onCreate calls fn after every Create with the record written and the
// result; an error from fn replaces the result (the claim was applied, the
// executor never learns it: a crash right after the claim).
func (s *hookStore) onCreate(fn func(rec *ledger.Record, won bool, err error) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.afterCreate = fn
}

// failAfterClaim makes the next Create that wins apply and then fail with
// err, as an executor that dies right after its claim reached the store:
// no later write of that claim's owner reaches the store either (a live
// executor would give the claim back).
func (s *hookStore) failAfterClaim(err error) {
	var done atomic.Bool
	var dead atomic.Pointer[string]
	s.onCreate(func(r *ledger.Record, won bool, _ error) error {
		if won && done.CompareAndSwap(false, true) {
			owner := r.Owner
			dead.Store(&owner)
			return err
		}
		return nil
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	s.beforeReplace = func(n *ledger.Record) error {
		if o := dead.Load(); o != nil && n.Owner == *o {
			return err
		}
		return nil
	}
}

func (s *hookStore) Replace(ctx context.Context, n *ledger.Record, w ledger.Expect, now time.Time) (bool, *ledger.Record, error) {
	s.calls.Add(1)
	s.mu.Lock()
	hook := s.beforeReplace
	after := s.afterReplace
	lose := s.loseAnswer
	if renewErr := s.renewErr; renewErr != nil && isRenewal(n, w) {
		hook = func(*ledger.Record) error { return renewErr }
	}
	if s.renewStall && isRenewal(n, w) {
		given := s.stallGiven
		hook = func(*ledger.Record) error {
			if left, ok := clock.Remaining(ctx); ok && given != nil {
				given <- left
			}
			<-ctx.Done()
			return ctx.Err()
		}
	}
	if m := s.stallWrite; m != nil && m(n, w) {
		stalls := s.stalls
		hook = func(*ledger.Record) error {
			left, ok := clock.Remaining(ctx)
			stalls <- stalledWrite{given: left, bounded: ok, ended: ctx.Err() != nil}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(stallCap):
				return errStallCap
			}
		}
	}
	s.mu.Unlock()
	if hook != nil {
		if err := hook(n); err != nil {
			if after != nil {
				after(n, w, false, err)
			}
			return false, nil, err
		}
	}
	ok, cur, err := s.Store.Replace(ctx, n, w, now)
	if after != nil {
		after(n, w, ok, err)
	}
	if lose != nil {
		if lerr := lose(n, ok, err); lerr != nil {
			return false, nil, lerr
		}
	}
	return ok, cur, err
}

func (s *hookStore) AddRunRef(ctx context.Context, key, run string, exp time.Time) error {
	s.calls.Add(1)
	s.refs.Add(1)
	s.mu.Lock()
	err := s.refErr
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.Store.AddRunRef(ctx, key, run, exp)
}

// onRenewal calls fn after every heartbeat renewal (a Replace of a firing
// record expecting firing, by the same owner and attempt: a fused reclaim
// also writes firing over firing, but for a new owner) with its result.
func (s *hookStore) onRenewal(fn func(ok bool, err error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.afterReplace = func(n *ledger.Record, w ledger.Expect, ok bool, err error) {
		if isRenewal(n, w) {
			fn(ok, err)
		}
	}
}

// isRenewal reports whether a Replace of next expecting want is a heartbeat
// renewal.
func isRenewal(next *ledger.Record, want ledger.Expect) bool {
	return next.State == ledger.StateFiring && want.State == ledger.StateFiring &&
		next.Owner == want.Owner && next.Attempt == want.Attempt
}

func (s *hookStore) setRefErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refErr = err
}

func (s *hookStore) Get(ctx context.Context, key string) (*ledger.Record, error) {
	s.calls.Add(1)
	return s.Store.Get(ctx, key)
}

func (s *hookStore) ListByRun(ctx context.Context, run string) ([]*ledger.Record, error) {
	s.calls.Add(1)
	return s.Store.ListByRun(ctx, run)
}

// failOnce makes the next Replace writing a record in state st fail with err.
func (s *hookStore) failOnce(st ledger.State, err error) {
	var done atomic.Bool
	s.mu.Lock()
	defer s.mu.Unlock()
	s.beforeReplace = func(n *ledger.Record) error {
		if n.State == st && done.CompareAndSwap(false, true) {
			return err
		}
		return nil
	}
}

// loseAnswerOnce makes the next Replace writing a record in state st that
// the store applies return err instead of its answer: the write landed,
// the executor never learns it (a response lost on its way back).
func (s *hookStore) loseAnswerOnce(st ledger.State, err error) {
	var done atomic.Bool
	s.mu.Lock()
	defer s.mu.Unlock()
	s.loseAnswer = func(n *ledger.Record, ok bool, werr error) error {
		if ok && werr == nil && n.State == st && done.CompareAndSwap(false, true) {
			return err
		}
		return nil
	}
}

// failRenewals makes every heartbeat renewal (see isRenewal) from now on
// fail with err before it reaches the store, as a store outage that lasts;
// other writes (a reclaim by another executor, an outcome) go through.
func (s *hookStore) failRenewals(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renewErr = err
}

// stallRenewals makes every heartbeat renewal (see isRenewal) from now on
// hang, as a store that never answers, until its context ends; it then
// fails with the context's error, sending nothing to the store.
func (s *hookStore) stallRenewals() <-chan time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renewStall, s.stallGiven = true, make(chan time.Duration, 16)
	return s.stallGiven
}

// stallWrites makes every Replace that match picks hang, as a store that
// never answers, until its context ends (or stallCap passed); it then
// fails with the context's error, sending nothing to the store. Each held
// write is reported on the channel returned. A nil match ends the stall.
func (s *hookStore) stallWrites(match func(next *ledger.Record, want ledger.Expect) bool) <-chan stalledWrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stallWrite, s.stalls = match, make(chan stalledWrite, 16)
	return s.stalls
}

var errCrash = errors.New("ledgertest: simulated crash")

type env struct {
	t       *testing.T
	h       Harness
	raw     ledger.Store
	store   *hookStore
	clock   *Clock
	prov    *Provider
	metrics *proc.Buffer
	rec     *emf.Recorder
	tenant  string
}

var epoch = time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)

func newEnv(t *testing.T, h Harness) *env {
	raw := h.NewStore(t)
	e := &env{t: t, h: h, raw: raw, store: &hookStore{Store: raw}, clock: NewClock(epoch),
		prov: NewProvider(t), metrics: &proc.Buffer{}, tenant: "t-" + rnd(6)}
	e.rec = emf.New(e.metrics, "idemkit-test")
	return e
}

// fresh returns a new env on the same harness (its own store, clock and
// provider), for a subtest that needs one of its own.
func (e *env) fresh(t *testing.T) *env { return newEnv(t, e.h) }

func rnd(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (e *env) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

// ledger returns an executor over the env's store. Defaults: lease 30s,
// never wait (tests opt in), manual clock, metrics captured.
func (e *env) ledger(mod ...func(*ledger.Config)) *ledger.Ledger {
	e.t.Helper()
	cfg := ledger.Config{Store: e.store, Lease: 30 * time.Second, Wait: -1, Test: ledger.TestConfig{Clock: e.clock}, Metrics: e.rec}
	for _, m := range mod {
		m(&cfg)
	}
	l, err := ledger.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return l
}

func (e *env) runID() string { return e.tenant + "/run-" + rnd(10) }

func (e *env) business(op, key string) identity.Identity {
	e.t.Helper()
	id, err := identity.FromBusiness(identity.Business{Tenant: e.tenant, Operation: op, Key: key})
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *env) activity(run, node string, ord uint64) identity.Identity {
	e.t.Helper()
	id, err := identity.FromActivity(identity.Activity{Tenant: e.tenant, RunID: run, NodeID: node, Ordinal: ord, Provider: "fake"})
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

// effect is a business-identity effect made by a fresh run's node "charge".
func (e *env) effect() ledger.Effect {
	return ledger.Effect{Identity: e.business("charge", "order-"+rnd(6)), RunID: e.runID(), NodeID: "charge"}
}

// charge is an effect function calling the fake provider with the
// provider key; calls counts its invocations.
func (e *env) charge(calls *atomic.Int64) ledger.Func {
	return func(ctx context.Context, c ledger.Call) ([]byte, error) {
		if calls != nil {
			calls.Add(1)
		}
		return e.prov.Call(ctx, c.ProviderKey, "charge")
	}
}

func (e *env) get(key string) *ledger.Record {
	e.t.Helper()
	r, err := e.raw.Get(context.Background(), key)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func effectKey(id identity.Identity) string { return "effect#" + id.EffectID }

func (e *env) resetRT() {
	e.store.calls.Store(0)
	if e.h.ResetRoundTrips != nil {
		e.h.ResetRoundTrips()
	}
}

// checkRT asserts store calls and backend round trips.
func (e *env) checkRT(what string, wantCalls, maxBackend int) {
	e.t.Helper()
	if got := int(e.store.calls.Load()); got != wantCalls {
		e.t.Errorf("%s: %d store calls, want %d", what, got, wantCalls)
	}
	if e.h.RoundTrips != nil {
		if got := e.h.RoundTrips(); got > maxBackend {
			e.t.Errorf("%s: %d backend round trips, budget %d", what, got, maxBackend)
		}
	}
}

func (e *env) attemptStates(key string) []ledger.AttemptState {
	e.t.Helper()
	r := e.get(key)
	if r == nil {
		e.t.Fatalf("no record %s", key)
	}
	var s []ledger.AttemptState
	for _, a := range r.Attempts {
		s = append(s, a.State)
	}
	return s
}

// wantReclaimedOnce fails the test unless key's attempts are one escaped
// and one completed and the provider saw them as one effect in two
// requests (the same provider key).
func (e *env) wantReclaimedOnce(t *testing.T, key string) {
	t.Helper()
	if got := e.attemptStates(key); !slices.Equal(got, []ledger.AttemptState{ledger.AttemptEscaped, ledger.AttemptCompleted}) {
		t.Fatalf("attempts %v", got)
	}
	if e.prov.Effects() != 1 || e.prov.Requests() != 2 {
		t.Fatalf("provider effects %d requests %d; want 1 effect (same provider key), 2 requests", e.prov.Effects(), e.prov.Requests())
	}
}

// Scan forwards to the store under test when it is a ledger.Scanner.
func (s *hookStore) Scan(ctx context.Context, fn func(*ledger.Record) bool) error {
	sc, ok := s.Store.(ledger.Scanner)
	if !ok {
		return ledger.ErrNoScan
	}
	s.calls.Add(1)
	return sc.Scan(ctx, fn)
}
