package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/idemkit/idemkit/ledger/identity"
	"math/rand/v2"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/idemkit/idemkit/internal/shared"
	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/memstore"
)

var (
	idsOnce    sync.Once
	idsSchemas map[string]*jsonschema.Schema
	idsErr     error
)

// idsDef returns the compiled $defs/<def> of
// ../shared/openwop/schemas/v2/ids.schema.json (the reference file, never a
// copy of its patterns).
func idsDef(t testing.TB, def string) *jsonschema.Schema {
	t.Helper()
	path := shared.Path(t, "openwop", "schemas", "v2", "ids.schema.json")
	idsOnce.Do(func() {
		f, err := os.Open(path)
		if err != nil {
			idsErr = err
			return
		}
		defer f.Close()
		doc, err := jsonschema.UnmarshalJSON(f)
		if err != nil {
			idsErr = err
			return
		}
		c := jsonschema.NewCompiler()
		const url = "https://openwop.dev/spec/v2/ids.schema.json"
		if idsErr = c.AddResource(url, doc); idsErr != nil {
			return
		}
		idsSchemas = map[string]*jsonschema.Schema{}
		for _, d := range []string{"effectId", "runId", "nodeId", "tenantId"} {
			if idsSchemas[d], idsErr = c.Compile(url + "#/$defs/" + d); idsErr != nil {
				return
			}
		}
	})
	if idsErr != nil {
		t.Fatalf("ids.schema.json: %v", idsErr)
	}
	s := idsSchemas[def]
	if s == nil {
		t.Fatalf("ids.schema.json: no $defs/%s compiled", def)
	}
	return s
}

func schemaOK(t testing.TB, def, v string) bool {
	t.Helper()
	return idsDef(t, def).Validate(v) == nil
}

// Every effectId the recipes mint (golden vectors and random inputs)
// validates against ids.schema.json $defs/effectId and is bound to its
// tenant.
func TestMintedEffectIDsValidateAgainstIDsSchema(t *testing.T) {
	b, err := os.ReadFile("testdata/identity-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v identityVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	var ids []identity.Identity
	for _, a := range v.Activity {
		ord, _ := strconv.ParseUint(a.Ordinal, 10, 64)
		id, err := identity.FromActivity(identity.Activity{Tenant: a.Tenant, RunID: a.RunID, NodeID: a.NodeID, Ordinal: ord, Provider: a.ProviderKey})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	for _, c := range v.Business {
		id, err := identity.FromBusiness(identity.Business{Tenant: c.Tenant, Operation: c.Operation, Key: c.Key})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		tenant := randFrom(rng, "abcXYZ09._-", 1, 128)
		if rng.IntN(4) == 0 {
			tenant = "anon:" + tenant
		}
		a, err := identity.FromActivity(identity.Activity{Tenant: tenant, RunID: tenant + "/" + randFrom(rng, "ab/:\u00e9 \t", 1, 40),
			NodeID: randFrom(rng, "ab:\u4e16\n", 1, 20), Ordinal: rng.Uint64(), Provider: randFrom(rng, "ab:/ ", 0, 10)})
		if err != nil {
			t.Fatal(err)
		}
		bi, err := identity.FromBusiness(identity.Business{Tenant: tenant, Operation: randFrom(rng, "ab./ ", 1, 20), Key: randFrom(rng, "ab/:\u00e9", 1, 300)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a, bi)
	}
	for _, id := range ids {
		if !schemaOK(t, "effectId", id.EffectID) {
			t.Fatalf("effectId %q does not validate against ids.schema.json $defs/effectId", id.EffectID)
		}
		if !schemaOK(t, "tenantId", id.Tenant) || !strings.HasPrefix(id.EffectID, id.Tenant+"/") {
			t.Fatalf("effectId %q is not bound to tenant %q", id.EffectID, id.Tenant)
		}
		if strings.Contains(id.EffectID, "~") {
			t.Fatalf("minted a tenant-bound id containing '~': %q", id.EffectID)
		}
	}
}

// Do accepts an effectId, runId and nodeId exactly when ids.schema.json
// does: the grammar checks in the code agree with the reference schema on a
// corpus of boundary cases and random strings.
func TestDoIDGrammarsAgreeWithIDsSchema(t *testing.T) {
	l, err := ledger.New(ledger.Config{Store: memstore.New(), Wait: -1})
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, ledger.Call) ([]byte, error) { return []byte("x"), nil }
	o16 := strings.Repeat("o", 16)
	corpus := []string{
		"acme/" + o16, "acme/" + o16[:15], "acme/" + strings.Repeat("o", 128), "acme/" + strings.Repeat("o", 129),
		strings.Repeat("t", 128) + "/" + o16, strings.Repeat("t", 129) + "/" + o16, "/" + o16, "acme" + o16,
		"anon:acme/" + o16, "anon:/" + o16, "anon:anon:a/" + o16, "a:b/" + o16, "acme/" + o16 + "/x",
		"acme/" + o16 + "\n", "acme /" + o16, "acme/" + o16 + "\u00e9", "ac~me/" + o16 + "~~", "acme/" + o16[:8] + ":" + o16[:8],
		"ACME.x_y-z/" + strings.Repeat("-._~", 4), "", "n", "node:1", "a b", strings.Repeat("n", 128), strings.Repeat("n", 129),
		"\u4e16", "acme/\x00" + o16,
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		corpus = append(corpus, randFrom(rng, "aZ09._~-/:\u00e9 ", 0, 40), "acme/"+randFrom(rng, "aZ09._~-/:", 10, 20),
			randFrom(rng, "aZ~-", 0, 3)+"/"+randFrom(rng, "aZ09._~-", 14, 18))
	}
	base, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "op", Key: "k"})
	accepted := func(eff ledger.Effect) bool {
		_, err := l.Do(context.Background(), eff, noop)
		if err != nil && !errors.Is(err, ledger.ErrInvalidIdentity) {
			t.Fatalf("Do(%+v): %v", eff, err)
		}
		return err == nil
	}
	for _, s := range corpus {
		// As an effectId (hand-built, e.g. read back from a record).
		id := base
		id.EffectID, id.Tenant = s, strings.SplitN(s, "/", 2)[0]
		id.ProviderKey = identity.ProviderKey(s)
		if got, want := accepted(ledger.Effect{Identity: id}), schemaOK(t, "effectId", s); got != want {
			t.Errorf("effectId %q: Do accepts %v, ids.schema.json %v", s, got, want)
		}
		// As a runId of the effect's tenant.
		if strings.HasPrefix(s, "acme/") {
			if got, want := accepted(ledger.Effect{Identity: base, RunID: s, NodeID: "n"}), schemaOK(t, "runId", s); got != want {
				t.Errorf("runId %q: Do accepts %v, ids.schema.json %v", s, got, want)
			}
		}
		// As a nodeId.
		if s != "" {
			if got, want := accepted(ledger.Effect{Identity: base, NodeID: s}), schemaOK(t, "nodeId", s); got != want {
				t.Errorf("nodeId %q: Do accepts %v, ids.schema.json %v", s, got, want)
			}
		}
	}
}

