package idem

import (
	"fmt"
	"strings"
)

// presets is the registry of the policies the library ships, the default
// first: each lives in its own file (preset_<name>.go). PolicyNames,
// PolicyNamed, idemenv.Load (IDEMPOTENCY_POLICY) and every flag help and usage
// string that names the policies derive from this one list, so a new
// preset is one new file plus one row here.
var presets = []Policy{
	PolicyOpenWOP,
	PolicyCommerce,
	PolicyERP,
}

// PolicyNames lists the names PolicyNamed accepts, the default first.
func PolicyNames() []string {
	out := make([]string, len(presets))
	for i, p := range presets {
		out[i] = p.Name
	}
	return out
}

// PolicyNamed returns the preset named name (one of PolicyNames: openwop,
// commerce or erp; case and surrounding spaces ignored; "" is the default,
// openwop), for configuration such as IDEMPOTENCY_POLICY. An unknown name
// is a *ConfigError listing the names.
func PolicyNamed(name string) (Policy, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if n == "" {
		return presets[0], nil
	}
	for _, p := range presets {
		if p.Name == n {
			return p, nil
		}
	}
	return Policy{}, &ConfigError{Problems: []string{fmt.Sprintf("policy %q is unknown: want one of %s", name, strings.Join(PolicyNames(), ", "))}}
}

// replayHeader is a Policy.Headers that marks a replay with the header
// name: "true", and adds nothing to any other answer.
func replayHeader(name string) func(map[string][]string, Answer) {
	return func(h map[string][]string, a Answer) {
		if a.Replay {
			h[name] = []string{"true"}
		}
	}
}
