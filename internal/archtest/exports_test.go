package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
)

// libraryRoots are the folders whose packages users import: their
// exported identifiers are the public face the budget holds.
var libraryRoots = []string{"idem", "ledger", "client"}

// exportedBudget is the most exported identifiers each library package
// may have, counted by exportedIdentifiers: every exported const, var,
// type and func, every exported method of an exported type, every
// exported field of an exported struct and every method of an exported
// interface. Unlike `go doc -short`, which folds const blocks and hides
// methods and fields, every name a user can reach counts. A package that
// would grow past its budget unexports what users never call, or moves
// shared machinery to an internal package; a new library package needs a
// row here.
var exportedBudget = map[string]int{
	"client":                   53,
	"idem":                     278,
	"idem/canon":               25,
	"idem/decided":             38,
	"idem/dynamostore":         24,
	"idem/event":               15,
	"idem/idemenv":             25,
	"idem/idemlambdaurl":       2,
	"idem/idemtest":            26,
	"idem/keyspace":            4,
	"idem/memstore":            22,
	"idem/policy/commerce":     7,
	"idem/policy/erp":          12,
	"ledger":                   290, // 290 since ErrFenceReopenUnknown: a reopen that may have landed, which no other error can say
	"ledger/dynamostore":       27,
	"ledger/fence":             51,
	"ledger/fence/dynamostore": 16,
	"ledger/fence/fencetest":   5,
	"ledger/fence/memstore":    8,
	"ledger/identity":          43,
	"ledger/ledgertest":        35,
	"ledger/memstore":          8,
	"ledger/semantic":          30, // 30 since Request.TopK: a member of the recipe's request object, hashed as request.topK
}

// TestExportedIdentifierBudget holds every library package to its budget
// of exported identifiers.
func TestExportedIdentifierBudget(t *testing.T) {
	counts, err := libraryExports(shared.ModuleRoot())
	if err != nil {
		t.Fatal(err)
	}
	pkgs := make([]string, 0, len(counts))
	for p := range counts {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		budget, ok := exportedBudget[p]
		switch {
		case !ok:
			t.Errorf("library package %s (%d exported identifiers) has no row in exportedBudget", p, counts[p])
		case counts[p] > budget:
			t.Errorf("%s exports %d identifiers, budget %d", p, counts[p], budget)
		}
	}
	for p := range exportedBudget {
		if _, ok := counts[p]; !ok {
			t.Errorf("exportedBudget names %s, which is not a library package", p)
		}
	}
}

// TestExportedIdentifiersCounted: the count sees methods, fields and
// every name of a const block, and ignores tests and unexported names.
func TestExportedIdentifiersCounted(t *testing.T) {
	dir := t.TempDir()
	src := `package p

const (
	A = iota
	B
	c
)

var V, w int

type T struct {
	F, G int
	h    int
	Embedded
}

type Embedded struct{}

type I interface {
	M()
	n()
}

type u struct{ X int }

func (T) Method()  {}
func (T) method()  {}
func (u) Visible() {}

func F() {}
func f() {}
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p_test.go"), []byte("package p\n\nfunc Test() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := exportedIdentifiers(dir)
	if err != nil {
		t.Fatal(err)
	}
	// A, B, V, T, F, G, Embedded (field), Embedded (type), I, M, Method, F (func)
	if n != 12 {
		t.Fatalf("counted %d, want 12", n)
	}
}

// libraryExports counts the exported identifiers of every package under
// libraryRoots (testdata and internal folders excluded), keyed by its
// path relative to the module root.
func libraryExports(root string) (map[string]int, error) {
	out := map[string]int{}
	for _, r := range libraryRoots {
		err := filepath.WalkDir(filepath.Join(root, r), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			if n := d.Name(); n == "testdata" || n == "internal" || strings.HasPrefix(n, ".") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil && p != filepath.Join(root, r) {
				return filepath.SkipDir // a module of its own (a router adapter)
			}
			n, err := exportedIdentifiers(p)
			if err != nil {
				return err
			}
			if n >= 0 {
				rel, _ := filepath.Rel(root, p)
				out[filepath.ToSlash(rel)] = n
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// exportedIdentifiers counts the exported identifiers of the package in
// dir (see exportedBudget); -1 when dir holds no non-test Go file of a
// non-main package.
func exportedIdentifiers(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	fset := token.NewFileSet()
	n, found := 0, false
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return 0, err
		}
		if f.Name.Name == "main" {
			continue
		}
		found = true
		n += fileExports(f)
	}
	if !found {
		return -1, nil
	}
	return n, nil
}

func fileExports(f *ast.File) int {
	n := 0
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv == nil || receiverExported(d.Recv) {
				n++
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.ValueSpec:
					for _, id := range s.Names {
						if id.IsExported() {
							n++
						}
					}
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					n++
					switch ty := s.Type.(type) {
					case *ast.StructType:
						n += exportedFields(ty.Fields)
					case *ast.InterfaceType:
						n += exportedFields(ty.Methods)
					}
				}
			}
		}
	}
	return n
}

// exportedFields counts the exported names of a field list (an embedded
// field counts under its type's name).
func exportedFields(fl *ast.FieldList) int {
	n := 0
	for _, fd := range fl.List {
		if len(fd.Names) == 0 {
			if id := embeddedName(fd.Type); id != nil && id.IsExported() {
				n++
			}
			continue
		}
		for _, id := range fd.Names {
			if id.IsExported() {
				n++
			}
		}
	}
	return n
}

func embeddedName(e ast.Expr) *ast.Ident {
	switch x := e.(type) {
	case *ast.Ident:
		return x
	case *ast.StarExpr:
		return embeddedName(x.X)
	case *ast.SelectorExpr:
		return x.Sel
	case *ast.IndexExpr:
		return embeddedName(x.X)
	case *ast.IndexListExpr:
		return embeddedName(x.X)
	}
	return nil
}

func receiverExported(fl *ast.FieldList) bool {
	if fl == nil || len(fl.List) == 0 {
		return false
	}
	id := embeddedName(fl.List[0].Type)
	return id != nil && id.IsExported()
}
