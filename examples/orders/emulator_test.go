package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/shared"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// The repository runs the README's TestTryLocally on its own emulators
// (moto and dynalite), with the table created from template.yaml; under
// CI=true a missing emulator fails the test.
func TestTryLocallyOnEmulators(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		setLocalEnv(t, e)
		TestTryLocally(t)
	})
}

func setLocalEnv(t *testing.T, e *dynamotest.Emulator) {
	t.Setenv("DYNAMODB_ENDPOINT", e.Endpoint)
	t.Setenv("IDEMPOTENCY_TABLE", e.CreateTable(t, "IdempotencyTable"))
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "local")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
}

// The README's library section followed in a fresh module outside the
// repository: its two Go blocks become main.go and main_test.go of a new
// module that uses this checkout through a workspace (go work init . CLONE,
// as the README says), and its TestTryLocally passes against moto.
func TestReadmeInAFreshModule(t *testing.T) {
	root := shared.ModuleRoot()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	start := strings.Index(s, "## Using `idem` in your own function")
	end := strings.Index(s, "## Using `ledger`")
	if start < 0 || end < start {
		t.Fatal("README.md has no library section")
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(s[start:end], -1)
	if len(blocks) != 2 {
		t.Fatalf("the library section has %d Go blocks, want 2 (main.go, main_test.go)", len(blocks))
	}
	dir := t.TempDir()
	for name, data := range map[string]string{
		"main.go":      blocks[0][1],
		"main_test.go": blocks[1][1],
		"go.mod":       "module example.com/orders\n\ngo " + strings.TrimPrefix(runtime.Version(), "go") + "\n",
		"go.work":      "go " + strings.TrimPrefix(runtime.Version(), "go") + "\n\nuse (\n\t.\n\t" + root + "\n)\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e := dynamotest.Start(t, dynamotest.Moto)
	setLocalEnv(t, e)
	cmd := exec.Command("go", "test", "-count=1", "-run", "^TestTryLocally$", "-v", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOFLAGS=-mod=readonly", "GOTOOLCHAIN=local", "GOPROXY=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test in the fresh module: %v\n%s", err, out)
	}
	for _, want := range []string{`replay="true"`, "shipped 2", "--- PASS: TestTryLocally"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("fresh module output lacks %q:\n%s", want, out)
		}
	}
}
