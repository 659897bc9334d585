package devstack

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// TestDevDemoKeysCarryPolicyAttributes: the demo keys idemkit dev mints
// carry every credential attribute the shipped policies scope keys by (the
// commerce policy's namespace and worker, the ERP policy's client, company
// and organisation), stored with the key so the authorizer passes them on.
func TestDevDemoKeysCarryPolicyAttributes(t *testing.T) {
	c := demoCredential("demo-a")
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, n := range append(append([]string{}, commerce.Policy.Scope.Credential...), erp.Policy.Scope.Credential...) {
		if c.Attrs[n] == "" {
			t.Errorf("demo key lacks %s", n)
		}
	}
	keys := apikeys.NewMemKeys()
	if err := putDevKey(context.Background(), keys, "k", c); err != nil {
		t.Fatal(err)
	}
	if got, ok, _ := keys.Credential(context.Background(), apikeys.HashKey("k")); !ok || len(got.Attrs) != len(c.Attrs) {
		t.Fatalf("stored %+v", got)
	}
}

// TestSeededKeyFollowsTheAuthorizersRule: a key given to dev (--api-key
// KEY=TENANT, Options.APIKeys) is accepted exactly when the authorizer
// would accept it as `Authorization: Bearer KEY` (one rule,
// apikeys.ValidKey): one character is enough, as it is for the deployed
// authorizer; whitespace of any kind, a control character or non-ASCII
// anywhere in it, or more than 512 bytes, is refused, since no request
// could ever present that key.
func TestSeededKeyFollowsTheAuthorizersRule(t *testing.T) {
	for _, key := range []string{"k", "idk_0123456789abcdefghijklmnopqrstuv", "a:b.c~d", "dGVzdA==", "a=b", "=k", "k=", strings.Repeat("k", 512), strings.Repeat("k", 513),
		"a b", " k", "k ", "\tk", "k\n", "", " ", "k\v", "\fk", "k\x00k", "k\x7fk", "kéy", "k\u00a0k"} {
		got, ok := authfn.BearerKey("Bearer " + key)
		authorizes := ok && got == key
		if err := CheckAPIKey(key + "=acme"); (err == nil) != authorizes {
			t.Errorf("key %q: CheckAPIKey %v, the authorizer accepts it: %v", key, err, authorizes)
		}
	}
}

// TestSeededKeySplitsAtTheLastEquals: a key may hold '=' (printable ASCII,
// as base64 padding does) and a tenantId never does, so KEY=TENANT is cut
// at its last '=': the key seeded, and shown in the ready line, is the
// whole key.
func TestSeededKeySplitsAtTheLastEquals(t *testing.T) {
	for kv, want := range map[string][2]string{
		"dGVzdA===acme": {"dGVzdA==", "acme"},
		"a=b=c":         {"a=b", "c"},
		"k-0123=anon:x": {"k-0123", "anon:x"},
	} {
		key, tenant, ok := splitAPIKey(kv)
		if !ok || key != want[0] || tenant != want[1] {
			t.Errorf("splitAPIKey(%q) = %q, %q, %v; want %q, %q", kv, key, tenant, ok, want[0], want[1])
		}
		if err := CheckAPIKey(kv); err != nil {
			t.Errorf("CheckAPIKey(%q): %v", kv, err)
		}
	}
	if _, _, ok := splitAPIKey("no-equals"); ok {
		t.Error("splitAPIKey without '=': ok")
	}
}

// TestSeededKeyOfAnotherTenantIsRefused: dev's tables may be reused
// (--dynamodb-endpoint, the same --table-prefix), so a key given with
// --api-key KEY=TENANT may already be stored. Stored for TENANT, it is
// kept as it is; stored for another tenant, dev does not start: requests
// presenting KEY would otherwise act as that other tenant while the
// command line says TENANT. The error names both tenants, not the key.
func TestSeededKeyOfAnotherTenantIsRefused(t *testing.T) {
	ctx := context.Background()
	ks := apikeys.NewMemKeys()
	const key = "k-reused-0123456789"
	if err := seedDevKey(ctx, ks, key+"=acme"); err != nil {
		t.Fatal(err)
	}
	if err := seedDevKey(ctx, ks, key+"=acme"); err != nil {
		t.Fatalf("the same key for the same tenant again: %v", err)
	}
	err := seedDevKey(ctx, ks, key+"=globex")
	if err == nil || !strings.Contains(err.Error(), "acme") || !strings.Contains(err.Error(), "globex") || strings.Contains(err.Error(), key) {
		t.Fatalf("the key of acme seeded for globex: %v; want an error naming both tenants, not the key", err)
	}
	if tenant, ok, _ := ks.Tenant(ctx, apikeys.HashKey(key)); !ok || tenant != "acme" {
		t.Fatalf("the stored key now authenticates %q (ok %v); want it left to acme", tenant, ok)
	}
}

// TestOneKeyForTwoTenantsIsRefused: the same key given twice with two
// tenants (--api-key k=acme --api-key k=globex) is a bad option, refused
// before anything starts (ErrConfig), not a conflict found at seeding;
// given twice for one tenant it is harmless.
func TestOneKeyForTwoTenantsIsRefused(t *testing.T) {
	_, err := Options{APIKeys: []string{"k-0123456789=acme", "k-0123456789=globex"}}.withDefaults()
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "acme") || !strings.Contains(err.Error(), "globex") {
		t.Fatalf("one key for two tenants: %v; want ErrConfig naming both", err)
	}
	if _, err := (Options{APIKeys: []string{"k-0123456789=acme", "k-0123456789=acme"}}).withDefaults(); err != nil {
		t.Fatalf("one key twice for one tenant: %v", err)
	}
}
