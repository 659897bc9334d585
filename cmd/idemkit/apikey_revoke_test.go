package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestAPIKeyRevoke: `idemkit apikey revoke` deletes a key minted by
// `apikey create`, named by the key itself (--key, or --key - reading it
// from stdin) or by its stored hash (--hash, as key#HEX or the 64 hex
// digits sha256sum prints); it prints "revoked key#HEX (tenant T)" and says
// on stderr that the authorizer's cache (the HTTP API's ReauthorizeEvery,
// 300 s; against an endpoint, idemkit dev's --authorizer-ttl) may keep
// granting it until it expires. The authorizer then
// refuses the key; the other keys are untouched. A key that is not there
// (already revoked, another table) and a --tenant the key does not belong
// to are failures (exit 1) that revoke nothing. Run on moto.
func TestAPIKeyRevoke(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	ctx := context.Background()
	prefix := fmt.Sprintf("rv%d-", time.Now().UnixNano())
	table := prefix + "ApiKeysTable"
	cli := func(in string, args ...string) (int, string, string) {
		t.Helper()
		old := stdin
		stdin = strings.NewReader(in)
		defer func() { stdin = old }()
		var out, errb bytes.Buffer
		code := run(ctx, append(args, "--endpoint", e.Endpoint, "--table", table), &out, &errb)
		return code, out.String(), errb.String()
	}
	var terr bytes.Buffer
	if code := run(ctx, []string{"tables", "create", "--only", "api-keys", "--prefix", prefix, "--endpoint", e.Endpoint}, &bytes.Buffer{}, &terr); code != 0 {
		t.Fatalf("tables create: %d %s", code, terr.String())
	}
	mint := func(tenant string) string {
		t.Helper()
		code, out, errb := cli("", "apikey", "create", "--tenant", tenant)
		if code != 0 {
			t.Fatalf("apikey create: %d %s", code, errb)
		}
		return strings.TrimSpace(out)
	}
	k1, k2, k3, k4 := mint("acme"), mint("acme"), mint("globex"), mint("acme")
	keys := &apikeys.DynamoKeys{Client: e.Client(), Table: table}
	authz := &authfn.Handler{Keys: keys}
	granted := func(k string) bool {
		r, err := authz.Handle(ctx, events.APIGatewayV2CustomAuthorizerV2Request{Headers: map[string]string{"authorization": "Bearer " + k}})
		if err != nil && !errors.Is(err, authfn.ErrUnauthorized) {
			t.Fatalf("authorizer: %v", err)
		}
		return err == nil && r.IsAuthorized
	}
	hexOf := func(k string) string { s := sha256.Sum256([]byte(k)); return hex.EncodeToString(s[:]) }
	for _, k := range []string{k1, k2, k3, k4} {
		if !granted(k) {
			t.Fatalf("a minted key is refused")
		}
	}

	// By the key, read from stdin.
	code, out, errb := cli(k1+"\n", "apikey", "revoke", "--key", "-")
	// Against an endpoint (idemkit dev, an emulator) the cache that counts
	// is dev's, kept for its --authorizer-ttl: the notice names it too.
	if code != 0 || out != "revoked key#"+hexOf(k1)+" (tenant acme)\n" || !strings.Contains(errb, "5m0s") || !strings.Contains(errb, "cache") ||
		!strings.Contains(errb, "idemkit dev keeps its decisions for its --authorizer-ttl") {
		t.Fatalf("revoke --key -: exit %d stdout %q stderr %q", code, out, errb)
	}
	if strings.Contains(out+errb, k1) {
		t.Fatal("revoke printed the key")
	}
	if granted(k1) || !granted(k2) || !granted(k3) {
		t.Fatalf("after revoking k1: k1 %v k2 %v k3 %v, want false true true", granted(k1), granted(k2), granted(k3))
	}
	// Again: nothing to revoke, said with the table.
	if code, out, errb := cli(k1, "apikey", "revoke", "--key", "-"); code != 1 || out != "" || !strings.Contains(errb, "no key") || !strings.Contains(errb, table) {
		t.Fatalf("revoking a revoked key: exit %d stdout %q stderr %q", code, out, errb)
	}
	// By its hash, guarded by the tenant: the wrong tenant revokes nothing.
	if code, out, errb := cli("", "apikey", "revoke", "--hash", hexOf(k2), "--tenant", "globex"); code != 1 || out != "" || !strings.Contains(errb, "another tenant") || !granted(k2) {
		t.Fatalf("revoke with the wrong --tenant: exit %d stdout %q stderr %q, k2 granted %v", code, out, errb, granted(k2))
	}
	if code, out, errb := cli("", "apikey", "revoke", "--hash", "key#"+strings.ToUpper(hexOf(k2)), "--tenant", "acme"); code != 0 || out != "revoked key#"+hexOf(k2)+" (tenant acme)\n" || granted(k2) {
		t.Fatalf("revoke --hash key#HEX: exit %d stdout %q stderr %q", code, out, errb)
	}
	// From a key file saved with a UTF-8 byte-order mark and CRLF (as some
	// Windows editors save text): the mark is not part of the key.
	if code, out, errb := cli("\ufeff"+k4+"\r\n", "apikey", "revoke", "--key", "-"); code != 0 || out != "revoked key#"+hexOf(k4)+" (tenant acme)\n" || granted(k4) {
		t.Fatalf("revoke --key - with a byte-order mark: exit %d stdout %q stderr %q", code, out, errb)
	}
	// By the key as a flag.
	if code, out, errb := cli("", "apikey", "revoke", "--key", k3); code != 0 || out != "revoked key#"+hexOf(k3)+" (tenant globex)\n" || granted(k3) {
		t.Fatalf("revoke --key KEY: exit %d stdout %q stderr %q", code, out, errb)
	}
}

