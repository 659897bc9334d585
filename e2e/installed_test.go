package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/emulator/proc"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestInstalledBinaryRunsOutsideTheRepository: an idemkit binary that
// cannot see the repository (built with -trimpath, as `go install` of a
// release builds it away from any checkout's tools/, and copied to a
// temporary directory) run from a directory outside the repository, with
// HOME and the cache directory empty: `idemkit dev` installs the pinned
// npm engines into the user's cache directory (saying so on stderr),
// becomes ready, serves a replay (POST /runs twice with one key), logs no
// checksum warning, and a second run reuses the cache without installing.
// npm runs under the user's own npm configuration and cache (so it works
// offline from the machine's npm cache).
func TestInstalledBinaryRunsOutsideTheRepository(t *testing.T) {
	if _, err := exec.LookPath("npm"); err != nil {
		testutil.Unavailable(t, "npm is not on PATH: %v", err)
	}
	engine := emulator.DynamoDBLocal
	if !emulator.HasJava() {
		engine = emulator.Dynalite // needs the npm install too
	}
	built := buildHost(t, t.TempDir(), "idemkit", "cmd/idemkit")
	bin := filepath.Join(t.TempDir(), "idemkit")
	b, err := os.ReadFile(built)
	must(t, err)
	must(t, os.WriteFile(bin, b, 0o755))

	home, cache, wd := t.TempDir(), t.TempDir(), t.TempDir()
	env := []string{"HOME=" + home, "XDG_CACHE_HOME=" + cache}
	for _, kv := range os.Environ() {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "HOME", "XDG_CACHE_HOME", "IDEMKIT_TOOLS", "DYNAMODB_ENDPOINT":
		default:
			env = append(env, kv)
		}
	}
	// The user's npm cache and configuration (registry, certificates),
	// which HOME no longer points at.
	if real, err := os.UserHomeDir(); err == nil {
		env = append(env, "npm_config_cache="+filepath.Join(real, ".npm"), "npm_config_prefer_offline=true")
		if _, err := os.Stat(filepath.Join(real, ".npmrc")); err == nil {
			env = append(env, "npm_config_userconfig="+filepath.Join(real, ".npmrc"))
		}
	}

	run := func(t *testing.T) *testutil.Process {
		addr := testutil.FreeAddr(t)
		cmd := exec.Command(bin, "dev", "--emulator", engine, "--addr", addr, "--api-key", devKey+"=e2e-tenant")
		cmd.Env, cmd.Dir = env, wd
		p := testutil.Start(t, cmd, 15*time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		switch err := testutil.WaitHTTP(ctx, "http://"+addr+"/.well-known/openwop", p.Done()); {
		case errors.Is(err, proc.ErrExited):
			t.Fatalf("idemkit dev exited:\n%s", p.Log.String())
		case err != nil:
			t.Fatalf("idemkit dev not ready: %v\n%s", err, p.Log.String())
		}
		key := fmt.Sprintf("installed-%d-0123456789abcdef", time.Now().UnixNano())
		var runIDs []any
		for i := 0; i < 2; i++ {
			r, m := testutil.DoJSON(t, "POST", "http://"+addr+"/runs", `{"workflowId":"conformance-noop","inputs":{}}`,
				"Authorization", testutil.Bearer(devKey), "Idempotency-Key", key)
			if r.StatusCode != 201 || (i == 1) != (r.Header.Get("OpenWOP-Idempotent-Replay") == "true") {
				t.Fatalf("POST %d: %d %v replay=%q", i+1, r.StatusCode, m, r.Header.Get("OpenWOP-Idempotent-Replay"))
			}
			runIDs = append(runIDs, m["runId"])
		}
		if runIDs[0] == nil || runIDs[0] != runIDs[1] {
			t.Fatalf("runIds %v: want the replay of one run", runIDs)
		}
		p.Stop()
		if out := p.Log.String(); strings.Contains(out, "checksum") {
			t.Errorf("a checksum warning was logged:\n%s", out)
		}
		return p
	}

	const installing = "installing the pinned DynamoDB engines"
	first := run(t)
	if out := first.Log.String(); !strings.Contains(out, installing) || !strings.Contains(out, filepath.Join(cache, "idemkit", "engines")) {
		t.Fatalf("first run: no install line naming the cache directory:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(cache, "idemkit", "engines", emulator.PinsHash(), "package-lock.json")); err != nil {
		t.Fatalf("the engines are not in the cache: %v", err)
	}
	second := run(t)
	if out := second.Log.String(); strings.Contains(out, installing) {
		t.Fatalf("second run installed again:\n%s", out)
	}
}
