// Package archtest holds the architecture rules of the repository as tests:
// protocol logic (idem, ledger and their memory stores and suites) never
// depends on the AWS SDK, so only the dynamostore packages, the functions and
// the CLI do; the library packages (idem, ledger, client, emf and everything
// below them) never depend on the reference host (functions/...) or the CLI
// (cmd/...); the reference host never depends on the CLI.
package archtest

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
)

var protocolPackages = []string{
	"./idem", "./idem/memstore", "./idem/idemtest",
	"./ledger", "./ledger/memstore", "./ledger/ledgertest",
	"./ledger/fence", "./ledger/fence/memstore", "./ledger/fence/fencetest",
	"./ledger/semantic", "./internal/jcs", "./internal/ids", "./internal/clock", "./emf",
}

func TestProtocolPackagesDoNotImportTheAWSSDK(t *testing.T) {
	for _, p := range protocolPackages {
		cmd := exec.Command("go", "list", "-deps", p)
		cmd.Dir = shared.ModuleRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", p, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "github.com/aws/aws-sdk-go-v2") || strings.HasPrefix(dep, "github.com/aws/smithy-go") {
				t.Errorf("%s depends on %s: protocol logic must not import the AWS SDK", p, dep)
			}
		}
	}
}

const module = "github.com/idemkit/idemkit/"

// deps lists the module's own packages that the packages matched by pattern
// depend on, directly or not, with the importing package: "pkg dep" lines.
func deps(t *testing.T, pattern string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, pattern)
	cmd.Dir = shared.ModuleRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pattern, err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], module) {
			continue
		}
		m[f[0]] = f[1:]
	}
	return m
}

// forbid fails for every package matched by one of patterns that depends on
// a module package under one of the prefixes.
func forbid(t *testing.T, why string, patterns []string, prefixes ...string) {
	t.Helper()
	for _, p := range patterns {
		for pkg, ds := range deps(t, p) {
			for _, d := range ds {
				for _, pre := range prefixes {
					if d == module+pre || strings.HasPrefix(d, module+pre+"/") {
						t.Errorf("%s depends on %s: %s", pkg, d, why)
					}
				}
			}
		}
	}
}

func TestLibraryPackagesDoNotImportTheHostOrTheCLI(t *testing.T) {
	forbid(t, "the libraries must not depend on the reference host or the CLI",
		[]string{"./idem/...", "./ledger/...", "./client/...", "./emf/..."}, "functions", "cmd")
}

func TestHostDoesNotImportTheCLI(t *testing.T) {
	forbid(t, "the reference host must not depend on the CLI", []string{"./functions/..."}, "cmd")
}
