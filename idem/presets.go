package idem

import (
	"fmt"
	"strings"
)

// presets is the registry of the named policies, the default first: the
// OpenWOP default (preset_openwop.go) is built in, and every other preset
// the library ships lives in its own package that adds itself here when it
// is initialised (RegisterPolicy): idem/policy/commerce, idem/policy/erp.
// PolicyNames, PolicyNamed, idemenv.Load (IDEMPOTENCY_POLICY) and every flag
// help and usage string that names the policies derive from this one list,
// so a new preset is one new package calling RegisterPolicy.
var presets = []Policy{
	PolicyOpenWOP,
}

// RegisterPolicy adds p to the registry PolicyNames and PolicyNamed read,
// after the policies already registered. A preset package calls it from
// its init function, so importing the package (idem/policy/commerce,
// idem/policy/erp; idem/idemenv imports both) makes its policy nameable.
// It panics, as a program that cannot start correctly, when p has no
// Name or its name is taken.
func RegisterPolicy(p Policy) {
	n := strings.ToLower(strings.TrimSpace(p.Name))
	if n == "" || n != p.Name {
		panic(fmt.Sprintf("idem: RegisterPolicy: name %q is not a lower-case name", p.Name))
	}
	for _, q := range presets {
		if q.Name == n {
			panic(fmt.Sprintf("idem: RegisterPolicy: policy %q is already registered", n))
		}
	}
	presets = append(presets, p)
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
// and commerce and erp once their packages are imported; case and
// surrounding spaces ignored; "" is the default,
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