// TestAPIKeyRevokeUsageErrors: what revoke is given is checked before any
// table is reached: exactly one of --key and --hash, a key as create mints
// it (apikeys.KeyRule), a hash as HashKey stores it, a tenant of the
// tenantId grammar; each a usage error naming the flag (a key file in
// UTF-16 is named as such).
func TestAPIKeyRevokeUsageErrors(t *testing.T) {
	const ep = "http://127.0.0.1:1" // nothing listens
	h := strings.Repeat("ab", 32)
	for _, c := range []struct {
		in    string
		args  []string
		names string
	}{
		{"", []string{}, "--key"},
		{"", []string{"--key", "idk_x", "--hash", h}, "--hash"},
		{"", []string{"--key", "a b"}, "--key"},
		{"", []string{"--key", "-"}, "--key -"},      // nothing on stdin
		{"a b\n", []string{"--key", "-"}, "--key -"}, // not a key
		{"\xff\xfei\x00d\x00k\x00_\x00x\x00", []string{"--key", "-"}, "UTF-16"},
		{"", []string{"--hash", "key#" + h[:63]}, "--hash"},
		{"", []string{"--hash", "sha#" + h}, "--hash"},
		{"", []string{"--hash", strings.Repeat("g", 64)}, "--hash"},
		{"", []string{"--hash", h, "--tenant", "a b"}, "--tenant"},
		{"", []string{"--hash", h, "extra"}, `"extra"`},
	} {
		old := stdin
		stdin = strings.NewReader(c.in)
		var out, errb bytes.Buffer
		code := run(context.Background(), append(append([]string{"apikey", "revoke"}, c.args...), "--endpoint", ep), &out, &errb)
		stdin = old
		lines := strings.Split(strings.TrimSuffix(errb.String(), "\n"), "\n")
		if code != 2 || out.Len() != 0 || len(lines) != 2 || !strings.Contains(lines[0], c.names) || lines[1] != "run 'idemkit apikey revoke -h' for help" {
			t.Errorf("apikey revoke %q (stdin %q): exit %d stdout %q stderr %q; want exit 2, one line naming %s, then the hint", c.args, c.in, code, out.String(), errb.String(), c.names)
		}
	}
}
