package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
)

// The README's library section, followed as a new user would: `idemkit dev`
// starts its own emulator and creates the tables; the section's two Go
// blocks become main.go and main_test.go of a new module outside the
// repository that uses this checkout through a workspace (go work init .
// CLONE, as the README says; offline); with the environment the README
// gives, its TestTryLocally passes against idemkit dev's emulator: an
// idempotent HTTP handler (the retry is a replay) and an idempotent SQS
// consumer (a redelivered batch ships nothing twice).
func TestReadmeLibrarySectionAgainstIdemkitDev(t *testing.T) {
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
	section := s[start:end]
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(blocks) != 2 {
		t.Fatalf("the library section has %d Go blocks, want 2 (main.go, main_test.go)", len(blocks))
	}
	table := "idemkit-IdempotencyTable"
	if !strings.Contains(section, "IDEMPOTENCY_TABLE="+table) {
		t.Fatalf("the library section no longer runs against %s", table)
	}

	out, _ := startDevInProcess(t) // no --dynamodb-endpoint: dev starts its own emulator
	m := regexp.MustCompile(`\(DynamoDB [^()]*?(http://[0-9.:]+),`).FindStringSubmatch(out.text())
	if m == nil {
		t.Fatalf("idemkit dev printed no DynamoDB endpoint:\n%s", out.text())
	}

	dir := t.TempDir()
	v := strings.TrimPrefix(runtime.Version(), "go")
	for name, data := range map[string]string{
		"main.go":      blocks[0][1],
		"main_test.go": blocks[1][1],
		"go.mod":       "module example.com/orders\n\ngo " + v + "\n",
		"go.work":      "go " + v + "\n\nuse (\n\t.\n\t" + root + "\n)\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The fresh module runs offline (GOPROXY=off) in workspace mode, which
	// reads the go.mod of every module in the kit's graph; on a fresh
	// machine some of those may not be in the module cache yet.
	graph := exec.Command("go", "list", "-m", "all")
	graph.Dir = root
	if res, err := graph.CombinedOutput(); err != nil {
		t.Fatalf("go list -m all in the kit's module: %v\n%s", err, res)
	}
	cmd := exec.Command("go", "test", "-count=1", "-run", "^TestTryLocally$", "-v", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(dir, "go.work"), "GOFLAGS=-mod=readonly", "GOTOOLCHAIN=local", "GOPROXY=off",
		"DYNAMODB_ENDPOINT="+m[1], "IDEMPOTENCY_TABLE="+table,
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local")
	res, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test in the fresh module: %v\n%s", err, res)
	}
	for _, want := range []string{`replay=""`, `replay="true"`, "shipped 2", "--- PASS: TestTryLocally"} {
		if !strings.Contains(string(res), want) {
			t.Fatalf("fresh module output lacks %q:\n%s", want, res)
		}
	}
}
