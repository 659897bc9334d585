package settings

import (
	"flag"
	"github.com/idemkit/idemkit/idem/idemenv"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/idemkit/idemkit"
)

var updateReadme = flag.Bool("update-readme", false, "rewrite docs/CONFIGURATION.md's configuration table from Settings")

// readNames returns every variable LoadEnv asks getenv for.
func readNames(t *testing.T) []string {
	t.Helper()
	seen := map[string]bool{}
	if _, err := LoadEnv(func(name string) string { seen[name] = true; return "" }); err != nil {
		t.Fatal(err)
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func settingNames() []string {
	var out []string
	for _, s := range Settings {
		out = append(out, s.Name)
	}
	sort.Strings(out)
	return out
}

// Every entry of Settings is read by LoadEnv (the Layer-1 ones through
// idemenv.Load), and LoadEnv reads nothing that is not an entry.
func TestSettingsAreWhatLoadEnvReads(t *testing.T) {
	if got, want := readNames(t), settingNames(); !slices.Equal(got, want) {
		t.Fatalf("LoadEnv reads %v;\nSettings lists %v", got, want)
	}
	for _, s := range Settings {
		if s.Layer1 == s.parses() || s.Layer1 != strings.HasPrefix(s.Name, "IDEMPOTENCY_") && s.Name != EnvIdempotencyTableRegion {
			t.Errorf("%s: Layer1 %v, parser %v", s.Name, s.Layer1, s.set != nil)
		}
		if (s.Flag == "") != (s.FlagUsage == "") || s.BoolFlag && s.Flag == "" {
			t.Errorf("%s: flag %q without usage, or usage without flag", s.Name, s.Flag)
		}
	}
}

// docs/CONFIGURATION.md's configuration table is rendered from Settings: every variable
// it documents is read by LoadEnv, with the default and meaning stated
// once, in Settings.
func TestReadmeSettingsTable(t *testing.T) {
	b, err := os.ReadFile("../../../docs/CONFIGURATION.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	const head = "| variable | default | meaning |\n"
	i := strings.Index(readme, head)
	if i < 0 {
		t.Fatal("docs/CONFIGURATION.md has no configuration table")
	}
	j := i + strings.Index(readme[i:], "\n\n") + 1
	want := settingsTable()
	if *updateReadme {
		if err := os.WriteFile("../../../docs/CONFIGURATION.md", []byte(readme[:i]+want+readme[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got := readme[i:j]; got != want {
		t.Fatalf("docs/CONFIGURATION.md's configuration table differs from Settings (go test ./functions/host/settings -run TestReadmeSettingsTable -update-readme rewrites it); want:\n%s\ngot:\n%s", want, got)
	}
}

// Every Environment variable of every function in template.yaml is read by
// LoadEnv, and Setting.Functions names exactly the functions whose
// Environment sets it.
func TestTemplateEnvironmentIsSettings(t *testing.T) {
	var doc struct {
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
	inTemplate := map[string][]string{} // variable -> functions
	fns := 0
	for id, r := range doc.Resources {
		if r.Type != "AWS::Serverless::Function" {
			continue
		}
		fns++
		fn, ok := strings.CutSuffix(id, "Function")
		if !ok {
			t.Fatalf("function %s: logical ID does not end in Function", id)
		}
		for v := range r.Properties.Environment.Variables {
			inTemplate[v] = append(inTemplate[v], fn)
		}
	}
	if fns < 5 {
		t.Fatalf("parsed %d functions", fns)
	}
	byName := map[string]Setting{}
	for _, s := range Settings {
		byName[s.Name] = s
	}
	for v, got := range inTemplate {
		s, ok := byName[v]
		if !ok {
			t.Errorf("template.yaml sets %s (on %v), which LoadEnv does not read", v, got)
			continue
		}
		sort.Strings(got)
		want := slices.Clone(s.Functions)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: template.yaml sets it on %v, Settings says %v", v, got, want)
		}
	}
	for _, s := range Settings {
		if _, ok := inTemplate[s.Name]; !ok && len(s.Functions) > 0 {
			t.Errorf("%s: Settings says %v set it, template.yaml sets it nowhere", s.Name, s.Functions)
		}
	}
	if !slices.Contains(inTemplate[idemenv.Policy], "Api") {
		t.Errorf("template.yaml does not give the api function %s", idemenv.Policy)
	}
}

// IDEMPOTENCY_POLICY is read into Env.Idem.Policy (default the OpenWOP
// policy), a bad value is reported naming the variable and the three
// allowed values, and discovery states the active policy.
func TestLoadEnvPolicy(t *testing.T) {
	e, err := LoadEnv(Values(nil))
	if err != nil || e.Idem.PolicyName() != "openwop" {
		t.Fatalf("default: %q %v", e.Idem.PolicyName(), err)
	}
	e, err = LoadEnv(Values(map[string]string{idemenv.Policy: "erp"}))
	if err != nil || e.Idem.Policy.Name != "erp" {
		t.Fatalf("erp: %+v %v", e.Idem.Policy.Name, err)
	}
	doc, err := e.CapabilitiesDoc()
	if err != nil || !strings.Contains(string(doc), `"idemkit.idempotency":{"policy":"erp",`) {
		t.Fatalf("discovery: %s %v", doc, err)
	}
	_, err = LoadEnv(Values(map[string]string{idemenv.Policy: "sap"}))
	for _, s := range []string{"IDEMPOTENCY_POLICY", `"sap"`, "openwop, commerce, erp"} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("bad policy: %v lacks %s", err, s)
		}
	}
}

// Layered: earlier layers override later ones; an empty value falls
// through.
func TestLayered(t *testing.T) {
	get := Layered(Values(map[string]string{"A": "1", "B": " "}), nil, Values(map[string]string{"A": "2", "B": "2", "C": "3"}))
	if get("A") != "1" || get("B") != "2" || get("C") != "3" || get("D") != "" {
		t.Fatal(get("A"), get("B"), get("C"), get("D"))
	}
}
