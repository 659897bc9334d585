package emulator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/idemkit/idemkit/internal/emulator/proc"
)

// dynaliteBin returns tools/node_modules/.bin/dynalite, running
// `npm ci --prefix tools` first if it is missing. Several processes may race
// here; a file lock makes one of them install and the others wait.
func dynaliteBin(ctx context.Context, tools string) (string, error) {
	if tools == "" {
		return "", errors.New("dynalite needs Options.ToolsDir (the directory whose package.json pins it)")
	}
	bin := filepath.Join(tools, "node_modules", ".bin", "dynalite")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	unlock, err := proc.LockFile(filepath.Join(os.TempDir(), "idemkit-tools-npm-ci.lock"))
	if err != nil {
		return "", fmt.Errorf("locking for npm ci: %w", err)
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil // installed by another process while we waited
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("dynalite is not installed and npm is not on PATH (run `make tools`): %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--prefix", tools, "--no-audit", "--no-fund")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm ci --prefix tools: %v: %s", err, out)
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("npm ci --prefix tools did not install %s", bin)
	}
	return bin, nil
}
