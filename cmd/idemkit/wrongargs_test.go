package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
)

// TestWrongArgumentsSayWhatIsAccepted: a wrong value of a day-two
// command's flag exits 2 before anything is reached, and its message names
// the value given and every value accepted in the spelling the help uses.
func TestWrongArgumentsSayWhatIsAccepted(t *testing.T) {
	for _, c := range []struct {
		args []string
		says []string
	}{
		{[]string{"effects", "resolve", "acme/e1", "--as", "maybe", "--endpoint", "http://127.0.0.1:1"},
			[]string{`--as "maybe"`, "delivered", "not-delivered"}},
		{[]string{"doctor", "--table", "Bogus=orders-idem", "--endpoint", "http://127.0.0.1:1"},
			[]string{"IdempotencyTable", "ApiKeysTable", "idempotency", "api-keys"}},
		{[]string{"apikey", "create", "--tenant", "acme", "--endpoint", "http://127.0.0.1:1", "extra"},
			[]string{`unexpected argument "extra"`}},
		// dev's address and table prefix are checked before an engine starts.
		{[]string{"dev", "--addr", "nope", "--dynamodb-endpoint", "http://127.0.0.1:1"},
			[]string{`--addr "nope"`, "HOST:PORT"}},
		{[]string{"dev", "--table-prefix", "bad prefix!", "--dynamodb-endpoint", "http://127.0.0.1:1"},
			[]string{`--table-prefix "bad prefix!"`, "letters, digits"}},
		// A seeded key the authorizer could never accept as
		// "Authorization: Bearer KEY" is refused before an engine starts.
		{[]string{"dev", "--api-key", "a b=acme", "--dynamodb-endpoint", "http://127.0.0.1:1"},
			[]string{`"a b=acme"`, "-api-key", "without whitespace", "Bearer"}},
		{[]string{"dev", "--api-key", " k=acme", "--dynamodb-endpoint", "http://127.0.0.1:1"},
			[]string{`" k=acme"`, "without whitespace"}},
		{[]string{"dev", "--api-key", "k\u00e9y-0123456789=acme", "--dynamodb-endpoint", "http://127.0.0.1:1"},
			[]string{strconv.Quote("k\u00e9y-0123456789=acme"), "printable ASCII"}},
		{[]string{"dev", "--api-key", "k\vey-0123456789=acme", "--dynamodb-endpoint", "http://127.0.0.1:1"},
			[]string{strconv.Quote("k\vey-0123456789=acme"), "printable ASCII"}},
		// One key for two tenants: a key authenticates one.
		{[]string{"dev", "--api-key", "k-0123456789=acme", "--api-key", "k-0123456789=globex", "--dynamodb-endpoint", "http://127.0.0.1:1"},
			[]string{"(not shown)", "-api-key", "already given for tenant acme, here for globex", "one tenant"}}, // the key is not quoted (RED_TEAM 269)
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), c.args, &out, &errb)
		if code != 2 {
			t.Fatalf("%v: exit %d, want 2 (%q)", c.args, code, errb.String())
		}
		first := strings.SplitN(errb.String(), "\n", 2)[0]
		for _, s := range c.says {
			if !strings.Contains(first, s) {
				t.Errorf("%v: %q does not name %q", c.args, first, s)
			}
		}
	}
}

