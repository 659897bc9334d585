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

// A fourth preset is one file holding its Policy value plus one row in the
// registry (idem/presets.go): PolicyNames, PolicyNamed and LoadEnv pick it
// up with no other edit.
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
