package conflictaudit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/fence"
)

// New's error for an invalid Config matches ErrConfig.
func TestNewReportsEveryConfigProblem(t *testing.T) {
	_, err := conflictaudit.New(conflictaudit.Config{Strategy: "single-region"})
	want := "conflictaudit: Config.Strategy must be reconciled-records or fenced-effects"
	if err == nil || err.Error() != want || !errors.Is(err, conflictaudit.ErrConfig) {
		t.Fatalf("New = %v (errors.Is ErrConfig: %v), want %q", err, errors.Is(err, conflictaudit.ErrConfig), want)
	}
}

// Two auditors under one Config.KeyHashSecret (two regions' stacks of one
// deployment) name one conflict's effect, owners and record alike; under
// another secret every reference differs (RED_TEAM 512; the two-process
// case: auditfn's TestConflictReferencesAreTheSameInEveryProcess).
func TestKeyHashSecretKeysEveryReference(t *testing.T) {
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	rec := func(owner string) *ledger.Record {
		return &ledger.Record{Key: "effect#acme/e1", EffectID: "acme/e1", Attempt: 1, Owner: owner, State: ledger.StateClaimed,
			CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
	}
	refs := func(region, secret string) [4]string {
		t.Helper()
		a, err := conflictaudit.New(conflictaudit.Config{Strategy: fence.ReconciledRecords, Region: region, KeyHashSecret: secret})
		if err != nil {
			t.Fatal(err)
		}
		c := a.Observe(rec("owner-a"), rec("owner-b"))
		k := a.ObserveKey(conflictaudit.KeyRecord{Record: "caller:v1:abc", Run: "acme/AAAA"},
			conflictaudit.KeyRecord{Record: "caller:v1:abc", Run: "acme/BBBB"})
		if c == nil || k == nil {
			t.Fatalf("no conflict: %+v, %+v", c, k)
		}
		return [4]string{c.Effect, c.Winner.Owner, c.Loser.Owner, k.Record}
	}
	eu, us, other := refs("eu-west-1", "s1"), refs("us-east-1", "s1"), refs("eu-west-1", "s2")
	if eu != us {
		t.Fatalf("one secret: %v and %v, want equal references", eu, us)
	}
	for i := range eu {
		if eu[i] == other[i] {
			t.Fatalf("another secret: reference %d is %s under both", i, eu[i])
		}
	}
}
