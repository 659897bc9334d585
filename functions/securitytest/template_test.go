package securitytest

import (
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/idemkit/idemkit"
)

// TestIAMResourceParametersArePinned: every template parameter substituted
// into an IAM policy (a table name, stream label or region in a Resource
// ARN) is constrained by AllowedPattern or AllowedValues to values without
// a wildcard, so no deployment parameter can widen a role to "table/*" (the
// static check, scripts/check_sam.py, sees only the template's literals).
func TestIAMResourceParametersArePinned(t *testing.T) {
	var tpl struct {
		Parameters map[string]struct {
			Type           string   `yaml:"Type"`
			AllowedPattern string   `yaml:"AllowedPattern"`
			AllowedValues  []string `yaml:"AllowedValues"`
		} `yaml:"Parameters"`
		Resources map[string]yaml.Node `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(idemkit.Template, &tpl); err != nil {
		t.Fatal(err)
	}
	ref := regexp.MustCompile(`\$\{([A-Za-z0-9]+)\}`)
	used := map[string][]string{}
	for name, res := range tpl.Resources {
		var r struct {
			Type       string `yaml:"Type"`
			Properties struct {
				Policies []struct {
					PolicyDocument struct {
						Statement []yaml.Node `yaml:"Statement"`
					} `yaml:"PolicyDocument"`
				} `yaml:"Policies"`
			} `yaml:"Properties"`
		}
		if err := res.Decode(&r); err != nil || r.Type != "AWS::IAM::Role" {
			continue
		}
		for _, p := range r.Properties.Policies {
			for _, st := range p.PolicyDocument.Statement {
				var walk func(n *yaml.Node)
				walk = func(n *yaml.Node) {
					if n.Kind == yaml.ScalarNode {
						for _, m := range ref.FindAllStringSubmatch(n.Value, -1) {
							used[m[1]] = append(used[m[1]], name)
						}
					}
					for _, c := range n.Content {
						walk(c)
					}
				}
				walk(&st)
			}
		}
	}
	if len(used) == 0 {
		t.Fatal("no substitution found in any role: the test proves nothing")
	}
	checked := 0
	for param, roles := range used {
		p, ok := tpl.Parameters[param]
		if !ok {
			continue // a resource attribute or pseudo parameter
		}
		checked++
		t.Logf("%s: used in IAM resources of %v", param, roles)
		switch {
		case len(p.AllowedValues) > 0:
			for _, v := range p.AllowedValues {
				if strings.ContainsAny(v, "*?") {
					t.Errorf("parameter %s (used by %v) allows %q", param, roles, v)
				}
			}
		case p.AllowedPattern != "":
			re, err := regexp.Compile(p.AllowedPattern)
			if err != nil {
				t.Fatalf("parameter %s: %v", param, err)
			}
			for _, bad := range []string{"*", "a*", "abc*", "table/*", "?", "x/y", "my-table:*"} {
				if re.MatchString(bad) {
					t.Errorf("parameter %s (used by %v in an IAM resource) admits %q", param, roles, bad)
				}
			}
		default:
			t.Errorf("parameter %s is substituted into IAM resources of %v without AllowedPattern or AllowedValues", param, roles)
		}
	}
	if checked == 0 {
		t.Fatal("no parameter is used in an IAM resource: the test proves nothing")
	}
}
