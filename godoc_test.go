package idemkit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryPackageHasItsDocComment: every package of the module (commands
// included) has one package comment, in one file, directly above its
// package clause, and a library's begins "Package NAME ", so `go doc`
// shows what the package is and what it guarantees. A blank line between
// two parts of a package comment detaches the first part: `go doc` then
// shows only what follows it.
func TestEveryPackageHasItsDocComment(t *testing.T) {
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		switch d.Name() {
		case ".git", "node_modules", "testdata", "bin":
			return filepath.SkipDir
		}
		pkgs, err := packageClauses(path)
		if err != nil {
			return err
		}
		for name, files := range pkgs {
			checked++
			var withDoc []string
			text := ""
			for file, f := range files {
				if f.Doc != nil {
					withDoc = append(withDoc, file)
					text = f.Doc.Text()
				}
			}
			switch {
			case len(withDoc) == 0:
				t.Errorf("package %s (%s) has no package comment", name, path)
			case len(withDoc) > 1:
				t.Errorf("package %s (%s) has its package comment in %d files, want one: %v", name, path, len(withDoc), withDoc)
			case name != "main" && !strings.HasPrefix(text, "Package "+name+" "):
				first, _, _ := strings.Cut(text, "\n")
				t.Errorf("package %s (%s): its package comment begins %q, want \"Package %s ...\" (is a blank line detaching its first part?)", name, path, first, name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("checked %d packages, want the module's (at least 20)", checked)
	}
}

// packageClauses parses the package clause, with its comments, of every Go
// file of dir but its tests, by package name and then file name.
func packageClauses(dir string) (map[string]map[string]*ast.File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	pkgs := map[string]map[string]*ast.File{}
	fset := token.NewFileSet()
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			return nil, err
		}
		if pkgs[f.Name.Name] == nil {
			pkgs[f.Name.Name] = map[string]*ast.File{}
		}
		pkgs[f.Name.Name][n] = f
	}
	return pkgs, nil
}
