// Command testsummary runs the steps of `make test` and prints one summary
// at the end: every check step with its result, every skipped Go test with
// its reason, every failure, and the closing line
//
//	N passed, M failed, K skipped
//
// counted over all Go tests (each test and subtest reported by
// `go test -json`) plus the check steps (each counted as one test).
//
// Usage:
//
//	testsummary step   -dir DIR -name NAME -- COMMAND...   run a check step
//	testsummary gotest -dir DIR -name NAME -- go test -json ...
//	testsummary report -dir DIR
//
// step runs COMMAND with its output passed through and records whether it
// exited 0. gotest runs a `go test -json` command, prints what plain
// `go test` would (package result lines, and the output of failed tests
// only), and records every test's result and, for skipped tests, the
// reason (the test's last output line before its SKIP line). Both exit with
// the command's status and write one JSON file into DIR, so steps may run
// concurrently. report prints the summary of everything recorded in DIR and
// exits 1 if anything failed or nothing ran.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `usage: testsummary step|gotest -dir DIR -name NAME -- COMMAND...
       testsummary report -dir DIR`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	cmd, args := args[0], args[1:]
	var dir, name string
	var command []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--":
			command = args[i+1:]
			i = len(args)
		case (a == "-dir" || a == "-name") && i+1 < len(args):
			if a == "-dir" {
				dir = args[i+1]
			} else {
				name = args[i+1]
			}
			i++
		default:
			fmt.Fprintf(stderr, "testsummary: unexpected argument %q\n%s\n", a, usage)
			return 2
		}
	}
	if dir == "" {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	switch cmd {
	case "step", "gotest":
		if name == "" || len(command) == 0 {
			fmt.Fprintln(stderr, usage)
			return 2
		}
		if cmd == "step" {
			return runStep(dir, name, command, stdout, stderr)
		}
		return runGoTest(dir, name, command, stdout, stderr)
	case "report":
		return report(dir, stdout, stderr)
	}
	fmt.Fprintln(stderr, usage)
	return 2
}
