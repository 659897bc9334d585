package main

import (
	"bytes"
	"context"
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

// TestAPIKeyCreateStoresAKeyInAnotherRegionsTable: API keys are regional
// (each region's api-keys table), so a client that fails over to another
// region sends the key it holds there. `apikey create --key -` stores the
// key read from stdin (one line, as a create printed it) in this table,
// with its tenant and attributes, and prints "stored key#HEX (tenant T)",
// never the key. Run again (its answer lost), the same credential already
// there is the same line, exit 0; the key held by another tenant or with
// other attributes is refused, nothing written. `--key VALUE` is a usage
// error (the key stays out of the process list), and so is a line that is
// no key a create minted (a key chosen by hand could be guessed from its
// unsalted hash). Before, create only minted: the key of one region could
// be stored in no other, and the failed-over client was refused 401. Run
// on moto, one table per region.
func TestAPIKeyCreateStoresAKeyInAnotherRegionsTable(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	ctx := context.Background()
	prefix := fmt.Sprintf("or%d-", time.Now().UnixNano())
	home, other := prefix+"a-ApiKeysTable", prefix+"b-ApiKeysTable"
	for _, p := range []string{prefix + "a-", prefix + "b-"} {
		var terr bytes.Buffer
		if code := run(ctx, []string{"tables", "create", "--only", "api-keys", "--prefix", p, "--endpoint", e.Endpoint}, &bytes.Buffer{}, &terr); code != 0 {
			t.Fatalf("tables create: %d %s", code, terr.String())
		}
	}
	cli := func(in, table string, args ...string) (int, string, string) {
		t.Helper()
		old := stdin
		stdin = strings.NewReader(in)
		defer func() { stdin = old }()
		var out, errb bytes.Buffer
		code := run(ctx, append(args, "--endpoint", e.Endpoint, "--table", table), &out, &errb)
		return code, out.String(), errb.String()
	}
	code, out, errb := cli("", home, "apikey", "create", "--tenant", "acme", "--attr", "namespace=shop")
	if code != 0 {
		t.Fatalf("apikey create: %d %s", code, errb)
	}
	key := strings.TrimSpace(out)
	granted := func(table string) (apikeys.Credential, bool) {
		t.Helper()
		h := &authfn.Handler{Keys: &apikeys.DynamoKeys{Client: e.Client(), Table: table}}
		r, err := h.Handle(ctx, events.APIGatewayV2CustomAuthorizerV2Request{Headers: map[string]string{"authorization": "Bearer " + key}})
		if err != nil && !errors.Is(err, authfn.ErrUnauthorized) {
			t.Fatalf("authorizer: %v", err)
		}
		if err != nil || !r.IsAuthorized {
			return apikeys.Credential{}, false
		}
		ns, _ := r.Context["namespace"].(string)
		tn, _ := r.Context[authfn.ContextTenantKey].(string)
		return apikeys.Credential{Tenant: tn, Attrs: map[string]string{"namespace": ns}}, true
	}
	if _, ok := granted(other); ok {
		t.Fatal("the key is granted in the other region before it is stored there")
	}
	want := "stored " + apikeys.HashKey(key) + " (tenant acme)\n"
	for i := 0; i < 2; i++ { // the second run finds it there: the same answer
		code, out, errb = cli("\ufeff"+key+"\r\n", other, "apikey", "create", "--tenant", "acme", "--attr", "namespace=shop", "--key", "-")
		if code != 0 || out != want || strings.Contains(out+errb, key) {
			t.Fatalf("create --key - (run %d): exit %d stdout %q stderr %q; want %q and the key nowhere", i+1, code, out, errb, want)
		}
	}
	if c, ok := granted(other); !ok || c.Tenant != "acme" || c.Attrs["namespace"] != "shop" {
		t.Fatalf("the key stored in the other region: granted %v as %+v", ok, c)
	}
	for _, args := range [][]string{
		{"--tenant", "globex", "--attr", "namespace=shop"}, // another tenant
		{"--tenant", "acme"}, // other attributes
	} {
		code, out, errb = cli(key+"\n", other, append(append([]string{"apikey", "create"}, args...), "--key", "-")...)
		if code != 1 || out != "" || !strings.Contains(errb, "already registered") || strings.Contains(errb, key) {
			t.Fatalf("create --key - %v over a key stored otherwise: exit %d stdout %q stderr %q", args, code, out, errb)
		}
	}
	if c, ok := granted(other); !ok || c.Tenant != "acme" || c.Attrs["namespace"] != "shop" {
		t.Fatalf("a refused create changed the stored key: %v %+v", ok, c)
	}
	for _, tc := range []struct{ in, flag string }{
		{key + "\n", key},               // the key on the command line
		{"\n", "-"},                     // no key
		{"two words\n", "-"},            // not a key
		{"idk_\u00e9t\u00e9\n", "-"},    // not ASCII
		{"k-acme-0123456789\n", "-"},    // a key, but not one a create minted
		{key[:len(key)-1] + "\n", "-"},  // one character short
		{key[:len(key)-1] + "=\n", "-"}, // a character base64url does not hold
	} {
		code, out, errb = cli(tc.in, prefix+"c-ApiKeysTable", "apikey", "create", "--tenant", "acme", "--key", tc.flag)
		if code != 2 || out != "" || strings.Contains(errb, key) {
			t.Fatalf("create --key %.8q with stdin %.8q: exit %d stdout %q stderr %q; want a usage error quoting no key", tc.flag, tc.in, code, out, errb)
		}
	}
}
