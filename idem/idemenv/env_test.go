package idemenv_test

import (
	"errors"
	"github.com/idemkit/idemkit/idem/idemenv"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem"
)

// IDEMPOTENCY_POLICY picks one of the three published policies by name
// (case and spaces ignored); Apply puts it in Config.Policy; unset leaves
// Config's default (the OpenWOP policy); an unknown name is a *ConfigError
// naming the variable and every allowed value.
func TestEnvPolicy(t *testing.T) {
	for name, want := range map[string]string{"": "openwop", "openwop": "openwop", " Commerce ": "commerce", "erp": "erp"} {
		e, err := idemenv.Load(func(k string) string { return map[string]string{idemenv.Policy: name}[k] })
		if err != nil || e.PolicyName() != want {
			t.Fatalf("%q: %q %v", name, e.PolicyName(), err)
		}
		var c idem.Config
		e.Apply(&c)
		if name == "" && c.Policy.Name != "" || name != "" && c.Policy.Name != want {
			t.Fatalf("%q: Apply set Policy %q", name, c.Policy.Name)
		}
	}
	_, err := idemenv.Load(func(k string) string { return map[string]string{idemenv.Policy: "strict"}[k] })
	var ce *idem.ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 1 {
		t.Fatalf("bad policy: %v", err)
	}
	for _, s := range []string{"IDEMPOTENCY_POLICY", `"strict"`, "openwop", "commerce", "erp"} {
		if !strings.Contains(ce.Problems[0], s) {
			t.Errorf("problem %q does not name %s", ce.Problems[0], s)
		}
	}
	// The commerce policy keeps records forever unless a retention is set.
	e, _ := idemenv.Load(func(k string) string { return map[string]string{idemenv.Policy: "commerce"}[k] })
	if e.EffectiveRetention() != idem.Forever {
		t.Fatalf("commerce retention %s", e.EffectiveRetention())
	}
	e, _ = idemenv.Load(func(k string) string {
		return map[string]string{idemenv.Policy: "commerce", idemenv.RetentionHours: "48"}[k]
	})
	if e.EffectiveRetention().Hours() != 48 {
		t.Fatalf("commerce with 48 h: %s", e.EffectiveRetention())
	}
}
