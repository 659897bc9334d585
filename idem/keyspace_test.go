package idem_test

import (
	"context"
	"errors"
	"github.com/idemkit/idemkit/idem/keyspace"
	"github.com/idemkit/idemkit/ledger/identity"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
	"github.com/idemkit/idemkit/ledger"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// hostDomains are the key prefixes of host-generated identifiers: the
// ledger's fire-once slots ("host#", RFC 0150 §A's "internal locks,
// scheduler fire-once slots") and its effect records ("effect#").
var hostDomains = []string{"host#", "effect#"}

// checkCallerID asserts that id is in the caller keyspace and can never be
// a host identifier.
func checkCallerID(t testing.TB, id string) {
	t.Helper()
	if !keyspace.IsCaller(id) || !strings.HasPrefix(id, keyspace.CallerPrefix) {
		t.Fatalf("ScopeID produced %q outside the caller keyspace", id)
	}
	for _, d := range hostDomains {
		if strings.HasPrefix(id, d) || strings.Contains(id, "#") {
			t.Fatalf("ScopeID produced %q in host domain %q", id, d)
		}
	}
}

// RFC 0150 §A / §F idempotency-store-no-host-generated-keys: no caller key
// can name, claim or suppress a host-generated lock.
//
// The proof has three legs:
//  1. Name: every Layer-1 record ID is ScopeID(...) = "caller:v1:" +
//     base64url(sha256(...)) — never a "host#"/"effect#" ledger key, whatever
//     the caller sends (including the slot's own key, its hash, its job and
//     slot names, or a forged "caller:v1:" string).
//  2. Claim: both Layer-1 stores refuse every ID that is not a caller ID, so
//     a host key can never be written to the Layer-1 store (and the ledger's
//     keys live in another table, EffectsTable).
//  3. Suppress: a caller who claims and completes Layer-1 records under keys
//     derived from a slot does not stop the ledger's FireOnce for that slot
//     from firing, exactly once.
func TestCallerKeyspaceCannotNameClaimOrSuppressHostSlots(t *testing.T) {
	ctx := context.Background()
	slot := identity.Slot{Job: "schedule-fire:nightly-report", Slot: "2026-09-18T00:00:00Z"}
	slotKey, err := slot.Key()
	if err != nil || !strings.HasPrefix(slotKey, "host#") {
		t.Fatalf("slot key %q, %v", slotKey, err)
	}
	hash := strings.TrimPrefix(slotKey, "host#")
	adversarial := []string{
		slotKey, hash, "host#" + hash, "effect#" + hash, slot.Job, slot.Slot,
		slot.Job + ":" + slot.Slot, "schedule-fire:job-1:slot-7",
		keyspace.CallerPrefix + hash, // a forged caller-looking string is still hashed
	}

	// 1. Name.
	for _, k := range adversarial {
		for _, tenant := range []string{"tenant:t", idem.AnonymousTenantID, "", "host#"} {
			for _, op := range []string{"POST /runs", "", "host#"} {
				id := keyspace.ID(tenant, op, k)
				checkCallerID(t, id)
				if id == slotKey || strings.Contains(id, hash) || strings.Contains(id, k) {
					t.Fatalf("ScopeID(%q, %q, %q) = %q names the host key", tenant, op, k, id)
				}
			}
		}
	}
	if keyspace.IsCaller(slotKey) || keyspace.IsCaller("effect#"+hash) {
		t.Fatal("a ledger key passes IsCallerID")
	}

	// 2. Claim: the Layer-1 store refuses host keys (dynamostore runs the same
	// check: idemtest's CallerKeyspaceOnly).
	st := memstore.New()
	now := newClock().Now()
	for _, id := range []string{slotKey, "effect#" + hash, hash, keyspace.CallerPrefix + "x"} {
		_, err := st.Claim(ctx, idem.Record{ID: id, Digest: "d", Owner: "o", State: idem.StatePending, LeaseExpires: now.Add(1e9)}, now)
		if !errors.Is(err, idem.ErrInvalidRecord) {
			t.Fatalf("Layer-1 store accepted host id %q: %v", id, err)
		}
	}
	if st.Len() != 0 {
		t.Fatalf("Layer-1 store holds %d records", st.Len())
	}

	// 3. Suppress: callers send every adversarial key (those the grammar
	// accepts) through the Guard and complete; the slot still fires once.
	e := newEnv(t, func(c *idem.Config) { c.Policy = commerce.Policy }) // the loosest grammar
	h := &handler{}
	accepted := 0
	for _, k := range adversarial {
		r := e.call(h, commerceEvent("POST", "POST /runs", k, `{}`))
		if r.StatusCode == 201 {
			accepted++
		}
	}
	if accepted == 0 {
		t.Fatal("no adversarial key was accepted: the suppression leg proves nothing")
	}
	l, err := ledger.New(ledger.Config{Store: ledgermem.New()})
	if err != nil {
		t.Fatal(err)
	}
	fired := 0
	for range 2 {
		if _, err := l.FireOnce(ctx, slot, func(context.Context) error { fired++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	if fired != 1 {
		t.Fatalf("slot fired %d times, want exactly 1", fired)
	}
}

// FuzzScopeID: for any tenant, operation and key, ScopeID is in the caller
// keyspace and never a host identifier; distinct scopes never share an ID
// (length-prefixed parts).
func FuzzScopeID(f *testing.F) {
	f.Add("tenant:t", "POST /runs", "k_0123456789abcdefghijkl", "b")
	f.Add("anon:", "POST /runs", "host#abc", "host#")
	f.Add("a", "bc", "d", "ab")
	f.Fuzz(func(t *testing.T, tenant, op, key, other string) {
		id := keyspace.ID(tenant, op, key)
		checkCallerID(t, id)
		if other != tenant && keyspace.ID(other, op, key) == id {
			t.Fatalf("tenants %q and %q share a scope", tenant, other)
		}
		if other != key && keyspace.ID(tenant, op, other) == id {
			t.Fatalf("keys %q and %q share a scope", key, other)
		}
		if tenant+op != "" && keyspace.ID("", tenant+op, key) == id && tenant != "" {
			t.Fatalf("tenant/operation boundary is ambiguous")
		}
	})
}

// TestAnonPrefixedTenantIsNotTheAnonymousScope: a tenantId may begin with
// "anon:" (the OpenWOP grammar), and `idemkit apikey create --tenant
// anon:x` mints a key for one. Such a tenant is an authenticated tenant
// like any other: under AnonymousTenant, an unauthenticated request, a
// request of tenant "anon:x" and one of tenant "anon:" with the same key
// and body each run the handler (three scopes), under every policy,
// credential parts included.
func TestAnonPrefixedTenantIsNotTheAnonymousScope(t *testing.T) {
	for _, p := range []idem.Policy{idem.PolicyOpenWOP, commerce.Policy, erp.Policy} {
		t.Run(p.Name, func(t *testing.T) {
			e := newEnv(t, func(c *idem.Config) { c.Unauthenticated = idem.AnonymousTenant; c.Policy = p })
			h := &handler{}
			const key = "anon-scope-key-0123456789abcdef"
			anon := v2event("POST", "POST /runs", key, `{}`)
			anon.RequestContext.Authorizer = nil
			e.call(h, anon)
			e.call(h, anon) // the anonymous caller's replay
			for _, tenant := range []string{"anon:x", "anon:"} {
				ev := v2event("POST", "POST /runs", key, `{}`)
				ev.RequestContext.Authorizer.Lambda["tenantId"] = tenant
				ev.RequestContext.Authorizer.Lambda["namespace"] = "shop" // the commerce policy's parts
				ev.RequestContext.Authorizer.Lambda["worker"] = "w"
				if r := e.call(h, ev); r.StatusCode >= 400 {
					t.Fatalf("tenant %q: %d %s", tenant, r.StatusCode, r.Body)
				}
			}
			if h.Calls() != 3 {
				t.Fatalf("handler ran %d times, want 3: an anon:-prefixed tenant shared the anonymous scope", h.Calls())
			}
		})
	}
}
