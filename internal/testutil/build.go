package testutil

import (
	"fmt"
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
func Build(dir, name, pkg string, flags, env []string) (string, error) {
	out := filepath.Join(dir, name)
	args := append(append([]string{"build"}, flags...), "-o", out, "./"+pkg)
	if err := Go(env, args...); err != nil {
		return "", err
	}
	return out, nil
}
