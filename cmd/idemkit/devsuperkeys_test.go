package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/testutil"
)

// TestDevSupervisorKeepsKeysOutOfTheProcessList: `idemkit dev
// --conformance-seams` runs its stack in a child process; the API keys it
// hands that child (the demo keys it minted, or those given to it) are not
// on the child's command line, which every user of the machine reads in
// the process list (RED_TEAM 496: `--api-key=idk_…=demo-a` was there).
// The child still serves them: the demo key authenticates.
func TestDevSupervisorKeepsKeysOutOfTheProcessList(t *testing.T) {
	bin, err := testutil.Build(t.TempDir(), "idemkit", "cmd/idemkit", nil, nil)
	if err != nil {
		testutil.Unavailable(t, "idemkit is not available: %v", err)
	}
	addr := testutil.FreeAddr(t)
	cmd := exec.Command(bin, "dev", "--addr", addr, "--emulator", "moto", "--conformance-seams")
	cmd.Env = append(os.Environ(), envSupervised+"=") // this test process sets "0"
	p := testutil.Start(t, cmd, 30*time.Second)
	base := "http://" + addr
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := testutil.WaitHTTP(ctx, base+"/.well-known/openwop", p.Done()); err != nil {
		t.Fatalf("idemkit dev is not serving: %v\n%s", err, p.Log.String())
	}
	keys := regexp.MustCompile(`demo API key for tenant demo-[ab]: (\S+)`).FindAllStringSubmatch(p.Log.String(), -1)
	if len(keys) != 2 {
		t.Fatalf("demo keys printed: %v\n%s", keys, p.Log.String())
	}
	children := childrenOf(t, p.PID())
	if len(children) == 0 {
		t.Fatal("the supervisor has no child process")
	}
	for _, c := range children {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(c), "cmdline"))
		if err != nil {
			continue // exited meanwhile
		}
		line := strings.ReplaceAll(string(b), "\x00", " ")
		for _, k := range keys {
			if strings.Contains(line, k[1]) {
				t.Errorf("child %d's command line holds a demo key: %s", c, line)
			}
		}
	}
	if r, _ := testutil.DoJSON(t, "GET", base+"/runs/demo-a~2Fnone0000000000000000", "", "Authorization", testutil.Bearer(keys[0][1])); r.StatusCode != 404 {
		t.Fatalf("the demo key in the child: GET of a missing run answered %d, want 404", r.StatusCode)
	}
}

// childrenOf lists the pids whose parent is pid (from /proc).
func childrenOf(t *testing.T, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces; cut after its ')'.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}
