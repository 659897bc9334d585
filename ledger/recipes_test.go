package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/idemkit/idemkit/ledger/identity"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"github.com/idemkit/idemkit/ledger/memstore"
	"github.com/idemkit/idemkit/ledger/semantic"
)

// A run's stamps compute identities and digests under the run's recipe; a
// stamp this kit does not compute is an error, never a v2 value in its place.
func TestRunStampsUseTheRunsRecipe(t *testing.T) {
	a := identity.Activity{Tenant: "acme", RunID: "acme/run-0000000000000001", NodeID: "charge", Provider: "stripe"}
	cur := identity.CurrentStamps()
	if err := cur.Validate(); err != nil {
		t.Fatal(err)
	}
	got, err := cur.ActivityIdentity(a)
	want, _ := identity.FromActivity(a)
	if err != nil || got != want {
		t.Fatalf("v2 stamps: %+v %v", got, err)
	}
	req := semantic.Request{Provider: "example", Model: "m", Messages: []semantic.Message{{Role: "user", Content: "hi"}}}
	d, recipe, err := cur.SemanticDigest(req)
	wantD, _ := semantic.DigestV2(req)
	if err != nil || d != wantD || recipe != semantic.RecipeV2 {
		t.Fatalf("v2 digest: %s %s %v", d, recipe, err)
	}

	v1 := identity.Stamps{ActivityIdentityRecipe: "openwop-activity-v1", SemanticRequestRecipe: "openwop-semantic-request-v1"}
	if id, err := v1.ActivityIdentity(a); !errors.Is(err, ledger.ErrUnsupportedRecipe) || id != (identity.Identity{}) {
		t.Fatalf("v1 run: %+v %v; want ErrUnsupportedRecipe and no identity", id, err)
	}
	if d, r, err := v1.SemanticDigest(req); !errors.Is(err, ledger.ErrUnsupportedRecipe) || d != "" || r != "" {
		t.Fatalf("v1 digest: %q %q %v", d, r, err)
	}
	if err := (identity.Stamps{}).Validate(); !errors.Is(err, ledger.ErrUnsupportedRecipe) {
		t.Fatalf("unstamped run validated: %v", err)
	}
	// The run record's JSON members.
	var back identity.Stamps
	b, _ := json.Marshal(cur)
	if err := json.Unmarshal(b, &back); err != nil || back != cur {
		t.Fatalf("JSON round trip %s -> %+v", b, back)
	}
}

// A reader never recomputes a recorded identity with another recipe: a
// record made by another recipe (here a v1 history) is looked up, listed in
// the witness and replayed under its recorded effectId and stamps; a Do whose
// identity was made by another recipe gets *MismatchError (field
// identityRecipe) and neither fires nor receives the recorded outcome.
func TestReaderNeverRecomputesARecordedIdentity(t *testing.T) {
	now := time.Date(2026, 9, 18, 12, 0, 0, 0, time.UTC)
	st := memstore.New()
	l, err := ledger.New(ledger.Config{Store: st, Wait: -1, Test: ledger.TestConfig{Clock: ledgertest.ClockFuncs{NowFunc: func() time.Time { return now }}}})
	if err != nil {
		t.Fatal(err)
	}
	run := "acme/run-0000000000000001"
	legacyID := "acme/legacy-v1-opaque-0123456789"
	legacy := &ledger.Record{
		Key: "effect#" + legacyID, Kind: identity.KindEffect, EffectID: legacyID, Tenant: "acme",
		Keying: identity.KeyingActivityRecipe, IdentityRecipe: "openwop-activity-v1",
		ProviderKey: identity.ProviderKey(legacyID), RunID: run, State: ledger.StateCompleted, Owner: "o", Attempt: 1,
		Outcome:   &ledger.Outcome{OK: true, Value: []byte("ch_legacy")},
		Attempts:  []ledger.Attempt{{N: 1, State: ledger.AttemptCompleted, At: now, Fired: true, RunID: run, NodeID: "charge", InvocationID: "legacy-v1-opaque-0123456789"}},
		CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(ledger.MinRetention),
	}
	ctx := context.Background()
	if won, _, err := st.Create(ctx, legacy, now); err != nil || !won {
		t.Fatal(won, err)
	}
	// Lookup and the witness use the recorded id and stamps as they are.
	got, err := l.Lookup(ctx, legacyID)
	if err != nil || got == nil || got.IdentityRecipe != "openwop-activity-v1" || got.EffectID != legacyID {
		t.Fatalf("Lookup: %+v %v", got, err)
	}
	p, err := l.Witness(ctx, run)
	if err != nil || len(p.Effects) != 1 || p.Effects[0].EffectID != legacyID || p.Effects[0].Keying != identity.KeyingActivityRecipe ||
		p.Effects[0].ProviderKey != legacy.ProviderKey {
		t.Fatalf("witness: %+v %v", p, err)
	}
	fired := 0
	fn := func(context.Context, ledger.Call) ([]byte, error) { fired++; return []byte("ch_new"), nil }
	// An identity made by v2 rules under the recorded effectId: mismatch.
	v2 := identity.Identity{EffectID: legacyID, Tenant: "acme", Keying: identity.KeyingActivityRecipe,
		Recipe: identity.ActivityRecipe, ProviderKey: identity.ProviderKey(legacyID)}
	r, err := l.Do(ctx, ledger.Effect{Identity: v2, RunID: run, NodeID: "charge"}, fn)
	var me *ledger.MismatchError
	if !errors.As(err, &me) || me.Field != "identityRecipe" || r.Value != nil || r.Replayed || fired != 0 {
		t.Fatalf("v2 identity over a v1 record: %+v %v fired %d", r, err, fired)
	}
	// The recorded identity, used as recorded: the recorded outcome.
	rec := v2
	rec.Recipe = "openwop-activity-v1"
	r, err = l.Do(ctx, ledger.Effect{Identity: rec, RunID: run, NodeID: "charge"}, fn)
	if err != nil || !r.Replayed || string(r.Value) != "ch_legacy" || fired != 0 {
		t.Fatalf("recorded identity: %+v %v fired %d", r, err, fired)
	}
	// The run's stamps refuse to mint a v2 identity for the v1 run.
	stamps := identity.Stamps{ActivityIdentityRecipe: "openwop-activity-v1", SemanticRequestRecipe: semantic.RecipeV2}
	if _, err := stamps.ActivityIdentity(identity.Activity{Tenant: "acme", RunID: run, NodeID: "charge"}); !errors.Is(err, ledger.ErrUnsupportedRecipe) {
		t.Fatalf("v1 stamps minted an identity: %v", err)
	}
}
