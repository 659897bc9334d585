package main

import (
	"os"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem/idemenv"
)

// TestLoadLineNamesEveryVariableItReads: the comment on main.go's
// idemenv.Load line, which the README shows, names every variable Load
// reads and Apply applies to the guard (IDEMPOTENCY_TABLE aside: the store
// reads it above), so a reader of the README learns from it that
// IDEMPOTENCY_POLICY or IDEMPOTENCY_WAIT_MS configure this function too
// (RED_TEAM 396: it named four of the nine, while the README's next
// section says IDEMPOTENCY_DERIVED_KEYS is applied the same way).
func TestLoadLineNamesEveryVariableItReads(t *testing.T) {
	b, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	var comment string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "idemenv.Load(") {
			_, comment, _ = strings.Cut(l, "//")
		}
	}
	named := map[string]bool{}
	for _, w := range strings.Split(comment, ",") {
		w = strings.TrimSpace(w)
		if strings.HasPrefix(w, "_") {
			w = "IDEMPOTENCY" + w
		}
		named[w] = true
	}
	for _, v := range []string{idemenv.Enabled, idemenv.Required, idemenv.Policy, idemenv.LeaseSeconds, idemenv.RetentionHours,
		idemenv.WaitMS, idemenv.StoreTimeoutMS, idemenv.DerivedKeys, idemenv.KeyHashSecret} {
		if !named[v] {
			t.Errorf("main.go's idemenv.Load line does not name %s: %q", v, comment)
		}
	}
}
