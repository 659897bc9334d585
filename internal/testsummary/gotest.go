package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Elapsed    float64
	Output     string
}

// Timed is a top-level test and how long it took.
type Timed struct {
	Test    string  `json:"test"`
	Seconds float64 `json:"seconds"`
}

// collector turns a stream of events into plain `go test` output and a
// GoResult.
type collector struct {
	out     io.Writer
	res     GoResult
	slowest []Timed
	// buf holds each running test's output until it ends.
	buf map[string][]string
	// pkgFailedTests counts the failed tests of each package.
	pkgFailedTests map[string]int
}

func newCollector(out io.Writer) *collector {
	return &collector{out: out, buf: map[string][]string{}, pkgFailedTests: map[string]int{}}
}

// reasonStart matches the first line of a t.Log/t.Skip message.
var reasonStart = regexp.MustCompile(`^\s+\S+\.go:\d+: `)

// skipReason is the message a skipped test logged last: from its last
// "file.go:N: " line up to its SKIP line, on one line.
func skipReason(lines []string) string {
	var msg []string
	for _, l := range lines {
		l = strings.TrimRight(l, "\n")
		t := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- ") || t == "":
		case reasonStart.MatchString(l):
			msg = []string{t}
		default:
			msg = append(msg, t)
		}
	}
	if len(msg) == 0 {
		return "(no reason given)"
	}
	return strings.Join(msg, " ")
}

func (c *collector) add(e event) {
	key := e.Package + "\x00" + e.Test
	switch e.Action {
	case "build-output":
		fmt.Fprint(c.out, e.Output)
		return
	case "output":
		if e.Test == "" {
			if e.Output != "PASS\n" && !strings.HasPrefix(e.Output, "=== ") {
				fmt.Fprint(c.out, e.Output)
			}
			return
		}
		c.buf[key] = append(c.buf[key], e.Output)
		if i := strings.Index(e.Output, VerdictMark); i >= 0 {
			c.res.Verdicts = append(c.res.Verdicts, e.Test+": "+strings.TrimSpace(e.Output[i+len(VerdictMark):]))
		}
		return
	}
	if e.Test == "" {
		switch e.Action {
		case "start":
			c.res.Packages++
		case "fail":
			if c.pkgFailedTests[e.Package] == 0 {
				// Build failure, crash, timeout, TestMain exit: no test
				// failed, the package did.
				c.res.Failed = append(c.res.Failed, e.Package+" (package failed; see its output above)")
			}
		}
		return
	}
	name := e.Package + " " + e.Test
	switch e.Action {
	case "pass":
		c.res.Passed++
	case "skip":
		c.res.Skipped = append(c.res.Skipped, Skip{Test: name, Reason: skipReason(c.buf[key])})
	case "fail":
		c.res.Failed = append(c.res.Failed, name)
		c.pkgFailedTests[e.Package]++
		for _, l := range c.buf[key] {
			if !strings.HasPrefix(l, "=== ") {
				fmt.Fprint(c.out, l)
			}
		}
	default:
		return
	}
	if !strings.Contains(e.Test, "/") {
		c.slowest = append(c.slowest, Timed{Test: name, Seconds: e.Elapsed})
	}
	delete(c.buf, key)
}

// finish reports tests that never ended (the binary crashed or timed out)
// as failed, and keeps the ten slowest top-level tests.
func (c *collector) finish() {
	var open []string
	for key := range c.buf {
		pkg, test, _ := strings.Cut(key, "\x00")
		open = append(open, pkg+" "+test+" (did not finish)")
	}
	sort.Strings(open)
	c.res.Failed = append(c.res.Failed, open...)
	sort.Slice(c.slowest, func(i, j int) bool { return c.slowest[i].Seconds > c.slowest[j].Seconds })
	if len(c.slowest) > 10 {
		c.slowest = c.slowest[:10]
	}
}

// runGoTest runs a `go test -json` command, renders its events like plain
// `go test` and records the counts.
func runGoTest(dir, name string, command []string, stdout, stderr io.Writer) int {
	rec := Record{Name: name, Started: time.Now()}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stderr = stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintf(stderr, "testsummary: %v\n", err)
		return 1
	}
	c := newCollector(stdout)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "testsummary: %s: %v\n", name, err)
		rec.Exit = -1
	} else {
		consume(pipe, c)
		rec.Exit = exitCode(cmd.Wait())
	}
	c.finish()
	rec.Seconds, rec.Go = time.Since(rec.Started).Seconds(), &c.res
	rec.Slowest = c.slowest
	return finish(dir, rec, stderr)
}

// consume feeds every JSON event line of r to c; other lines are printed as
// they are.
func consume(r io.Reader, c *collector) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) > 0 && line[0] == '{' && json.Unmarshal(line, &e) == nil && e.Action != "" {
			c.add(e)
			continue
		}
		fmt.Fprintln(c.out, string(line))
	}
}
