package idem_test

import (
	"github.com/idemkit/idemkit/idem/idemenv"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
)

// A fourth preset is one package holding its Policy value and adding it to
// the registry (idem.RegisterPolicy, as idem/policy/commerce and
// idem/policy/erp do): PolicyNames, PolicyNamed and LoadEnv pick it up with
// no other edit.
func TestFourthPresetIsOneRegistryRow(t *testing.T) {
	partner := idem.PolicyOpenWOP
	partner.Name = "partner"
	partner.Key = idem.KeyPolicy{Name: "partner", MinLen: 16, MaxLen: 64, Allow: idem.Chars("A-Z", "0-9", "-")}
	partner.Retention = 48 * time.Hour
	restore := idem.RegisterPreset(partner)
	defer restore()

	if names := idem.PolicyNames(); !slices.Equal(names, []string{"openwop", "commerce", "erp", "partner"}) {
		t.Fatalf("PolicyNames() = %v, want the registry's names with the fourth last", names)
	}
	got, err := idem.PolicyNamed(" Partner ")
	if err != nil || got.Name != "partner" || got.Key.Name != "partner" || got.Retention != 48*time.Hour {
		t.Fatalf("PolicyNamed(partner) = %+v, %v", got.Name, err)
	}
	env, err := idemenv.Load(func(k string) string {
		if k == idemenv.Policy {
			return "partner"
		}
		return ""
	})
	if err != nil || env.PolicyName() != "partner" || env.EffectiveRetention() != 48*time.Hour {
		t.Fatalf("LoadEnv(IDEMPOTENCY_POLICY=partner) = %q %s, %v", env.PolicyName(), env.EffectiveRetention(), err)
	}
	var cfg idem.Config
	env.Apply(&cfg)
	cfg.Store, cfg.Tenant = memstore.New(), idem.SingleTenant("t1")
	if _, err := idem.New(cfg); err != nil {
		t.Fatalf("New with the fourth preset: %v", err)
	}
	_, err = idem.PolicyNamed("strict")
	if err == nil || !strings.Contains(err.Error(), "openwop, commerce, erp, partner") {
		t.Fatalf("an unknown name's error lists the registry, got %v", err)
	}

	restore()
	if _, err := idem.PolicyNamed("partner"); err == nil {
		t.Fatal("the preset is still named after its row was removed")
	}
}

// TestRegisterPolicyRefusesATakenOrEmptyName: a preset package that would
// shadow another's name, or register one PolicyNamed could never find,
// stops the program at start-up instead of answering under the wrong
// policy; the registry is left as it was.
func TestRegisterPolicyRefusesATakenOrEmptyName(t *testing.T) {
	before := idem.PolicyNames()
	for _, name := range []string{"erp", "openwop", "", "Partner"} {
		p := idem.PolicyOpenWOP
		p.Name = name
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterPolicy(%q) did not panic", name)
				}
			}()
			idem.RegisterPolicy(p)
		}()
	}
	if after := idem.PolicyNames(); !slices.Equal(before, after) {
		t.Fatalf("PolicyNames() = %v after refused registrations, want %v", after, before)
	}
}
