package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// GoEnv is the environment of a go command run in a module outside the
// repository: no workspace, module mode, the local toolchain. Offline
// (online false) it reaches no module proxy (GOPROXY=off), so only what
// the module cache holds is used; online it uses the environment's proxy.
// extra is appended.
func GoEnv(online bool, extra ...string) []string {
	env := []string{"GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local"}
	if !online {
		env = append(env, "GOPROXY=off", "GONOSUMDB=*")
	}
	return append(os.Environ(), append(env, extra...)...)
}

// Module is a module FreshModule makes.
type Module struct {
	// Path is the module path ("example.com/orders").
	Path string
	// Replace maps each module the files use from a local directory (the
	// checkout, a nested module of it) to that directory: required at
	// v0.0.0 and replaced, as the README tells a user of the clone.
	Replace map[string]string
	// Files are the module's files by name.
	Files map[string]string
	// Online lets go mod tidy fetch third-party modules through the
	// module proxy; offline it runs with -e (it cannot fetch the
	// test-only dependencies of dependencies, which no build needs).
	Online bool
}

// FreshModule makes m in a temporary directory outside the repository as
// a user would: the files, go mod init, go mod edit -require/-replace for
// each local module, go mod tidy. It returns the directory. Online, a
// tidy that cannot reach the module proxy is Unavailable (it fails under
// CI=true, else skips).
func FreshModule(t testing.TB, m Module) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range m.Files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	steps := [][]string{{"mod", "init", m.Path}}
	for mod, local := range m.Replace {
		steps = append(steps, []string{"mod", "edit", "-require=" + mod + "@v0.0.0", "-replace=" + mod + "=" + local})
	}
	if m.Online {
		steps = append(steps, []string{"mod", "tidy"})
	} else {
		steps = append(steps, []string{"mod", "tidy", "-e"})
	}
	for _, args := range steps {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = GoEnv(m.Online)
		if res, err := cmd.CombinedOutput(); err != nil {
			if m.Online && args[1] == "tidy" && unreachable(string(res)) {
				Unavailable(t, "go mod tidy in the fresh module cannot reach the module proxy: %s", res)
			}
			t.Fatalf("go %s in the fresh module: %v\n%s", strings.Join(args, " "), err, res)
		}
	}
	return dir
}

// unreachable reports whether a go command's output says the module proxy
// could not be reached (no network), not that a module is wrong.
func unreachable(out string) bool {
	for _, s := range []string{"dial tcp", "no such host", "connection refused", "i/o timeout", "network is unreachable", "TLS handshake timeout"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

// GoIn runs `go args...` in dir with GoEnv(online) and returns its
// combined output, failing the test when it fails; online, a failure to
// reach the module proxy is Unavailable instead (it fails under CI=true,
// else skips).
func GoIn(t testing.TB, dir string, online bool, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = GoEnv(online)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if online && unreachable(string(out)) {
			Unavailable(t, "go %s in %s cannot reach the module proxy: %s", strings.Join(args, " "), dir, out)
		}
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return string(out)
}
