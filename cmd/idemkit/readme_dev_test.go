package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/internal/shared"
	"github.com/idemkit/idemkit/internal/testutil"
)

// The README's library sections, followed as a new user would, in fresh
// modules outside the repository: `idemkit dev` starts its own engine and
// creates the tables; each section's files (a Go block under **`name.go`**,
// or the file it says to copy) become a module made with the section's
// `go mod init` / `go mod edit -replace` lines pointing at this checkout
// (offline); with the environment the README gives, its try-out test
// passes against idemkit dev's engine and prints the output the README
// shows. "In your function": the HTTP API handler and the same route on
// net/http around a ServeMux (each retry a replay) and the SQS consumer (a
// redelivered batch ships nothing twice). "In your worker": a ledger worker
// that crashes after sending (the redelivery sends with the same provider
// key, the next replays).
func TestReadmeLibrarySectionAgainstIdemkitDev(t *testing.T) {
	root := shared.ModuleRoot()
	readmePath := filepath.Join(root, "README.md")
	b, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	function := readmeSection(t, readme, "## In your function", "## In your worker")
	worker := readmeSection(t, readme, "## In your worker", "## Calling it")

	out, _ := startDevInProcess(t) // no --dynamodb-endpoint: dev starts its own engine
	m := regexp.MustCompile(`\(DynamoDB [^()]*? at (http://[0-9.:]+),`).FindStringSubmatch(out.text())
	if m == nil {
		t.Fatalf("idemkit dev printed no DynamoDB endpoint:\n%s", out.text())
	}
	// The fresh modules run offline; `go mod tidy` there reads the go.mod of
	// every module in the kit's graph, which on a fresh machine may not be
	// in the module cache yet.
	graph := exec.Command("go", "list", "-m", "all")
	graph.Dir = root
	if res, err := graph.CombinedOutput(); err != nil {
		t.Fatalf("go list -m all in the kit's module: %v\n%s", err, res)
	}
	env := []string{"DYNAMODB_ENDPOINT=" + m[1], "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local"}

	t.Run("orders", func(t *testing.T) {
		if !strings.Contains(function, "IDEMPOTENCY_TABLE=idemkit-IdempotencyTable") {
			t.Fatal("the function section no longer runs against idemkit-IdempotencyTable")
		}
		dir := freshModule(t, root, "example.com/orders", readmeFiles(t, root, function, "main.go", "mux.go", "main_test.go"))
		res := goTestIn(t, dir, "TestTryLocally", append(env, "IDEMPOTENCY_TABLE=idemkit-IdempotencyTable")...)
		if err := testutil.MatchShown(testutil.ShownOutput(t, readmePath, "TestReadmeLibrarySectionAgainstIdemkitDev/orders"), res); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("refunds", func(t *testing.T) {
		if !strings.Contains(worker, "EFFECTS_TABLE=idemkit-EffectsTable EFFECT_LEASE_SECONDS=1") {
			t.Fatal("the worker section no longer runs against idemkit-EffectsTable with a one-second lease")
		}
		dir := freshModule(t, root, "example.com/refunds", readmeFiles(t, root, worker, "main.go", "try_test.go"))
		res := goTestIn(t, dir, "TestTryCrash", append(env, "EFFECTS_TABLE=idemkit-EffectsTable", "EFFECT_LEASE_SECONDS=1")...)
		if err := testutil.MatchShown(testutil.ShownOutput(t, readmePath, "TestReadmeLibrarySectionAgainstIdemkitDev/refunds"), res); err != nil {
			t.Fatal(err)
		}
	})
}

func readmeSection(t *testing.T, readme, from, to string) string {
	t.Helper()
	i := strings.Index(readme, from)
	j := strings.Index(readme, to)
	if i < 0 || j < i {
		t.Fatalf("README.md has no section %q before %q", from, to)
	}
	return readme[i:j]
}

// readmeFiles returns each named file as the section gives it: the Go block
// right after **`name`**, or the repository file (or the Go block under a
// heading of a repository document) linked after it.
func readmeFiles(t *testing.T, root, section string, names ...string) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, name := range names {
		i := strings.Index(section, "**`"+name+"`**")
		if i < 0 {
			t.Fatalf("the section names no **`%s`**", name)
		}
		rest := section[i:]
		if g, l := strings.Index(rest, "```go\n"), strings.Index(rest, "]("); g >= 0 && (l < 0 || g < l) {
			code := rest[g+len("```go\n"):]
			files[name] = code[:strings.Index(code, "```")]
			continue
		}
		link := regexp.MustCompile(`\]\(([^)#\s]+)(?:#([^)\s]+))?\)`).FindStringSubmatch(rest)
		if link == nil {
			t.Fatalf("**`%s`** has neither a Go block nor a link", name)
		}
		b, err := os.ReadFile(filepath.Join(root, link[1]))
		if err != nil {
			t.Fatal(err)
		}
		if link[2] == "" {
			files[name] = string(b)
			continue
		}
		// A heading of a document: its first Go block.
		doc := string(b)
		h := regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatchIndex(doc, -1)
		found := false
		for _, loc := range h {
			if anchorOf(doc[loc[2]:loc[3]]) == link[2] {
				if g := regexp.MustCompile("(?s)```go\n(.*?)```").FindStringSubmatch(doc[loc[1]:]); g != nil {
					files[name], found = g[1], true
				}
				break
			}
		}
		if !found {
			t.Fatalf("**`%s`**: %s#%s has no Go block", name, link[1], link[2])
		}
	}
	return files
}

func anchorOf(heading string) string {
	var sb strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			sb.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

// freshModule makes a module outside the repository as the README says:
// go mod init, go mod edit -require/-replace to the clone, the files, go
// mod tidy (offline, so with -e).
func freshModule(t *testing.T, root, module string, files map[string]string) string {
	t.Helper()
	return testutil.FreshModule(t, testutil.Module{Path: module, Files: files,
		Replace: map[string]string{"github.com/idemkit/idemkit": root}})
}

func goEnv(extra ...string) []string { return testutil.GoEnv(false, extra...) }

// goTestIn runs `go test -run NAME -v` in dir, as the README says; it
// returns the output, failing the test when go test fails.
func goTestIn(t *testing.T, dir, name string, env ...string) string {
	t.Helper()
	cmd := exec.Command("go", "test", "-count=1", "-run", name, "-v")
	cmd.Dir = dir
	cmd.Env = goEnv(env...)
	res, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test -run %s in the fresh module: %v\n%s", name, err, res)
	}
	return string(res)
}
