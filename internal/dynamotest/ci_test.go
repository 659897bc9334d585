package dynamotest_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

const childEnv = "IDEMKIT_DYNAMOTEST_CI_CHILD"

// TestCIFailsWhenEmulatorCannotStart: with CI=true a test that needs an
// emulator that cannot start FAILS (it never skips); without CI it is
// skipped with the reason. The child process runs with an empty PATH, so
// moto_server cannot be found.
func TestCIFailsWhenEmulatorCannotStart(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		dynamotest.Start(t, "moto")
		t.Log("emulator started") // not reached without moto_server
		return
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	run := func(ci bool) (string, error) {
		env := []string{childEnv + "=1", "PATH=" + t.TempDir(), "HOME=" + os.Getenv("HOME"), "TMPDIR=" + os.TempDir()}
		if ci {
			env = append(env, "CI=true")
		}
		cmd := exec.Command(exe, "-test.run", "^TestCIFailsWhenEmulatorCannotStart$", "-test.v", "-test.count=1")
		cmd.Env = env // no DYNAMODB_ENDPOINT, no DYNAMOTEST_KINDS, no CI unless asked
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run(true)
	if err == nil || !strings.Contains(out, "--- FAIL: TestCIFailsWhenEmulatorCannotStart") ||
		!strings.Contains(out, "moto emulator unavailable") || strings.Contains(out, "--- SKIP") {
		t.Fatalf("CI=true: want a failure naming the emulator, got err=%v:\n%s", err, out)
	}
	out, err = run(false)
	if err != nil || !strings.Contains(out, "--- SKIP: TestCIFailsWhenEmulatorCannotStart") ||
		!strings.Contains(out, "moto emulator unavailable") {
		t.Fatalf("without CI: want a skip with the reason, got err=%v:\n%s", err, out)
	}
}