// TestConformUsageErrorsAreShort: a usage error of `idemkit conform` (its
// help runs to some 80 lines) or `idemkit dev` (some 60) prints the error
// and a one-line hint on stderr, nothing on stdout, and exits 2; -h still
// prints the whole help on stdout.
func TestConformUsageErrorsAreShort(t *testing.T) {
	for _, c := range []struct {
		args  []string
		first string
	}{
		{[]string{"dev", "--bogus"}, "idemkit dev: flag provided but not defined: --bogus"},
		{[]string{"dev", "--request-timeout", "soon"}, `idemkit dev: invalid value "soon" for flag --request-timeout`},
		{[]string{"dev", "--addr"}, "idemkit dev: flag needs an argument: --addr"},
		{[]string{"dev", "--conformance-seams=maybe"}, `idemkit dev: invalid boolean value "maybe" for --conformance-seams`},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), c.args, &out, &errb)
		lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
		if code != 2 || out.Len() != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], c.first) || lines[1] != "run 'idemkit dev -h' for help" {
			t.Errorf("idemkit %q: exit %d stdout %q stderr %q, want exit 2, %q... and the hint", c.args, code, out.String(), errb.String(), c.first)
		}
	}
	var dout, derr bytes.Buffer
	if code := run(context.Background(), []string{"dev", "-h"}, &dout, &derr); code != 0 || derr.Len() != 0 || !strings.HasPrefix(dout.String(), "usage: idemkit dev") {
		t.Fatalf("dev -h: exit %d stdout %q stderr %q", code, dout.String(), derr.String())
	}
	const hint = "run 'idemkit conform -h' for help"
	for _, c := range []struct {
		args  []string
		first string
	}{
		{[]string{"conform", "--bogus", "http://127.0.0.1:9"}, "idemkit conform: flag provided but not defined: --bogus"},
		{[]string{"conform", "--timeout", "soon", "http://127.0.0.1:9"}, `idemkit conform: invalid value "soon" for flag --timeout`},
		{[]string{"conform", "--api-key", "k"}, "idemkit conform: want exactly one URL"},
		{[]string{"conform", "--api-key", "k", "http://a", "http://b"}, "idemkit conform: want exactly one URL"},
		{[]string{"conform", "http://127.0.0.1:9"}, "idemkit conform: --api-key KEY is required"},
		{[]string{"conform", "--api-key", "k", "--timeout", "0s", "http://127.0.0.1:9"}, "idemkit conform: --timeout 0s: want a positive duration"},
		// A configuration the checker refuses: what is wrong, without the
		// names of the packages the error went through.
		{[]string{"conform", "--api-key", "a", "--api-key", "b", "--api-key", "c", "http://127.0.0.1:9"}, "idemkit conform: --api-key: at most two API keys"},
		// The URL is named as every usage error names its argument, with
		// what it accepts.
		{[]string{"conform", "--api-key", "k", "--profile", "sap", "http://127.0.0.1:9"}, `idemkit conform: --profile "sap": want openwop, commerce or erp`},
		{[]string{"conform", "--api-key", "k", "ftp://127.0.0.1:9"}, `idemkit conform: URL "ftp://127.0.0.1:9": want an http:// or https:// URL, such as http://127.0.0.1:3000`},
		// One credential given twice, as the second tenant's or a scope
		// part's: the scenario it enables would fail the API for the
		// caller's own mistake.
		{[]string{"conform", "--api-key", "k1", "--api-key", "k1", "http://127.0.0.1:9"}, "idemkit conform: --api-key: the second API key is the first one"},
		{[]string{"conform", "--profile", "commerce", "--api-key", "k1", "--scope-key", "worker=k1", "http://127.0.0.1:9"}, `idemkit conform: --scope-key: the scope key of part "worker" is the first API key`},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), c.args, &out, &errb)
		lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
		if code != 2 || out.Len() != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], c.first) || lines[1] != hint {
			t.Errorf("idemkit %q: exit %d stdout %q stderr %q, want exit 2 and stderr %q..., then %q", c.args, code, out.String(), errb.String(), c.first, hint)
		}
	}
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"conform", "-h"}, &out, &errb); code != 0 || errb.Len() != 0 || !strings.HasPrefix(out.String(), "usage: idemkit conform") {
		t.Fatalf("conform -h: exit %d stdout %q stderr %q", code, out.String(), errb.String())
	}
}

// TestConformUnreachableSaysSoOnce: conform against an address nothing
// listens on says once that it cannot reach it and exits 1, instead of a
// FAIL line per scenario, each with the same dial error.
func TestConformUnreachableSaysSoOnce(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"conform", "--api-key", "k", "http://127.0.0.1:1"}, &out, &errb)
	if code != 1 || out.Len() != 0 || strings.Count(errb.String(), "\n") != 1 || !strings.Contains(errb.String(), "cannot reach http://127.0.0.1:1") {
		t.Fatalf("exit %d stdout %q stderr %q", code, out.String(), errb.String())
	}
}

// TestUnreachableEngineIsSaidPlainly: a command whose DynamoDB engine does
// not answer says which call failed and that the engine cannot be
// reached, without the SDK's retry count and request id.
func TestUnreachableEngineIsSaidPlainly(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"apikey", "create", "--tenant", "acme", "--endpoint", "http://127.0.0.1:1"}, &out, &errb)
	msg := errb.String()
	if code != 1 || !strings.Contains(msg, "DynamoDB PutItem failed: cannot reach the engine") || strings.Contains(msg, "RequestID") ||
		strings.Contains(msg, "exceeded maximum number of attempts") || strings.Contains(msg, "host: ") {
		t.Fatalf("exit %d: %q", code, msg)
	}
}
