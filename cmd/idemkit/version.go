package main

import (
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

const versionAbout = `Prints the module version of this binary and the VCS commit it was built
from, as recorded by the Go toolchain: "(devel)" when the version is not
stamped (a build from a checkout), "unknown" when no commit was recorded,
"+dirty" when the checkout had local changes.

examples:
  idemkit version
  go install github.com/idemkit/idemkit/cmd/idemkit@latest && idemkit version
`

// runVersion implements `idemkit version`.
func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	setUsage(fs, "idemkit version", versionAbout)
	pos, code, done := parseFlags(fs, args, false, stdout, stderr)
	if done {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, stderr, "unexpected argument %q (takes no arguments)", pos[0])
	}
	bi, _ := debug.ReadBuildInfo() // nil when not recorded
	fmt.Fprintln(stdout, versionLine(bi))
	return 0
}

// versionLine formats "idemkit VERSION commit COMMIT[+dirty][ (TIME)]" from
// build information (nil: none recorded).
func versionLine(bi *debug.BuildInfo) string {
	version, commit, dirty, at := "(devel)", "unknown", false, ""
	if bi != nil {
		if v := bi.Main.Version; v != "" {
			version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			case "vcs.time":
				at = s.Value
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "idemkit %s commit %s", version, commit)
	if dirty {
		b.WriteString("+dirty")
	}
	if at != "" {
		fmt.Fprintf(&b, " (%s)", at)
	}
	return b.String()
}
