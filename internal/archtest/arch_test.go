// Package archtest holds the architecture rules of the repository as tests:
// protocol logic (idem, ledger and their memory stores and suites) never
// depends on the AWS SDK, so only the dynamostore packages, the functions and
// the CLI do; the library packages (idem, ledger, client, emf and everything
// below them) never depend on the reference host (functions/...) or the CLI
// (cmd/...); the reference host never depends on the CLI, and the deployed
// functions never on the local stack (functions/devstack); the host's
// packages by concern (functions/host/...) depend only on the concerns they
// build on, never on the wiring (functions/host/kit) or a function; only
// the wiring reads the process environment; internal/... is the ground
// floor, importing no library, host or tool package; and between the
// top-level packages every import runs down the layers (layers_test.go).
package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
)

var protocolPackages = []string{
	"./idem", "./idem/memstore", "./idem/idemtest", "./idem/event", "./idem/idemenv", "./idem/keyspace", "./idem/canon",
	"./ledger", "./ledger/memstore", "./ledger/ledgertest",
	"./ledger/fence", "./ledger/fence/memstore", "./ledger/fence/fencetest",
	"./ledger/semantic", "./ledger/identity", "./internal/jcs", "./internal/ids", "./internal/clock", "./emf",
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

// TestDeployedFunctionsDoNotImportTheDevStack: the local stack
// (functions/devstack: emulators, the gateway, the conformance seams) is
// built on the host, never the other way round, so none of it ships in a
// Lambda binary.
func TestDeployedFunctionsDoNotImportTheDevStack(t *testing.T) {
	forbid(t, "the deployed functions must not depend on the local stack",
		[]string{"./functions/api/...", "./functions/authorizer/...", "./functions/executor/...", "./functions/auditor/...",
			"./functions/sweeper/...", "./functions/host/...", "./functions/securitytest/..."}, "functions/devstack")
}

// hostConcerns are the reference host's packages by concern and the host
// packages each may depend on (directly or not): the run store, the API
// keys, the stream records, the ERP policy's work-order contract and the
// start-up (boot) depend on no other host package, the run store's
// conformance suite (runstest) and replay divergence on the run store, the
// webhook effect on the runs it delivers for, the settings on the webhook policy they configure;
// only the wiring (kit) puts them together, and nothing below it depends on
// it or on a function.
var hostConcerns = map[string][]string{
	"functions/host/runs":            nil,
	"functions/host/runs/runstest":   {"functions/host/runs"},
	"functions/host/runs/divergence": {"functions/host/runs"},
	"functions/host/apikeys":         nil,
	"functions/host/stream":          nil,
	"functions/host/workorder":       nil,
	"functions/host/boot":            nil,
	"functions/host/webhook":         {"functions/host/runs"},
	"functions/host/settings":        {"functions/host/webhook", "functions/host/runs"},
	"functions/host/kit":             {"functions/host/boot", "functions/host/workorder", "functions/host/settings", "functions/host/webhook", "functions/host/runs", "functions/host/apikeys", "functions/host/stream"},

	// The inbox of offline decisions depends on no other host package;
	// its conformance suite on the inbox alone.
	"functions/host/inbox":           nil,
	"functions/host/inbox/inboxtest": {"functions/host/inbox"},

	// template.yaml's stream mappings as `idemkit dev` emulates them:
	// their filters, on the stream records alone.
	"functions/host/stream/mapping": {"functions/host/stream"},
}

func TestHostPackagesDependOnlyOnTheirConcerns(t *testing.T) {
	for pkg, allowed := range hostConcerns {
		for p, ds := range deps(t, "./"+pkg) {
			if p != module+pkg {
				continue
			}
			for _, d := range ds {
				if !strings.HasPrefix(d, module+"functions/") {
					continue
				}
				ok := false
				for _, a := range allowed {
					ok = ok || d == module+a
				}
				if !ok {
					t.Errorf("%s depends on %s: allowed host packages are %v", pkg, d, allowed)
				}
			}
		}
	}
	// Every package under functions/host is one of the concerns: the parent
	// holds only its doc comment.
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .GoFiles ","}}`, "./functions/host/...")
	cmd.Dir = shared.ModuleRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./functions/host/...: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := strings.TrimPrefix(f[0], module)
		if pkg == "functions/host" {
			if len(f) != 2 || f[1] != "doc.go" {
				t.Errorf("functions/host holds %v: code belongs in one of its concern packages", f[1:])
			}
			continue
		}
		if _, ok := hostConcerns[pkg]; !ok {
			t.Errorf("%s is not a listed host concern: add it to hostConcerns with what it may depend on", pkg)
		}
	}
}

// TestOnlyKitAndTheAuthorizerStartFromBoot: functions/host/boot is the
// ground of the start-up. kit builds every main's start-up on it, and the
// authorizer starts from it alone (for its cold start: no settings, no
// protocol packages); every other package goes through kit, so there is
// one start-up room and one ground beneath it.
func TestOnlyKitAndTheAuthorizerStartFromBoot(t *testing.T) {
	const boot = module + "functions/host/boot"
	allowed := map[string]bool{module + "functions/host/kit": true, module + "functions/authorizer": true}
	for pkg, ims := range imports(t) {
		if slices.Contains(ims, boot) && !allowed[pkg] {
			t.Errorf("%s imports functions/host/boot: start through functions/host/kit (only kit and the authorizer start from boot)", pkg)
		}
	}
}

// TestOnlyTheWiringReadsTheEnvironment: among the reference host's non-test
// files only functions/host/kit and the start-up it builds on,
// functions/host/boot, read the process environment (os.Getenv,
// os.LookupEnv, os.Environ); everything else is given a getenv or a
// settings.Env, so tests and `idemkit dev` configure it the same way.
func TestOnlyTheWiringReadsTheEnvironment(t *testing.T) {
	root := shared.ModuleRoot()
	err := filepath.WalkDir(filepath.Join(root, "functions"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d := filepath.ToSlash(filepath.Dir(rel)); d == "functions/host/kit" || d == "functions/host/boot" {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		osName := ""
		for _, is := range f.Imports {
			if is.Path.Value == `"os"` {
				osName = "os"
				if is.Name != nil {
					osName = is.Name.Name
				}
			}
		}
		if osName == "" {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == osName {
				switch sel.Sel.Name {
				case "Getenv", "LookupEnv", "Environ":
					t.Errorf("%s: os.%s: only functions/host/kit and functions/host/boot read the environment (take a getenv or a settings.Env)", fset.Position(sel.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTracingIsTheOpenTelemetryAPIOnly: the libraries and the deployed
// functions link the OpenTelemetry trace API and nothing else of
// OpenTelemetry (no SDK, no exporter, no global provider package): a span
// is a no-op unless the user passes a TracerProvider. The tests' recording
// provider (internal/testutil) is linked by no library or function either.
func TestTracingIsTheOpenTelemetryAPIOnly(t *testing.T) {
	api := []string{"go.opentelemetry.io/otel/trace", "go.opentelemetry.io/otel/attribute", "go.opentelemetry.io/otel/codes",
		"go.opentelemetry.io/otel/semconv/"}
	for _, p := range []string{"./idem/...", "./ledger/...", "./emf/...", "./client/...", "./functions/api", "./functions/authorizer",
		"./functions/executor", "./functions/auditor", "./functions/sweeper"} {
		cmd := exec.Command("go", "list", "-deps", p)
		cmd.Dir = shared.ModuleRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", p, err, out)
		}
		linked := false
		for _, dep := range strings.Fields(string(out)) {
			if dep == module+"internal/testutil" && !strings.HasSuffix(p, "test") {
				t.Errorf("%s links internal/testutil", p)
			}
			if !strings.HasPrefix(dep, "go.opentelemetry.io/") {
				continue
			}
			linked = true
			if !slices.ContainsFunc(api, func(a string) bool { return dep == a || strings.HasPrefix(dep, a) || strings.HasPrefix(dep, a+"/") }) {
				t.Errorf("%s links %s: only the OpenTelemetry trace API may be linked", p, dep)
			}
		}
		if !linked && (strings.HasPrefix(p, "./idem") || strings.HasPrefix(p, "./ledger")) {
			t.Errorf("%s does not link the OpenTelemetry trace API (the spans are gone?)", p)
		}
	}
}
