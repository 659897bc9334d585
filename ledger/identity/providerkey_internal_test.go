package identity

import (
	"strings"
	"testing"
)

// The allocation-free check Validate runs agrees with ProviderKey, for an
// effectId that fits its stack buffer and one that does not.
func TestIsProviderKeyOfAgreesWithProviderKey(t *testing.T) {
	for _, id := range []string{"acme/abc", "acme/" + strings.Repeat("x", 300)} {
		if !isProviderKeyOf(ProviderKey(id), id) {
			t.Errorf("%.20s: its own provider key refused", id)
		}
		if isProviderKeyOf(ProviderKey(id+"y"), id) {
			t.Errorf("%.20s: another effect's provider key accepted", id)
		}
		if k := ProviderKey(id); isProviderKeyOf(k[:len(k)-1], id) {
			t.Errorf("%.20s: a cut provider key accepted", id)
		}
	}
}
