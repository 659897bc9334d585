package ledgertest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/semantic"
)

// auditTests close gaps found in the issue-3 audit (see ledger/CHECKLIST.md).
var auditTests = []test{
	{"WitnessCarriesNoPayloadOrCredential", testWitnessNoSecrets},
	{"MismatchWhileInFlightOrReleased", testMismatchNotFinal},
	{"ProviderKeyOnTheWireEqualsWitness", testProviderKeyOnWire},
	{"ExpiryInsideEveryWriteCondition", testExpiryInConditions},
	{"Race16ReclaimExpiredClaimOneWinner", testRaceReclaim},
}

// testWitnessNoSecrets puts credentials and payloads everywhere a caller can
// put them (the provider request, the recorded success value, a recorded
// failure message, a streamed body, a semantic request) and checks that the
// projection (schema-valid) and the metrics carry none of them, nor the
// effectId or provider key in the metrics, while the record does keep the
// value (so the check has something to find).
func testWitnessNoSecrets(t *testing.T, e *env) {
	ctx := context.Background()
	l := e.ledger()
	run := e.runID()
	const (
		apiKey   = "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
		bearer   = "Bearer eyJhbGciOiJIUzI1NiJ9.SECRET"
		card     = "4242424242424242"
		streamed = "data: STREAMED-SECRET-CHUNK"
	)
	secrets := []string{apiKey, bearer, card, streamed, "STREAMED-SECRET", "SECRET"}
	req := semantic.Request{Provider: "example", Model: "m",
		Messages: []semantic.Message{{Role: "user", Content: "my card is " + card + ", key " + apiKey}}}
	digest, err := semantic.DigestV2(req)
	if err != nil {
		t.Fatal(err)
	}
	value := mustDo(t, l, ledger.Effect{Identity: e.activity(run, "charge", 0), RunID: run, NodeID: "charge",
		RequestDigest: digest, SemanticRecipe: semantic.RecipeV2},
		func(ctx context.Context, c ledger.Call) ([]byte, error) {
			b, err := e.prov.Call(ctx, c.ProviderKey, "card="+card+"&auth="+bearer)
			return append(b, []byte(" "+apiKey)...), err
		})
	if !strings.Contains(string(value.Value), card) {
		t.Fatalf("provider value %q", value.Value)
	}
	if _, err := l.Do(ctx, ledger.Effect{Identity: e.activity(run, "mail", 0), RunID: run, NodeID: "mail"},
		func(context.Context, ledger.Call) ([]byte, error) {
			return nil, fmt.Errorf("smtp auth failed for %s with %s", apiKey, bearer)
		}); !errors.Is(err, ledger.ErrEffectFailed) {
		t.Fatal(err)
	}
	var sink bytes.Buffer
	if _, err := l.DoStream(ctx, ledger.Effect{Identity: e.business("llm", "q-"+rnd(4)), RunID: run, NodeID: "llm"}, &sink,
		func(_ context.Context, _ ledger.Call, w io.Writer) error {
			_, err := io.WriteString(w, streamed)
			return err
		}); err != nil {
		t.Fatal(err)
	}
	// The record keeps the value and the failure message (replayed to
	// duplicates): the projection must not.
	rec := e.get(effectKey(e.activity(run, "charge", 0)))
	if rec == nil || rec.Outcome == nil || !bytes.Contains(rec.Outcome.Value, []byte(card)) {
		t.Fatalf("record %+v", rec)
	}
	p := e.witness(l, run, 3)
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if strings.Contains(string(b), s) {
			t.Fatalf("projection leaks %q:\n%s", s, b)
		}
	}
	for _, r := range p.Effects {
		if r.ProviderKey == "" || strings.Contains(r.ProviderKey, r.EffectID) {
			t.Fatalf("row providerKey %q is not a redaction-safe derivative", r.ProviderKey)
		}
	}
	m := e.metrics.String()
	for _, s := range append(secrets, p.Effects[0].EffectID, p.Effects[0].ProviderKey, run) {
		if strings.Contains(m, s) {
			t.Fatalf("metrics leak %q:\n%s", s, m)
		}
	}
}

