package ledger_test

import (
	"encoding/json"
	"errors"
	"github.com/idemkit/idemkit/ledger/identity"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/idemkit/idemkit/ledger"
	"github.com/idemkit/idemkit/ledger/memstore"
)

type identityVectors struct {
	Activity []struct {
		Tenant, RunID, NodeID, Ordinal, ProviderKey string
		InvocationID, EffectID, IdempotencyKey      string
	} `json:"activity"`
	Business []struct {
		Tenant, Operation, Key   string
		EffectID, IdempotencyKey string
	} `json:"business"`
	Rejected []struct {
		Recipe, Why, Tenant, RunID, NodeID, Ordinal, ProviderKey, Operation, Key string
	} `json:"rejected"`
}

// The golden vectors in testdata were produced by an independent (Python)
// implementation of the documented formulas.
func TestIdentityGoldenVectors(t *testing.T) {
	b, err := os.ReadFile("testdata/identity-vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v identityVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Activity) < 5 || len(v.Business) < 5 || len(v.Rejected) < 5 {
		t.Fatalf("vector table too small: %d %d %d", len(v.Activity), len(v.Business), len(v.Rejected))
	}
	effectRe := regexp.MustCompile(`^(anon:)?[A-Za-z0-9._~-]{1,128}/[A-Za-z0-9._~-]{16,128}$`)
	keyRe := regexp.MustCompile(`^[A-Za-z0-9._~-]{22,128}$`)
	seen := map[string]bool{}
	check := func(id identity.Identity, wantID, wantKey string) {
		t.Helper()
		if id.EffectID != wantID || id.ProviderKey != wantKey {
			t.Errorf("got %s / %s, want %s / %s", id.EffectID, id.ProviderKey, wantID, wantKey)
		}
		if !effectRe.MatchString(id.EffectID) || !keyRe.MatchString(id.ProviderKey) {
			t.Errorf("grammar: %s %s", id.EffectID, id.ProviderKey)
		}
		if seen[id.EffectID] {
			t.Errorf("two vectors share effectId %s", id.EffectID)
		}
		seen[id.EffectID] = true
	}
	for _, a := range v.Activity {
		ord, err := strconv.ParseUint(a.Ordinal, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		id, err := identity.FromActivity(identity.Activity{Tenant: a.Tenant, RunID: a.RunID, NodeID: a.NodeID, Ordinal: ord, Provider: a.ProviderKey})
		if err != nil {
			t.Fatalf("%+v: %v", a, err)
		}
		check(id, a.EffectID, a.IdempotencyKey)
		if id.InvocationID != a.InvocationID || id.Keying != identity.KeyingActivityRecipe || id.Recipe != identity.ActivityRecipe {
			t.Errorf("%+v: %+v", a, id)
		}
	}
	for _, c := range v.Business {
		id, err := identity.FromBusiness(identity.Business{Tenant: c.Tenant, Operation: c.Operation, Key: c.Key})
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		check(id, c.EffectID, c.IdempotencyKey)
		if id.Keying != identity.KeyingBusinessIdentity || id.Recipe != identity.BusinessRecipe || id.InvocationID != "" {
			t.Errorf("%+v: %+v", c, id)
		}
	}
	for _, r := range v.Rejected {
		var err error
		switch r.Recipe {
		case "activity-recipe":
			ord, _ := strconv.ParseUint(r.Ordinal, 10, 64)
			_, err = identity.FromActivity(identity.Activity{Tenant: r.Tenant, RunID: r.RunID, NodeID: r.NodeID, Ordinal: ord, Provider: r.ProviderKey})
		case "business-identity":
			_, err = identity.FromBusiness(identity.Business{Tenant: r.Tenant, Operation: r.Operation, Key: r.Key})
		default:
			t.Fatalf("unknown recipe %q", r.Recipe)
		}
		if !errors.Is(err, ledger.ErrInvalidIdentity) {
			t.Errorf("%s: got %v, want ErrInvalidIdentity", r.Why, err)
		}
	}
}

// NUL separators make field boundaries unambiguous: moving a byte across a
// boundary changes the identity.
func TestIdentityFieldBoundaries(t *testing.T) {
	a, _ := identity.FromActivity(identity.Activity{Tenant: "t", RunID: "t/ab", NodeID: "c", Ordinal: 1, Provider: "p"})
	b, _ := identity.FromActivity(identity.Activity{Tenant: "t", RunID: "t/a", NodeID: "bc", Ordinal: 1, Provider: "p"})
	c, _ := identity.FromActivity(identity.Activity{Tenant: "t", RunID: "t/ab", NodeID: "c", Ordinal: 11, Provider: ""})
	d, _ := identity.FromActivity(identity.Activity{Tenant: "t", RunID: "t/ab", NodeID: "c", Ordinal: 1, Provider: "1p"})
	ids := map[string]bool{a.EffectID: true, b.EffectID: true, c.EffectID: true, d.EffectID: true}
	if len(ids) != 4 {
		t.Fatal("field boundaries collide")
	}
	x, _ := identity.FromBusiness(identity.Business{Tenant: "t", Operation: "ab", Key: "c"})
	y, _ := identity.FromBusiness(identity.Business{Tenant: "t", Operation: "a", Key: "bc"})
	if x.EffectID == y.EffectID {
		t.Fatal("business field boundaries collide")
	}
	if identity.ProviderKey(x.EffectID) != x.ProviderKey {
		t.Fatal("ProviderKey disagrees")
	}
}

func TestConfigValidation(t *testing.T) {
	if _, err := ledger.New(ledger.Config{}); err == nil {
		t.Fatal("nil store accepted")
	}
	st := memstore.New()
	for _, c := range []ledger.Config{
		{Store: st, Lease: time.Millisecond},
		{Store: st, Retention: ledger.MinRetention - time.Second},
	} {
		if _, err := ledger.New(c); err == nil {
			t.Fatalf("accepted %+v", c)
		}
	}
	if _, err := ledger.New(ledger.Config{Store: st}); err != nil {
		t.Fatal(err)
	}
}

func TestCurrentRecipes(t *testing.T) {
	r := identity.CurrentStamps()
	b, _ := json.Marshal(r)
	if string(b) != `{"activityIdentityRecipe":"openwop-activity-v2","semanticRequestRecipe":"openwop-semantic-request-v2"}` {
		t.Fatal(string(b))
	}
}
