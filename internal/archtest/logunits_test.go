package archtest

import (
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
)

// TestLogDurationsAreMilliseconds: no non-test file of the module logs a
// duration with slog.Duration or slog.DurationValue. slog's JSON handler,
// the one the functions log with, writes such a value as Go's count of
// nanoseconds, a unit no reader of a log expects; a duration is logged as
// whole milliseconds under a name ending in _ms (slog.Int64("wait_ms",
// d.Milliseconds())), as docs/DEPLOYING.md describes the log lines.
func TestLogDurationsAreMilliseconds(t *testing.T) {
	root := shared.ModuleRoot()
	var bad []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "node_modules" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		bad = append(bad, durationAttrs(t, path, filepath.ToSlash(rel))...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s: log a duration as whole milliseconds under a name ending in _ms (slog.Int64(\"x_ms\", d.Milliseconds())), not as nanoseconds", b)
	}
}

// durationAttrs lists the uses of slog.Duration and slog.DurationValue in
// the file at path, as "rel:line: slog.X".
func durationAttrs(t *testing.T, path, rel string) []string {
	return selectorUses(t, path, rel, "log/slog", map[string]bool{"Duration": true, "DurationValue": true})
}
