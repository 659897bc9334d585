package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// report prints the summary of every record in dir and returns 1 if any
// step failed, any test failed, or nothing was recorded.
func report(dir string, stdout, stderr io.Writer) int {
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	var recs []Record
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintf(stderr, "testsummary: %v\n", err)
			return 1
		}
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			fmt.Fprintf(stderr, "testsummary: %s: %v\n", f, err)
			return 1
		}
		recs = append(recs, r)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Started.Before(recs[j].Started) })

	var passed, skipped, steps, goTests int
	var failed []string
	var skips []Skip
	var verdicts []string
	var slowest []Timed
	fmt.Fprintln(stdout, "\n==== summary ====")
	for _, r := range recs {
		status := "ok"
		if r.Exit != 0 {
			status = fmt.Sprintf("FAILED (exit %d)", r.Exit)
		}
		if r.Go == nil {
			steps++
			if r.Exit == 0 {
				passed++
			} else {
				failed = append(failed, "step "+r.Name)
			}
			fmt.Fprintf(stdout, "%-18s %s (%.0fs)\n", r.Name+":", status, r.Seconds)
			continue
		}
		g := r.Go
		n := g.Passed + len(g.Failed) + len(g.Skipped)
		goTests += n
		passed += g.Passed
		skipped += len(g.Skipped)
		failed = append(failed, g.Failed...)
		skips = append(skips, g.Skipped...)
		verdicts = append(verdicts, g.Verdicts...)
		slowest = append(slowest, r.Slowest...)
		if r.Exit != 0 && len(g.Failed) == 0 {
			failed = append(failed, "step "+r.Name+" (exited non-zero with no failed test)")
		}
		fmt.Fprintf(stdout, "%-18s %s (%.0fs): %d passed, %d failed, %d skipped in %d packages\n",
			r.Name+":", status, r.Seconds, g.Passed, len(g.Failed), len(g.Skipped), g.Packages)
	}
	if len(slowest) > 0 {
		sort.Slice(slowest, func(i, j int) bool { return slowest[i].Seconds > slowest[j].Seconds })
		fmt.Fprintln(stdout, "slowest tests:")
		for _, s := range slowest[:min(len(slowest), 8)] {
			fmt.Fprintf(stdout, "  %6.1fs %s\n", s.Seconds, s.Test)
		}
	}
	if len(verdicts) > 0 {
		fmt.Fprintln(stdout, "verdicts:")
		for _, v := range verdicts {
			fmt.Fprintf(stdout, "  %s\n", v)
		}
	}
	if len(skips) > 0 {
		fmt.Fprintf(stdout, "skipped (%d):\n", len(skips))
		for _, s := range skips {
			fmt.Fprintf(stdout, "  %s: %s\n", s.Test, s.Reason)
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(stdout, "failed (%d):\n", len(failed))
		for _, f := range failed {
			fmt.Fprintf(stdout, "  %s\n", f)
		}
	}
	fmt.Fprintf(stdout, "counted: %d Go tests and subtests, %d check steps\n", goTests, steps)
	fmt.Fprintf(stdout, "%d passed, %d failed, %d skipped\n", passed, len(failed), skipped)
	if len(failed) > 0 || len(recs) == 0 {
		if len(recs) == 0 {
			fmt.Fprintln(stderr, "testsummary: nothing was recorded in "+strings.TrimSpace(dir))
		}
		return 1
	}
	return 0
}