// testMismatchNotFinal: a different request under the same identity is a
// *MismatchError whatever the record's state: while the first request is in
// flight (no wait, no in-flight error), and after it was released (no claim:
// the other request must not take over the identity).
func testMismatchNotFinal(t *testing.T, e *env) {
	eff := e.effect()
	eff.RequestDigest, eff.SemanticRecipe = "digest-A", semantic.RecipeV2
	release, done := e.holdEffect(eff)
	other := eff
	other.RequestDigest = "digest-B"
	var calls atomic.Int64
	waiting := e.ledger(func(c *ledger.Config) { c.Wait = time.Minute })
	if _, err := waiting.Do(context.Background(), other, e.charge(&calls)); !errors.Is(err, ledger.ErrMismatch) {
		t.Fatalf("mismatch while in flight: %v", err)
	}
	close(release)
	held := <-done
	r, err := e.ledger().Do(context.Background(), other, e.charge(&calls))
	if !errors.Is(err, ledger.ErrMismatch) || r.Value != nil || bytes.Equal(r.Value, held.Value) {
		t.Fatalf("mismatch after completion: %+v %v", r, err)
	}
	// Released: the other request may not claim it.
	rel := e.effect()
	rel.RequestDigest, rel.SemanticRecipe = "digest-A", semantic.RecipeV2
	l := e.ledger()
	if _, err := l.Do(context.Background(), rel, func(context.Context, ledger.Call) ([]byte, error) {
		return nil, ledger.NotSent(errors.New("refused"))
	}); !errors.Is(err, ledger.ErrNotSent) {
		t.Fatal(err)
	}
	relOther := rel
	relOther.RequestDigest = "digest-B"
	if _, err := l.Do(context.Background(), relOther, e.charge(&calls)); !errors.Is(err, ledger.ErrMismatch) {
		t.Fatalf("mismatch on a released record: %v", err)
	}
	if calls.Load() != 0 || e.prov.Effects() != 1 {
		t.Fatalf("a mismatching request fired: calls %d effects %d", calls.Load(), e.prov.Effects())
	}
	if got := e.get(effectKey(rel.Identity)); got.RequestDigest != "digest-A" || got.Attempt != 1 {
		t.Fatalf("released record taken over: %+v", got)
	}
}

// testProviderKeyOnWire: for every attempt, the Idempotency-Key header the
// provider received over HTTP is the record's providerKey and the witness
// row's, for both keying modes, across a reclaim.
func testProviderKeyOnWire(t *testing.T, e *env) {
	run := e.runID()
	l := e.ledger()
	biz := ledger.Effect{Identity: e.business("refund", "o-"+rnd(4)), RunID: run, NodeID: "refund"}
	act := ledger.Effect{Identity: e.activity(run, "charge", 3), RunID: run, NodeID: "charge"}
	mustDo(t, l, biz, e.charge(nil))
	if _, err := l.Do(context.Background(), act, func(ctx context.Context, c ledger.Call) ([]byte, error) {
		if _, err := e.prov.Call(ctx, c.ProviderKey, "charge"); err != nil {
			return nil, err
		}
		return nil, ledger.Uncertain(errors.New("response lost"))
	}); !errors.Is(err, ledger.ErrUncertain) {
		t.Fatal(err)
	}
	mustDo(t, l, act, e.charge(nil))
	wire := e.prov.Keys()
	if len(wire) != 3 {
		t.Fatalf("provider saw %d requests", len(wire))
	}
	p := e.witness(l, run, 3)
	want := []string{e.get(effectKey(biz.Identity)).ProviderKey, e.get(effectKey(act.Identity)).ProviderKey, e.get(effectKey(act.Identity)).ProviderKey}
	for i, k := range wire {
		if k != want[i] {
			t.Fatalf("request %d carried Idempotency-Key %q, ledger providerKey %q", i, k, want[i])
		}
	}
	byEffect := map[string]string{}
	for _, r := range p.Effects {
		byEffect[r.EffectID] = r.ProviderKey
	}
	if byEffect[biz.Identity.EffectID] != wire[0] || byEffect[act.Identity.EffectID] != wire[1] {
		t.Fatalf("witness providerKeys %v, wire %v", byEffect, wire)
	}
}

