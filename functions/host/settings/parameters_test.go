package settings

import (
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/idem/idemenv"
)

// parametersHead opens docs/CONFIGURATION.md's table of template.yaml's SAM parameters,
// in the configuration reference after the variables' table.
const parametersHead = "| SAM parameter | default | sets | meaning |\n"

// Every Parameters key of template.yaml is in docs/CONFIGURATION.md's configuration
// reference, in the SAM parameters table rendered from the template: its
// default, the variables it sets (on which functions) and its description
// (go test ./functions/host/settings -run TestEverySAMParameterIsInTheConfigurationTable -update-readme
// rewrites it).
func TestEverySAMParameterIsInTheConfigurationTable(t *testing.T) {
	b, err := os.ReadFile("../../../docs/CONFIGURATION.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	want, names := parametersTable(t)
	i := strings.Index(readme, parametersHead)
	if i < 0 {
		t.Fatal("docs/CONFIGURATION.md has no SAM parameters table (" + strings.TrimSpace(parametersHead) + ")")
	}
	j := i + strings.Index(readme[i:], "\n\n") + 1
	if *updateReadme {
		if err := os.WriteFile("../../../docs/CONFIGURATION.md", []byte(readme[:i]+want+readme[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got := readme[i:j]
	for _, n := range names {
		if !strings.Contains(got, "| `"+n+"` |") {
			t.Errorf("template.yaml parameter %s is not in docs/CONFIGURATION.md's configuration table", n)
		}
	}
	if got != want {
		t.Fatalf("docs/CONFIGURATION.md's SAM parameters table differs from template.yaml (go test ./functions/host/settings -run TestEverySAMParameterIsInTheConfigurationTable -update-readme rewrites it); want:\n%s\ngot:\n%s", want, got)
	}
}

// parametersTable renders the SAM parameters table from template.yaml, in
// the template's order, and returns the parameter names.
func parametersTable(t *testing.T) (string, []string) {
	t.Helper()
	var doc struct {
		Parameters yaml.Node `yaml:"Parameters"`
		Resources  map[string]struct {
			Type       string `yaml:"Type"`
			Properties struct {
				Environment struct {
					Variables map[string]yaml.Node `yaml:"Variables"`
				} `yaml:"Environment"`
			} `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(idemkit.Template, &doc); err != nil {
		t.Fatal(err)
	}
	// sets[param][variable] = the functions whose variable refers to param.
	sets := map[string]map[string][]string{}
	for id, r := range doc.Resources {
		if r.Type != "AWS::Serverless::Function" {
			continue
		}
		fn := strings.TrimSuffix(id, "Function")
		for v, n := range r.Properties.Environment.Variables {
			for _, p := range refs(&n) {
				if sets[p] == nil {
					sets[p] = map[string][]string{}
				}
				if !slices.Contains(sets[p][v], fn) {
					sets[p][v] = append(sets[p][v], fn)
				}
			}
		}
	}
	var b strings.Builder
	b.WriteString(parametersHead + "| --- | --- | --- | --- |\n")
	var names []string
	ps := doc.Parameters.Content
	for k := 0; k+1 < len(ps); k += 2 {
		name := ps[k].Value
		names = append(names, name)
		var p struct {
			Default     yaml.Node `yaml:"Default"`
			Description string    `yaml:"Description"`
		}
		if err := ps[k+1].Decode(&p); err != nil {
			t.Fatal(err)
		}
		def := "`" + p.Default.Value + "`"
		if p.Default.Value == "" {
			def = "empty"
		}
		var vars []string
		for v, fns := range sets[name] {
			slices.Sort(fns)
			vars = append(vars, "`"+v+"` ("+strings.Join(fns, ", ")+")")
		}
		slices.Sort(vars)
		set := strings.Join(vars, ", ")
		if set == "" {
			set = "the stack's resources"
		}
		desc := strings.Join(strings.Fields(p.Description), " ")
		desc = strings.ReplaceAll(desc, "|", "\\|")
		b.WriteString("| `" + name + "` | " + def + " | " + set + " | " + desc + " |\n")
	}
	return b.String(), names
}

// refs returns the parameters a template value refers to: !Ref P, and
// ${P} inside !Sub, anywhere within (through !If and the like).
func refs(n *yaml.Node) []string {
	var out []string
	if n.Kind == yaml.ScalarNode {
		switch n.Tag {
		case "!Ref":
			out = append(out, n.Value)
		case "!Sub":
			s := n.Value
			for {
				i := strings.Index(s, "${")
				if i < 0 {
					break
				}
				j := strings.Index(s[i:], "}")
				if j < 0 {
					break
				}
				out = append(out, s[i+2:i+j])
				s = s[i+j:]
			}
		}
	}
	for _, c := range n.Content {
		out = append(out, refs(c)...)
	}
	return out
}

// TestParametersTheFunctionsRefuseAreRefusedAtDeploy (RED_TEAM 401): a
// SAM parameter handed to a function's variable as it is (VAR: !Ref P) is
// refused by CloudFormation whenever settings.LoadEnv would refuse it on
// its own (under every idempotency policy: a value only one policy refuses,
// such as a Layer-1 retention below the OpenWOP policy's 24 hours, is said
// in the parameter's description). Otherwise the stack deploys and its
// functions stop at every cold start: every request fails until the next
// deploy. A Number parameter takes "300.0", "14.5" or a value past what a
// duration holds; the functions take whole numbers only.
func TestParametersTheFunctionsRefuseAreRefusedAtDeploy(t *testing.T) {
	var doc struct {
		Parameters map[string]struct {
			Type           string   `yaml:"Type"`
			Default        string   `yaml:"Default"`
			AllowedValues  []string `yaml:"AllowedValues"`
			AllowedPattern string   `yaml:"AllowedPattern"`
			MinValue       *float64 `yaml:"MinValue"`
			MaxValue       *float64 `yaml:"MaxValue"`
		} `yaml:"Parameters"`
		Resources map[string]struct {
			Type       string `yaml:"Type"`
			Properties struct {
				Environment struct {
					Variables map[string]yaml.Node `yaml:"Variables"`
				} `yaml:"Environment"`
			} `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(idemkit.Template, &doc); err != nil {
		t.Fatal(err)
	}
	bound := map[string]string{} // parameter -> variable
	for _, r := range doc.Resources {
		for v, n := range r.Properties.Environment.Variables {
			if n.Kind == yaml.ScalarNode && n.Tag == "!Ref" {
				if _, ok := doc.Parameters[n.Value]; ok {
					bound[n.Value] = v
				}
			}
		}
	}
	if len(bound) < 8 {
		t.Fatalf("parsed %d parameters handed to a variable: %v", len(bound), bound)
	}
	probes := []string{"0", "1", "13", "14", "15", "23", "24", "29", "30", "60", "100", "101", "300", "3600", "3601",
		"60000", "60001", "106751", "106752", "2562047", "2562048", "99999999999999999999",
		"14.0", "14.5", "60.0", "300.0", "2000.5", "1e2", "-1", "-0", "forever", "030"}
	policies := []string{"openwop", "erp", "commerce"}
	for _, name := range slices.Sorted(maps.Keys(bound)) {
		p, variable := doc.Parameters[name], bound[name]
		var pattern *regexp.Regexp
		if p.AllowedPattern != "" {
			pattern = regexp.MustCompile(`^(?:` + p.AllowedPattern + `)$`)
		}
		deploys := func(v string) bool {
			if len(p.AllowedValues) > 0 && !slices.Contains(p.AllowedValues, v) {
				return false
			}
			if pattern != nil && !pattern.MatchString(v) {
				return false
			}
			if p.Type == "Number" {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil || p.MinValue != nil && f < *p.MinValue || p.MaxValue != nil && f > *p.MaxValue {
					return false
				}
			}
			return true
		}
		for _, v := range append(slices.Clone(probes), p.Default) {
			if !deploys(v) {
				continue
			}
			var errs []string
			for _, pol := range policies {
				_, err := LoadEnv(func(n string) string {
					switch n {
					case variable:
						return v
					case idemenv.Policy:
						return pol
					}
					return ""
				})
				if err == nil {
					errs = nil
					break
				}
				errs = append(errs, err.Error())
			}
			if errs != nil {
				t.Errorf("%s=%q deploys, but the functions refuse %s=%q at start-up under every policy: %s", name, v, variable, v, errs[0])
			}
		}
	}
}
