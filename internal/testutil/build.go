package testutil

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/idemkit/idemkit/internal/shared"
)

// goMu serializes the go commands of one test process: they share the
// build cache and the machine's CPUs.
var goMu sync.Mutex

// Go runs `go args...` in the module root with env added to the
// environment, one at a time per process. The error carries the output.
func Go(env []string, args ...string) error {
	goMu.Lock()
	defer goMu.Unlock()
	cmd := exec.Command("go", args...)
	cmd.Dir = shared.ModuleRoot()
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// Build compiles the package pkg (relative to the module root, e.g.
// "cmd/idemkit") into dir/name with `go build flags...`, env added to the
// environment (e.g. GOOS=linux), and returns the binary's path.
//
// A process builds each (pkg, flags, env) once: later calls copy that
// binary into their dir (go build caches compiled packages but links
// again every time). The first build is kept in a directory of the
// process that RemoveBuilds deletes (dynamotest.Main calls it). A failed
// build is not kept: the next call tries again.
func Build(dir, name, pkg string, flags, env []string) (string, error) {
	src, err := buildOnce(pkg, flags, env)
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, name)
	if err := copyFile(src, out); err != nil {
		return "", err
	}
	return out, nil
}

var (
	buildsMu  sync.Mutex
	buildsDir string
	builds    = map[string]string{} // key of buildKey -> the binary
)

func buildKey(pkg string, flags, env []string) string {
	return pkg + "\x00" + strings.Join(flags, "\x01") + "\x00" + strings.Join(env, "\x01")
}

// buildOnce returns the process's binary of pkg built with flags and env,
// building it on first use (one build at a time: Go serializes them too).
func buildOnce(pkg string, flags, env []string) (string, error) {
	buildsMu.Lock()
	defer buildsMu.Unlock()
	key := buildKey(pkg, flags, env)
	if p, ok := builds[key]; ok {
		return p, nil
	}
	if buildsDir == "" {
		d, err := os.MkdirTemp("", "idemkit-testbuilds-")
		if err != nil {
			return "", err
		}
		buildsDir = d
	}
	out := filepath.Join(buildsDir, fmt.Sprintf("bin%d", len(builds)))
	args := append(append([]string{"build"}, flags...), "-o", out, "./"+pkg)
	if err := Go(env, args...); err != nil {
		return "", err
	}
	builds[key] = out
	return out, nil
}

// RemoveBuilds deletes the binaries Build kept for this process; a later
// Build builds again.
func RemoveBuilds() {
	buildsMu.Lock()
	defer buildsMu.Unlock()
	if buildsDir != "" {
		os.RemoveAll(buildsDir)
	}
	buildsDir, builds = "", map[string]string{}
}

// copyFile copies the executable src to dst (replacing a file there, as go
// build -o does), mode 0755.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