// testExpiryInConditions: a record past its retention is absent to EVERY
// conditional write, not just the claim: an owner whose record passed its
// retention (TTL deletes lazily, or never on the emulators) cannot write its
// fire mark, heartbeat or outcome onto it, even with the right owner token,
// attempt and state.
func testExpiryInConditions(t *testing.T, e *env) {
	ctx := e.ctx()
	r, later := e.createPastRetention(t, "expired-writes")
	want := ledger.Expect{Owner: r.Owner, Attempt: r.Attempt, State: r.State}
	for _, st := range []ledger.State{ledger.StateFiring, ledger.StateCompleted, ledger.StateReleased} {
		next := r.Clone()
		next.State, next.ExpiresAt = st, later.Add(ledger.MinRetention)
		if ok, _, err := e.raw.Replace(ctx, next, want, later); err != nil || ok {
			t.Fatalf("write %s onto a record past retention = %v, %v; want refused", st, ok, err)
		}
	}
	// Exactly at the deadline the record is already past retention. (The
	// write differs from the stored record: a store may report a write
	// identical to the stored item as done, its own lost-response retry.)
	next := r.Clone()
	next.UpdatedAt = r.ExpiresAt
	if ok, _, err := e.raw.Replace(ctx, next, want, r.ExpiresAt); err != nil || ok {
		t.Fatalf("write at the retention deadline = %v, %v; want refused", ok, err)
	}
	// Just before it, the same write is accepted.
	if ok, _, err := e.raw.Replace(ctx, next, want, r.ExpiresAt.Add(-time.Millisecond)); err != nil || !ok {
		t.Fatalf("write inside retention = %v, %v; want accepted", ok, err)
	}
}

// testRaceReclaim: an executor crashed after the provider call (its attempt
// is firing, lease running); once the lease has expired, 16 executors race
// to reclaim it. Exactly one reclaim wins and fires, with the same provider
// key (the provider deduplicates: one effect); the stalled attempt becomes
// escaped exactly once; every other executor gets the winner's outcome.
func testRaceReclaim(t *testing.T, e *env) {
	eff := e.effect()
	key := effectKey(eff.Identity)
	e.store.failOnce(ledger.StateCompleted, errCrash)
	if _, err := e.ledger().Do(context.Background(), eff, e.charge(nil)); !errors.Is(err, errCrash) {
		t.Fatalf("crashed attempt: %v", err)
	}
	e.clock.Advance(31 * time.Second)
	var calls atomic.Int64
	fired := e.raceDo(t, 16, func(int) ledger.Effect { return eff }, e.charge(&calls))
	if fired != 1 || calls.Load() != 1 || e.prov.Effects() != 1 || e.prov.Requests() != 2 {
		t.Fatalf("fired %d, fn calls %d, provider effects %d requests %d; want 1, 1, 1, 2", fired, calls.Load(), e.prov.Effects(), e.prov.Requests())
	}
	if k := e.prov.Keys(); k[0] != k[1] {
		t.Fatalf("reclaim used another provider key: %v", k)
	}
	if got := e.attemptStates(key); !slices.Equal(got, []ledger.AttemptState{ledger.AttemptEscaped, ledger.AttemptCompleted}) {
		t.Fatalf("attempts %v; want [escaped completed]", got)
	}
}