func randFrom(rng *rand.Rand, alphabet string, minLen, maxLen int) string {
	rs := []rune(alphabet)
	n := minLen + rng.IntN(maxLen-minLen+1)
	var b strings.Builder
	for range n {
		b.WriteRune(rs[rng.IntN(len(rs))])
	}
	return b.String()
}

// activityKey and businessKey are the logical inputs of an identity: two
// invocations are the same logical invocation exactly when these are equal.
type activityKey struct {
	tenant, run, node string
	ord               uint64
	prov              string
}

// Two distinct logical invocations always get different identities, of
// either recipe and across recipes; the same one always gets the same. The
// inputs come from a tiny alphabet with short fields and small ordinals, so
// any encoding that is not injective (a missing separator, the ordinal not
// delimited, fields swapped) produces collisions here.
func TestDistinctInvocationsDistinctIdentities(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	seen := map[string]string{}
	check := func(id identity.Identity, logical string) {
		t.Helper()
		if prev, ok := seen[id.EffectID]; ok && prev != logical {
			t.Fatalf("%s and %s share effectId %s", prev, logical, id.EffectID)
		}
		seen[id.EffectID] = logical
		if id2 := identity.ProviderKey(id.EffectID); id2 != id.ProviderKey {
			t.Fatalf("provider key is not a function of the effectId")
		}
	}
	tenants := []string{"t", "tt", "anon:t"}
	for range 30000 {
		tenant := tenants[rng.IntN(len(tenants))]
		a := activityKey{tenant, tenant + "/" + randFrom(rng, "a1/", 0, 3), randFrom(rng, "a1:", 1, 3), uint64(rng.IntN(13)), randFrom(rng, "a1", 0, 3)}
		id, err := identity.FromActivity(identity.Activity{Tenant: a.tenant, RunID: a.run, NodeID: a.node, Ordinal: a.ord, Provider: a.prov})
		if err != nil {
			t.Fatal(err)
		}
		check(id, fmt.Sprintf("activity%q", []string{a.tenant, a.run, a.node, strconv.FormatUint(a.ord, 10), a.prov}))
		op, key := randFrom(rng, "a1/", 1, 3), randFrom(rng, "a1/", 1, 4)
		bid, err := identity.FromBusiness(identity.Business{Tenant: tenant, Operation: op, Key: key})
		if err != nil {
			t.Fatal(err)
		}
		check(bid, fmt.Sprintf("business%q", []string{tenant, op, key}))
	}
	if len(seen) < 5000 {
		t.Fatalf("only %d distinct invocations generated", len(seen))
	}
}

