package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
)

// clockRoots are the trees under the clock rule: the libraries' protocol
// logic and the reference host's packages by concern, with all their
// subpackages (stores, suites and test helpers included).
var clockRoots = []string{"idem", "ledger", "functions/host"}

// wallClockReads are the time package's reads of the real clock that the
// clock rule forbids outside internal/clock.
var wallClockReads = map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true}

// TestTimeComesFromTheClock: no non-test file under idem, ledger or
// functions/host names time.Now, time.Since, time.Until or time.Sleep,
// called or passed as a value. Time there is an injected clock (idem.Clock,
// ledger.Clock: Now, Sleep, NewTicker), so a fake clock governs every wait
// and every time a test can observe; what is wall time by nature (a
// context's deadline, a deadline handed to context.WithDeadline) is read
// through internal/clock's Wall and Remaining, and a default clock is
// clock.System.
func TestTimeComesFromTheClock(t *testing.T) {
	root := shared.ModuleRoot()
	var bad []string
	for _, r := range clockRoots {
		err := filepath.WalkDir(filepath.Join(root, r), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			bad = append(bad, wallClockUses(t, path, filepath.ToSlash(rel))...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s: read time through the injected clock (or internal/clock's Wall/Remaining for a context deadline)", b)
	}
}

// wallClockUses lists the uses of the forbidden time functions in the file
// at path, as "rel:line: time.X".
func wallClockUses(t *testing.T, path, rel string) []string {
	return selectorUses(t, path, rel, "time", wallClockReads)
}

// selectorUses lists the uses of the members names of the package imported
// as importPath (its last element is its name) in the Go file at path, as
// "rel:line: pkg.X"; a dot import of it is listed as such.
func selectorUses(t *testing.T, path, rel, importPath string, names map[string]bool) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	pkg := importPath[strings.LastIndex(importPath, "/")+1:]
	name := ""
	for _, is := range f.Imports {
		if is.Path.Value == `"`+importPath+`"` {
			name = pkg
			if is.Name != nil {
				name = is.Name.Name
			}
		}
	}
	if name == "." {
		return []string{rel + `: imports "` + importPath + `" with a dot`}
	}
	if name == "" || name == "_" {
		return nil
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == name && names[sel.Sel.Name] {
			out = append(out, fmt.Sprintf("%s:%d: %s.%s", rel, fset.Position(sel.Pos()).Line, pkg, sel.Sel.Name))
		}
		return true
	})
	return out
}
