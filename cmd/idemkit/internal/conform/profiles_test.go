package conform

import (
	"testing"

	"github.com/idemkit/idemkit/idem"
)

// Every rule set of the checker is named after the preset policy it checks.
func TestProfilesArePresetPolicies(t *testing.T) {
	for _, p := range Profiles {
		if pol, err := idem.PolicyNamed(string(p)); err != nil || pol.Name != string(p) {
			t.Errorf("profile %q names no idem preset: %v", p, err)
		}
	}
	if Profiles[0] != ProfileOpenWOP || string(Profiles[0]) != idem.PolicyNames()[0] {
		t.Errorf("the default profile %q is not the default policy %q", Profiles[0], idem.PolicyNames()[0])
	}
}
