package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestApikeyCreateTenantUsageNamesTheValueAndTheCharacters: `idemkit apikey
// create` without --tenant says the flag is required; with a tenant it
// refuses, it quotes the value given (never calling a given flag missing)
// and names what a tenant may hold in words, not as a regular expression
// (RED_TEAM 287). So does `idemkit dev --api-key KEY=TENANT`.
func TestApikeyCreateTenantUsageNamesTheValueAndTheCharacters(t *testing.T) {
	const ep = "http://127.0.0.1:1" // nothing listens: a usage error must not get that far
	for _, tc := range []struct {
		tenant string // "" leaves the flag out
		want   string
	}{
		{"", "--tenant T is required"},
		{"a b", `--tenant "a b"`},
		{strings.Repeat("a", 129), `--tenant "` + strings.Repeat("a", 129) + `"`},
		{"anon:", `--tenant "anon:"`},
		{"acme/x", `--tenant "acme/x"`},
	} {
		args := []string{"apikey", "create", "--endpoint", ep}
		if tc.tenant != "" {
			args = append(args, "--tenant", tc.tenant)
		}
		var out, errb bytes.Buffer
		code := run(context.Background(), args, &out, &errb)
		first, _, _ := strings.Cut(errb.String(), "\n")
		if code != 2 || out.Len() != 0 || strings.Count(errb.String(), "\n") != 2 || !strings.Contains(first, tc.want) ||
			!strings.Contains(first, "1..128 of A-Z a-z 0-9 . _ -") || strings.Contains(first, "^(") ||
			(tc.tenant != "" && strings.Contains(first, "required")) {
			t.Errorf("--tenant %q: exit %d, stderr %q; want 2 and a line with %q naming the characters in words, no regular expression, not calling a given flag missing",
				tc.tenant, code, errb.String(), tc.want)
		}
	}
	// A dev that took the key would start: the deadline stops it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"dev", "--api-key", "k-0123456789abcdefghij=a b"}, &out, &errb)
	first, _, _ := strings.Cut(errb.String(), "\n")
	if code != 2 || !strings.Contains(first, "tenant: 1..128 of A-Z a-z 0-9 . _ -") || strings.Contains(first, "^(") {
		t.Errorf("dev --api-key with a bad tenant: exit %d, stderr %q; want 2, naming the characters a tenant may hold in words", code, errb.String())
	}
}

// TestApikeyRevokeTenantUsageNamesTheCharacters: `idemkit apikey revoke
// --tenant` with a value no tenant can have quotes the value and names
// what a tenant may hold in words, as create does, not as a regular
// expression (RED_TEAM 327).
func TestApikeyRevokeTenantUsageNamesTheCharacters(t *testing.T) {
	const ep = "http://127.0.0.1:1" // nothing listens: a usage error must not get that far
	for _, tenant := range []string{"a b", strings.Repeat("a", 129), "anon:", "acme/x"} {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"apikey", "revoke", "--hash", strings.Repeat("a", 64), "--tenant", tenant, "--endpoint", ep}, &out, &errb)
		first, _, _ := strings.Cut(errb.String(), "\n")
		if code != 2 || out.Len() != 0 || !strings.Contains(first, `--tenant "`+tenant+`"`) ||
			!strings.Contains(first, "1..128 of A-Z a-z 0-9 . _ ~ -") || strings.Contains(first, "^(") {
			t.Errorf("revoke --tenant %q: exit %d, stderr %q; want 2 and a line quoting the value and naming the characters in words, no regular expression",
				tenant, code, errb.String())
		}
	}
}

// TestEffectsIDUsageNamesTheCharacters: `idemkit effects` refuses a run or
// effect id that cannot be one by quoting it and saying in words what an
// id holds, not as a regular expression (RED_TEAM 327).
func TestEffectsIDUsageNamesTheCharacters(t *testing.T) {
	const ep = "http://127.0.0.1:1" // nothing listens: a usage error must not get that far
	for _, args := range [][]string{
		{"effects", "list", "--run", "acme", "--endpoint", ep},
		{"effects", "show", "acme/short", "--endpoint", ep},
		{"effects", "resolve", "acme/short", "--as", "delivered", "--endpoint", ep},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), args, &out, &errb)
		first, _, _ := strings.Cut(errb.String(), "\n")
		if code != 2 || out.Len() != 0 || strings.Contains(first, "^(") || !strings.Contains(first, "16..128 of A-Z a-z 0-9 . _ ~ -") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a line naming what an id holds in words, no regular expression", args, code, errb.String())
		}
	}
}
