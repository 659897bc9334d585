// Package e2e holds the end-to-end tests of the built artefacts: the api
// function's bootstrap binary under the AWS Lambda Runtime Interface
// Emulator, and `idemkit dev` driven over HTTP. Where a prerequisite cannot
// be had (no moto_server, no RIE and no way to install it), a test skips,
// and under CI=true it fails.
package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/shared"
	"github.com/idemkit/idemkit/internal/testutil"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// build compiles pkg (relative to the module root) into dir/name for
// goos/goarch with the release flags (-trimpath -ldflags='-s -w', no cgo).
func build(t testing.TB, dir, name, pkg, goos, goarch string) string {
	t.Helper()
	out, err := testutil.Build(dir, name, pkg, []string{"-trimpath", "-ldflags=-s -w"},
		[]string{"CGO_ENABLED=0", "GOOS=" + goos, "GOARCH=" + goarch})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func buildHost(t testing.TB, dir, name, pkg string) string {
	return build(t, dir, name, pkg, runtime.GOOS, runtime.GOARCH)
}

// rieVersion is the pinned Lambda Runtime Interface Emulator (the
// Makefile's RIE_VERSION; TestRIEVersionPinned keeps the two equal). It has
// no release tags: a commit's pseudo-version.
const rieVersion = "v0.0.0-20261030222936-bef5c4ba774d"

// rieBinary finds aws-lambda-rie: bin/ of the repository (make installs it
// there), then PATH, else installs the pinned version into bin/ with
// `go install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@` + rieVersion.
func rieBinary(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(shared.ModuleRoot(), "bin")
	local := filepath.Join(bin, "aws-lambda-rie")
	if _, err := os.Stat(local); err == nil {
		return local
	}
	if p, err := exec.LookPath("aws-lambda-rie"); err == nil {
		return p
	}
	if err := testutil.Go([]string{"GOBIN=" + bin}, "install", "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@"+rieVersion); err != nil {
		testutil.Unavailable(t, "aws-lambda-rie is not installed and go install failed: %v", err)
	}
	return local
}

// start starts name args with env as a process group until the test ends
// (SIGTERM, then SIGKILL after 15 s), logging its output if the test failed.
func start(t testing.TB, env []string, name string, args ...string) *testutil.Process {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = env
	return testutil.Start(t, cmd, 15*time.Second)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestRIEVersionPinned: make and the tests install the same, pinned, Lambda
// RIE (never @latest).
func TestRIEVersionPinned(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join(shared.ModuleRoot(), "Makefile"))
	must(t, err)
	if !strings.Contains(string(mk), "RIE_VERSION  := "+rieVersion+"\n") || strings.Contains(string(mk), "aws-lambda-rie@latest") {
		t.Fatalf("Makefile does not pin aws-lambda-rie at %s", rieVersion)
	}
	// docs/DEPLOYING.md tells a user to install the RIE "at the version this
	// repository pins": every version it names is that one.
	doc, err := os.ReadFile(filepath.Join(shared.ModuleRoot(), "docs", "DEPLOYING.md"))
	must(t, err)
	named := regexp.MustCompile(`aws-lambda-rie@(\S+)`).FindAllSubmatch(doc, -1)
	if len(named) == 0 {
		t.Fatal("docs/DEPLOYING.md no longer says which aws-lambda-rie to install")
	}
	for _, m := range named {
		if string(m[1]) != rieVersion {
			t.Errorf("docs/DEPLOYING.md installs aws-lambda-rie@%s, the repository pins %s", m[1], rieVersion)
		}
	}
}
