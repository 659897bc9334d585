package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestApikeyCreateRefusesKeyspaceTenants: `idemkit apikey create` refuses,
// as a usage error before any table is reached, a tenant that would meet
// the host's keyspaces or pass for another tenant: item prefixes (`#`),
// Layer 1's scope prefixes, a runId's `/`, a `~`, 129 characters,
// confusables of "acme"; nothing is printed on stdout (no key minted).
func TestApikeyCreateRefusesKeyspaceTenants(t *testing.T) {
	const ep = "http://127.0.0.1:1" // nothing listens: a usage error must not get that far
	for _, tenant := range []string{
		"#", "#inbox#acme", "host#acme", "tenant:acme", "anon:", "acme/x", "/", "~", "acme~2Fx",
		strings.Repeat("a", 129), "\u0430cme", "acme\u200b", "ａｃｍｅ", " acme", "acme\t",
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"apikey", "create", "--endpoint", ep, "--tenant", tenant}, &out, &errb)
		if code != 2 || out.Len() != 0 || !strings.Contains(errb.String(), "--tenant") {
			t.Errorf("--tenant %q: exit %d, stdout %q, stderr %q; want 2, nothing on stdout", tenant, code, out.String(), errb.String())
		}
	}
}
