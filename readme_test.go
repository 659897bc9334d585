package idemkit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every Go block in README.md compiles as pasted: it is, character for
// character, either a whole Go file of the repository (built and vetted with
// the rest, e.g. examples/orders/main.go) or the body of an Example
// function (compiled, and run when it has an // Output: comment).
func TestReadmeGoBlocksAreCompiledCode(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(readme), -1)
	if len(blocks) == 0 {
		t.Fatal("README.md has no Go blocks")
	}
	known := compiledSources(t)
	for _, b := range blocks {
		code := strings.TrimSpace(b[1])
		if where, ok := known[code]; ok {
			t.Logf("README block %q… is %s", firstLine(code), where)
			continue
		}
		t.Errorf("README Go block starting %q is neither a repository Go file nor an Example body; make it one (paste the file or the Example's body)", firstLine(code))
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// compiledSources maps trimmed source text to where it is compiled: every
// .go file, and every Example function's body (one tab of indentation
// removed).
func compiledSources(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "node_modules", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out[strings.TrimSpace(string(src))] = path
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || !strings.HasPrefix(fn.Name.Name, "Example") || fn.Body == nil {
				continue
			}
			body := string(src[fset.Position(fn.Body.Lbrace).Offset+1 : fset.Position(fn.Body.Rbrace).Offset])
			lines := strings.Split(strings.Trim(body, "\n"), "\n")
			for i, l := range lines {
				lines[i] = strings.TrimPrefix(l, "\t")
			}
			out[strings.TrimSpace(strings.Join(lines, "\n"))] = path + " " + fn.Name.Name
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDocsGoBlocksAreCompiledCode: as the README's, every Go block of every
// Markdown file of the repository is a repository Go file or an Example
// body, so what a reader pastes compiles and runs (client/README.md's
// example had drifted from the Example it shows by a comment).
func TestDocsGoBlocksAreCompiledCode(t *testing.T) {
	known := compiledSources(t)
	n := 0
	for _, doc := range markdownFiles(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
			n++
			if code := strings.TrimSpace(m[1]); known[code] == "" {
				t.Errorf("%s: Go block starting %q is neither a repository Go file nor an Example body; make it one (paste the file or the Example's body)", doc, firstLine(code))
			}
		}
	}
	if n < 5 {
		t.Fatalf("found %d Go blocks in the Markdown files, want at least the 5 known", n)
	}
}