// FuzzDistinctActivitiesDistinctIdentities: for any two activity inputs,
// the identities are equal exactly when the inputs are (ignoring inputs the
// recipe rejects).
func FuzzDistinctActivitiesDistinctIdentities(f *testing.F) {
	f.Add("t", "t/ab", "c", uint64(1), "p", "t", "t/a", "bc", uint64(1), "p")
	f.Add("t", "t/a", "b", uint64(1), "1p", "t", "t/a", "b", uint64(11), "p")
	f.Add("t", "t/a", "b", uint64(0), "", "tt", "t/a", "b", uint64(0), "")
	f.Add("anon:t", "r", "n", uint64(7), "x", "anon:t", "r", "n", uint64(7), "x")
	f.Fuzz(func(t *testing.T, t1, r1, n1 string, o1 uint64, p1, t2, r2, n2 string, o2 uint64, p2 string) {
		a := identity.Activity{Tenant: t1, RunID: r1, NodeID: n1, Ordinal: o1, Provider: p1}
		b := identity.Activity{Tenant: t2, RunID: r2, NodeID: n2, Ordinal: o2, Provider: p2}
		ia, errA := identity.FromActivity(a)
		ib, errB := identity.FromActivity(b)
		if errA != nil || errB != nil {
			for _, s := range []string{t1, r1, n1, p1} {
				if errA == nil && strings.IndexByte(s, 0) >= 0 {
					t.Fatalf("NUL accepted in %+v", a)
				}
			}
			return
		}
		if (a == b) != (ia.EffectID == ib.EffectID) || (a == b) != (ia.ProviderKey == ib.ProviderKey) {
			t.Fatalf("%+v -> %s\n%+v -> %s", a, ia.EffectID, b, ib.EffectID)
		}
	})
}

// FuzzDistinctBusinessDistinctIdentities is the same property for business
// identities.
func FuzzDistinctBusinessDistinctIdentities(f *testing.F) {
	f.Add("t", "ab", "c", "t", "a", "bc")
	f.Add("t", "a", "b", "tt", "a", "b")
	f.Fuzz(func(t *testing.T, t1, o1, k1, t2, o2, k2 string) {
		a := identity.Business{Tenant: t1, Operation: o1, Key: k1}
		b := identity.Business{Tenant: t2, Operation: o2, Key: k2}
		ia, errA := identity.FromBusiness(a)
		ib, errB := identity.FromBusiness(b)
		if errA != nil || errB != nil {
			return
		}
		if (a == b) != (ia.EffectID == ib.EffectID) {
			t.Fatalf("%+v -> %s\n%+v -> %s", a, ia.EffectID, b, ib.EffectID)
		}
	})
}

// The attempt never takes part in an identity: no identity input has a
// field for it, and a business identity has no field for a run, node or
// ordinal either, so it cannot depend on the entry point. Checked on the
// types, so adding such a field fails here.
func TestIdentityInputsExcludeAttemptRunNodeOrdinal(t *testing.T) {
	fields := func(v any) []string {
		var out []string
		rt := reflect.TypeOf(v)
		for i := range rt.NumField() {
			out = append(out, strings.ToLower(rt.Field(i).Name))
		}
		return out
	}
	for _, f := range fields(identity.Activity{}) {
		for _, bad := range []string{"attempt", "retry", "try"} {
			if strings.Contains(f, bad) {
				t.Errorf("Activity.%s: the attempt must not take part in the identity", f)
			}
		}
	}
	for _, f := range fields(identity.Business{}) {
		for _, bad := range []string{"attempt", "retry", "try", "run", "node", "ordinal", "invocation"} {
			if strings.Contains(f, bad) {
				t.Errorf("Business.%s: a business identity contains no run, node, ordinal or attempt", f)
			}
		}
	}
	// The business identity is tenant-bound: the same operation and key
	// under another tenant is another effect, prefixed by that tenant.
	a, _ := identity.FromBusiness(identity.Business{Tenant: "acme", Operation: "refund", Key: "o-1"})
	b, _ := identity.FromBusiness(identity.Business{Tenant: "globex", Operation: "refund", Key: "o-1"})
	if a.EffectID == b.EffectID || a.ProviderKey == b.ProviderKey || !strings.HasPrefix(a.EffectID, "acme/") || !strings.HasPrefix(b.EffectID, "globex/") {
		t.Fatalf("business identity not tenant-bound: %s %s", a.EffectID, b.EffectID)
	}
	// Nor does the provider key: it is derived from the effectId alone.
	if identity.ProviderKey(a.EffectID) != a.ProviderKey {
		t.Fatal("provider key depends on more than the effectId")
	}
}
