package ids

import (
	"strings"
	"testing"
)

func TestGrammars(t *testing.T) {
	opaque := strings.Repeat("a", 16)
	for _, c := range []struct {
		name string
		ok   bool
		got  bool
	}{
		{"tenant", true, ValidTenant("acme")},
		{"anon tenant", true, ValidTenant("anon:x")},
		{"tenant with slash", false, ValidTenant("a/b")},
		{"empty tenant", false, ValidTenant("")},
		{"long tenant", false, ValidTenant(strings.Repeat("a", 129))},
		{"runId", true, ValidRunID("acme/" + opaque)},
		{"short opaque", false, ValidRunID("acme/" + opaque[1:])},
		{"effectId", true, ValidEffectID("anon:x/" + opaque)},
		{"effectId without tenant", false, ValidEffectID(opaque)},
		{"nodeId with colon", true, ValidNodeID("a:b")},
		{"nodeId with slash", false, ValidNodeID("a/b")},
		{"key", true, ValidKey(strings.Repeat("k", 22))},
		{"short key", false, ValidKey(strings.Repeat("k", 21))},
		{"key with colon", false, ValidKey(strings.Repeat("k", 21) + ":")},
	} {
		if c.got != c.ok {
			t.Errorf("%s: valid = %v, want %v", c.name, c.got, c.ok)
		}
	}
}
