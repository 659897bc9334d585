package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestATenantHoldingATildeIsRefused pins RED_TEAM 268: `idemkit apikey create
// --tenant` and `idemkit dev --api-key` refuse a tenant holding a `~` (the
// host must not mint the runIds such a tenant's runs would get) with a
// usage error naming the characters a tenant may hold; `idemkit apikey
// revoke --tenant` still names one, to revoke a key issued before.
func TestATenantHoldingATildeIsRefused(t *testing.T) {
	const ep = "http://127.0.0.1:1" // nothing listens: a usage error must not get that far
	for _, args := range [][]string{
		{"apikey", "create", "--tenant", "t~2Fx", "--endpoint", ep},
		{"apikey", "create", "--tenant", "anon:~", "--endpoint", ep},
		{"dev", "--api-key", "k-0123456789abcdefghijklmnop=a~b"},
	} {
		var out, errb bytes.Buffer
		// A dev that took the key would start: the deadline stops it.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		code := run(ctx, args, &out, &errb)
		cancel()
		first, _, _ := strings.Cut(errb.String(), "\n")
		if code != 2 || !strings.Contains(first, "'~'") || !strings.Contains(first, "A-Z a-z 0-9 . _ -") {
			t.Errorf("%q: exit %d, first line %q; want 2, naming the '~' and the characters a tenant may hold", args, code, first)
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"apikey", "revoke", "--hash", strings.Repeat("ab", 32), "--tenant", "t~2Fx", "--endpoint", ep}, &out, &errb); code == 2 {
		t.Errorf("apikey revoke --tenant t~2Fx: a usage error, %s", errb.String())
	}
}
