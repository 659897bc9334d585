package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fixture is a module whose tests pass, fail, skip (with a two-line
// reason), and a package that does not build.
var fixture = map[string]string{
	"go.mod": "module example.com/fx\n\ngo 1.22\n",
	"a/a_test.go": `package a

import "testing"

func TestPass(t *testing.T) {
	t.Logf("idemkit-verdict: linearizability: Ok (3 keys)")
	t.Run("sub", func(t *testing.T) {})
}

func TestFail(t *testing.T) { t.Log("context"); t.Error("boom") }

func TestSkip(t *testing.T) { t.Log("noise"); t.Skip("emulator unavailable:\nmoto_server is not on PATH") }
`,
	"b/b_test.go": "package b\n\nimport \"testing\"\n\nfunc TestBroken(t *testing.T) { undefined() }\n",
}

func writeFixture(t *testing.T) string {
	dir := t.TempDir()
	for name, body := range fixture {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestSummaryCountsAndReasons: the summary counts every test and subtest
// of a `go test -json` run plus each check step, lists every skipped test
// with its whole reason and every failure (a package that does not build
// included), prints failed tests' output only, and exits non-zero.
func TestSummaryCountsAndReasons(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	mod := writeFixture(t)
	dir := t.TempDir()
	wd, _ := os.Getwd()
	if err := os.Chdir(mod); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = os.Chdir(wd) }()
	t.Setenv("GOFLAGS", "-mod=mod")

	var out, errOut bytes.Buffer
	if code := run([]string{"gotest", "-dir", dir, "-name", "go test", "--", goBin, "test", "-json", "-count=1", "./..."}, nil, &out, &errOut); code != 1 {
		t.Fatalf("gotest exit %d, want 1\n%s%s", code, out.String(), errOut.String())
	}
	plain := out.String()
	if !strings.Contains(plain, "boom") || strings.Contains(plain, "noise") || strings.Contains(plain, "=== RUN") {
		t.Errorf("plain output should show failed tests only:\n%s", plain)
	}
	if code := run([]string{"step", "-dir", dir, "-name", "vet", "--", "true"}, nil, &out, &errOut); code != 0 {
		t.Fatalf("step true: %d", code)
	}
	if code := run([]string{"step", "-dir", dir, "-name", "model", "--", "false"}, nil, &out, &errOut); code != 1 {
		t.Fatalf("step false: %d", code)
	}

	var rep bytes.Buffer
	if code := run([]string{"report", "-dir", dir}, nil, &rep, &errOut); code != 1 {
		t.Fatalf("report exit %d, want 1", code)
	}
	got := rep.String()
	lines := strings.Split(strings.TrimSpace(got), "\n")
	// Passed: TestPass, TestPass/sub, step vet. Failed: TestFail, package
	// b, step model. Skipped: TestSkip.
	if last := lines[len(lines)-1]; last != "3 passed, 3 failed, 1 skipped" {
		t.Errorf("last line %q\n%s", last, got)
	}
	for _, want := range []string{
		"verdicts:\n  TestPass: linearizability: Ok (3 keys)\n",
		"example.com/fx/a TestSkip: a_test.go:12: emulator unavailable: moto_server is not on PATH",
		"  example.com/fx/a TestFail\n",
		"  example.com/fx/b (package failed; see its output above)",
		"  step model\n",
		"vet:               ok",
		"model:             FAILED (exit 1)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}

func TestReportOfNothingFails(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"report", "-dir", t.TempDir()}, nil, &out, &errOut); code != 1 {
		t.Fatalf("exit %d", code)
	}
}

func TestSkipReason(t *testing.T) {
	for _, c := range []struct {
		lines []string
		want  string
	}{
		{[]string{"=== RUN   TestX\n", "    x_test.go:3: first\n", "    x_test.go:4: why\n", "        more\n", "--- SKIP: TestX (0.00s)\n"}, "x_test.go:4: why more"},
		{[]string{"=== RUN   TestX\n", "--- SKIP: TestX (0.00s)\n"}, "(no reason given)"},
	} {
		if got := skipReason(c.lines); got != c.want {
			t.Errorf("%q: got %q, want %q", c.lines, got, c.want)
		}
	}
}
