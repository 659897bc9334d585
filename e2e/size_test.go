package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
	"github.com/idemkit/idemkit/internal/testutil"
)

var lambdaFns = []string{"api", "authorizer", "executor", "auditor", "sweeper"}

// BenchmarkLambdaBinarySizes reports the size of each function's bootstrap
// for provided.al2023 on linux/arm64, CGO_ENABLED=0, three ways:
//   - <fn>-sam-MiB: as `sam build` makes it from template.yaml (the go1.x
//     builder runs `go build -trimpath -o bootstrap` with TrimGoPath and
//     no linker flags: symbols and DWARF are kept);
//   - <fn>-MiB: stripped (-trimpath -ldflags='-s -w');
//   - <fn>-norpc-MiB: stripped and with the aws-lambda-go build tag
//     lambda.norpc (without the RPC mode of the retired go1.x runtime, whose
//     net/rpc links encoding/gob and html/template).
//
// A `sam build` run with GOFLAGS='-ldflags=-s -tags=lambda.norpc' in its
// environment (the builder passes its environment to go build) makes the
// last. <fn>-deps is the number of packages each links. Sizes do not
// depend on b.N.
func BenchmarkLambdaBinarySizes(b *testing.B) {
	dir := b.TempDir()
	for _, fn := range lambdaFns {
		report := func(metric, path string) {
			st, err := os.Stat(path)
			must(b, err)
			b.ReportMetric(float64(st.Size())/(1<<20), metric)
		}
		report(fn+"-sam-MiB", buildFlags(b, dir, fn+"-sam", "functions/"+fn, "-trimpath"))
		report(fn+"-MiB", build(b, dir, fn, "functions/"+fn, "linux", "arm64"))
		report(fn+"-norpc-MiB", buildFlags(b, dir, fn+"-norpc", "functions/"+fn, "-trimpath", "-ldflags=-s -w", "-tags", "lambda.norpc"))
		b.ReportMetric(float64(len(linkedPackages(b, "functions/"+fn))), fn+"-deps")
	}
	for i := 0; i < b.N; i++ {
	}
}

// buildFlags builds pkg for linux/arm64 without cgo with the given go build
// flags.
func buildFlags(t testing.TB, dir, name, pkg string, flags ...string) string {
	t.Helper()
	out, err := testutil.Build(dir, name, pkg, flags, []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64"})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// linkedPackages lists the packages pkg links for linux/arm64 (go list -deps).
func linkedPackages(t testing.TB, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "./"+pkg)
	cmd.Dir = shared.ModuleRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// TestLambdaBinariesBuild builds every function for SAM's target
// (linux/arm64) with the release flags.
func TestLambdaBinariesBuild(t *testing.T) {
	dir := t.TempDir()
	for _, fn := range lambdaFns {
		build(t, dir, fn, "functions/"+fn, "linux", "arm64")
	}
}

// TestAuthorizerLinksOnlyWhatItCalls: the authorizer answers with one
// api-keys table read, so it links neither the protocol packages (Layer 1,
// the ledger and their stores), nor the settings table, the wiring, the
// runs or the webhook effect, nor a YAML parser or the embedded template
// (it links internal/emf, standard library only, to count refused keys);
// the functions that use no template parse none either.
func TestAuthorizerLinksOnlyWhatItCalls(t *testing.T) {
	const m = "github.com/idemkit/idemkit"
	forbidden := map[string][]string{
		"authorizer": {m, m + "/idem", m + "/idem/dynamostore", m + "/ledger", m + "/ledger/dynamostore", m + "/ledger/fence",
			m + "/functions/host/settings", m + "/functions/host/kit", m + "/functions/host/runs", m + "/functions/host/webhook",
			"gopkg.in/yaml.v3", "go.yaml.in/yaml/v3", "sigs.k8s.io/yaml"},
	}
	for _, fn := range []string{"api", "executor", "sweeper", "auditor"} {
		forbidden[fn] = []string{m, "gopkg.in/yaml.v3", "go.yaml.in/yaml/v3", "sigs.k8s.io/yaml"}
	}
	for fn, bad := range forbidden {
		deps := map[string]bool{}
		for _, d := range linkedPackages(t, "functions/"+fn) {
			deps[d] = true
		}
		for _, b := range bad {
			if deps[b] {
				t.Errorf("the %s function links %s", fn, b)
			}
		}
	}
}
