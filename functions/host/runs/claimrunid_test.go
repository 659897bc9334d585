package runs

import (
	"strings"
	"testing"
)

func TestClaimRunID(t *testing.T) {
	a := ClaimRunID("acme", "c:abc", "req-1")
	if !ValidRunID(a) || RunTenant(a) != "acme" || strings.Contains(a, "~") {
		t.Fatalf("%q is not a runId of acme", a)
	}
	if ClaimRunID("acme", "c:abc", "req-1") != a {
		t.Fatal("not stable: every execution of one record must name the same run")
	}
	for _, b := range []string{
		ClaimRunID("acme", "c:abd", "req-1"), // another record
		ClaimRunID("acme", "c:abc", "req-2"), // the same key after retention
		ClaimRunID("acme", "c:ab", "creq-1"), // no ambiguity at the separator
	} {
		if b == a {
			t.Fatalf("%q collides", b)
		}
	}
	if len(a) != len(NewRunID("acme")) {
		t.Fatalf("%q is not shaped like a minted runId", a)
	}
}
