package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Record is what one step leaves in the summary directory.
type Record struct {
	// Name is the step's name ("vet", "go test").
	Name string `json:"name"`
	// Started orders the records in the report.
	Started time.Time `json:"started"`
	// Seconds is the step's wall time.
	Seconds float64 `json:"seconds"`
	// Exit is the command's exit status (-1 if it could not be run).
	Exit int `json:"exit"`
	// Go is set for a gotest step.
	Go *GoResult `json:"go,omitempty"`
	// Slowest are a gotest step's ten slowest top-level tests.
	Slowest []Timed `json:"slowest,omitempty"`
}

// GoResult counts the tests of a `go test -json` run.
type GoResult struct {
	Passed   int      `json:"passed"`
	Failed   []string `json:"failed"`
	Skipped  []Skip   `json:"skipped"`
	Packages int      `json:"packages"`
	// Verdicts are the lines tests logged behind VerdictMark (a soak's
	// checker verdicts), printed in the summary whatever the tests' result.
	Verdicts []string `json:"verdicts,omitempty"`
}

// VerdictMark starts a test's log line that the summary repeats: a test
// logs t.Logf(VerdictMark+"...") for a figure a reader of `make test`
// should see even when the test passes.
const VerdictMark = "idemkit-verdict: "

// Skip is a skipped test and why.
type Skip struct {
	Test   string `json:"test"`
	Reason string `json:"reason"`
}

func fileName(name string) string {
	r := strings.NewReplacer("/", "_", " ", "_", string(os.PathSeparator), "_")
	return r.Replace(name) + ".json"
}

func write(dir string, r Record) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, fileName(r.Name)), b, 0o644)
}

// exitCode is cmd's exit status after Wait returned err.
func exitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee) && ee.ExitCode() > 0:
		return ee.ExitCode()
	}
	return -1
}

// runStep runs command with its output passed through and records the exit
// status.
func runStep(dir, name string, command []string, stdout, stderr io.Writer) int {
	rec := Record{Name: name, Started: time.Now()}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, stdout, stderr
	err := cmd.Run()
	rec.Seconds, rec.Exit = time.Since(rec.Started).Seconds(), exitCode(err)
	if rec.Exit < 0 {
		fmt.Fprintf(stderr, "testsummary: %s: %v\n", name, err)
	}
	return finish(dir, rec, stderr)
}

// finish writes rec under dir and returns the exit code of the step: 1 when
// the record cannot be written or the step failed, else 0.
func finish(dir string, rec Record, stderr io.Writer) int {
	if werr := write(dir, rec); werr != nil {
		fmt.Fprintf(stderr, "testsummary: %v\n", werr)
		return 1
	}
	if rec.Exit != 0 {
		return 1
	}
	return 0
}
