package auditfn

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/auditor/conflictaudit"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/idem/idemenv"
	"github.com/idemkit/idemkit/ledger"
)

// envRefsHelper makes TestConflictReferencesHelper print the references of
// one conflict instead of being a test.
const envRefsHelper = "AUDITFN_CONFLICT_REFS_HELPER"

// conflictRefs is what one auditor process names a conflict by.
type conflictRefs struct {
	Effect, Winner, Loser, Record string
}

// TestConflictReferencesHelper is run as a separate process by
// TestConflictReferencesAreTheSameInEveryProcess: it builds the auditor as
// the function does (NewFromEnv, from this process's environment), observes
// one effect conflict and one Layer-1 conflict, and prints their
// references. Run as a test it does nothing.
func TestConflictReferencesHelper(t *testing.T) {
	if os.Getenv(envRefsHelper) != "1" {
		return
	}
	a, err := NewFromEnv(os.Getenv, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	rec := func(owner string) *ledger.Record {
		return &ledger.Record{Key: "effect#acme/e1", EffectID: "acme/e1", Attempt: 1, Owner: owner, State: ledger.StateClaimed,
			CreatedAt: at, ExpiresAt: at.Add(time.Hour)}
	}
	c := a.Conflicts.Observe(rec("owner-a"), rec("owner-b"))
	k := a.Conflicts.ObserveKey(conflictaudit.KeyRecord{Record: "caller:v1:abc", Run: "acme/AAAA"},
		conflictaudit.KeyRecord{Record: "caller:v1:abc", Run: "acme/BBBB"})
	if c == nil || k == nil {
		t.Fatalf("no conflict: %+v, %+v", c, k)
	}
	if err := json.NewEncoder(os.Stdout).Encode(conflictRefs{Effect: c.Effect, Winner: c.Winner.Owner, Loser: c.Loser.Owner, Record: k.Record}); err != nil {
		t.Fatal(err)
	}
}

// TestConflictReferencesAreTheSameInEveryProcess (RED_TEAM 512): two
// auditor processes (two regions' stacks, or two containers of one) under
// one deployment's key-hash secret (IDEMPOTENCY_KEY_HASH_SECRET, the api's)
// name one conflict's effect, owners and record alike, so conflict events
// can be de-duplicated by record across regions; under another secret the
// references differ, and none is the raw id.
func TestConflictReferencesAreTheSameInEveryProcess(t *testing.T) {
	run := func(region, secret string) conflictRefs {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^TestConflictReferencesHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), envRefsHelper+"=1", settings.EnvCrossRegion+"=reconciled-records",
			EnvRegion+"="+region, idemenv.KeyHashSecret+"="+secret)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("helper process: %v\n%s", err, out)
		}
		var r conflictRefs
		line, _, _ := strings.Cut(string(out), "\n")
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("helper output %q: %v", out, err)
		}
		return r
	}
	eu, us := run("eu-west-1", "deployment-secret"), run("us-east-1", "deployment-secret")
	if eu != us {
		t.Fatalf("one conflict under one secret, two processes: %+v and %+v, want equal references", eu, us)
	}
	other := run("eu-west-1", "another-secret")
	if other.Effect == eu.Effect || other.Winner == eu.Winner || other.Loser == eu.Loser || other.Record == eu.Record {
		t.Fatalf("another secret: %+v, want every reference to differ from %+v", other, eu)
	}
	for _, ref := range []string{eu.Effect, eu.Winner, eu.Loser, eu.Record} {
		if !strings.HasPrefix(ref, "kh:") || strings.Contains(ref, "acme") || strings.Contains(ref, "owner") || strings.Contains(ref, "caller") {
			t.Fatalf("reference %q: want a keyed hash, not the id", ref)
		}
	}
}
