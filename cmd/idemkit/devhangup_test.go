package main

import (
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/testutil"
)

// TestDevHangUpStopsLikeSIGTERM: SIGHUP, which a closed terminal sends,
// stops `idemkit dev` as SIGTERM does (RED_TEAM 508): exit 0, the engine
// stopped and its temporary files removed. Before, dev died of the signal
// at once (status 129) and the engine's temporary directory stayed. And
// a dev started with SIGHUP ignored (`nohup idemkit dev &`) keeps it
// ignored: a SIGHUP leaves it serving.
func TestDevHangUpStopsLikeSIGTERM(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		testutil.Unavailable(t, "node is not on PATH: %v", err)
	}
	bin, err := testutil.Build(t.TempDir(), "idemkit", "cmd/idemkit", nil, nil)
	if err != nil {
		testutil.Unavailable(t, "idemkit is not available: %v", err)
	}
	start := func(t *testing.T, tmp string, ignoreHUP bool) (*testutil.Process, *exec.Cmd, string) {
		addr := testutil.FreeAddr(t)
		args := []string{"dev", "--addr", addr, "--emulator", "dynalite", "--api-key", "idk_hangup_0123456789abcdef=acme"}
		var cmd *exec.Cmd
		if ignoreHUP {
			// As nohup does: SIGHUP ignored, which exec keeps.
			cmd = exec.Command("/bin/sh", append([]string{"-c", `trap "" HUP; exec "$0" "$@"`, bin}, args...)...)
		} else {
			cmd = exec.Command(bin, args...)
		}
		cmd.Env = append(os.Environ(), envSupervised+"=", "TMPDIR="+tmp)
		p := testutil.Start(t, cmd, 30*time.Second)
		deadline := time.Now().Add(2 * time.Minute)
		for !strings.Contains(p.Log.String(), "serving http://"+addr) {
			if p.Exited() || time.Now().After(deadline) {
				t.Fatalf("idemkit dev is not serving:\n%s", p.Log.String())
			}
			time.Sleep(100 * time.Millisecond)
		}
		return p, cmd, addr
	}
	engineTemp := func(t *testing.T, tmp string) []string {
		m, err := filepath.Glob(filepath.Join(tmp, "idemkit-*"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}

	t.Run("stops gracefully", func(t *testing.T) {
		tmp := t.TempDir()
		p, cmd, _ := start(t, tmp, false)
		if len(engineTemp(t, tmp)) == 0 {
			t.Fatalf("the engine's temporary directory is not in TMPDIR %s: the test cannot see it removed", tmp)
		}
		m := regexp.MustCompile(`"msg":"dev: started the DynamoDB engine"[^\n]*"pid":(\d+)`).FindStringSubmatch(p.Log.String())
		if m == nil {
			t.Fatalf("no engine pid in the log:\n%s", p.Log.String())
		}
		enginePID, _ := strconv.Atoi(m[1])
		if err := syscall.Kill(p.PID(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.Done():
		case <-time.After(time.Minute):
			t.Fatalf("idemkit dev still running a minute after SIGHUP:\n%s", p.Log.String())
		}
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("idemkit dev ended %s after SIGHUP, want exit 0 as after SIGTERM:\n%s", cmd.ProcessState, p.Log.String())
		}
		if left := engineTemp(t, tmp); len(left) > 0 {
			t.Fatalf("temporary files left after SIGHUP: %v", left)
		}
		if err := syscall.Kill(enginePID, 0); !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("the engine (pid %d) outlived SIGHUP: kill 0: %v", enginePID, err)
		}
	})

	t.Run("ignored at start keeps serving", func(t *testing.T) {
		tmp := t.TempDir()
		p, cmd, addr := start(t, tmp, true)
		if err := syscall.Kill(p.PID(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		// An ignored signal is discarded when sent: kill returned, so a
		// dev that honoured it would already be stopping.
		resp, err := http.Get("http://" + addr + "/.well-known/openwop")
		if err != nil {
			t.Fatalf("idemkit dev started with SIGHUP ignored stopped serving after SIGHUP: %v\n%s", err, p.Log.String())
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || p.Exited() || strings.Contains(p.Log.String(), "stopping") {
			t.Fatalf("idemkit dev started with SIGHUP ignored: %d after SIGHUP, exited %v:\n%s", resp.StatusCode, p.Exited(), p.Log.String())
		}
		if err := syscall.Kill(p.PID(), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		<-p.Done()
		if code := cmd.ProcessState.ExitCode(); code != 0 {
			t.Fatalf("idemkit dev exited %s after SIGTERM:\n%s", cmd.ProcessState, p.Log.String())
		}
	})
}
