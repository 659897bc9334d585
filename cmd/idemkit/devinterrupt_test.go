package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/internal/emulator"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestDevSecondInterruptStopsAtOnce: the first Ctrl-C (SIGINT) of the
// built `idemkit dev` (and of `idemkit dev --conformance-seams`, its own
// restart supervisor, which passes the second on to its child) gives the requests in flight up to 10 s to finish and
// says that a second Ctrl-C stops at once; the second one does: dev exits 0,
// the request in flight cut (never answered 201: it holds its answer 10 s,
// and the grace ends after it), and the engine it started
// is stopped (its pid is gone). Before, the second Ctrl-C did nothing.
func TestDevSecondInterruptStopsAtOnce(t *testing.T) {
	if _, err := exec.LookPath("moto_server"); err != nil {
		testutil.Unavailable(t, "moto_server is not on PATH: %v", err)
	}
	bin, err := testutil.Build(t.TempDir(), "idemkit", "cmd/idemkit", nil, nil)
	if err != nil {
		testutil.Unavailable(t, "idemkit is not available: %v", err)
	}
	for _, mode := range []string{"dev", "dev --conformance-seams"} {
		t.Run(mode, func(t *testing.T) { stopTwice(t, bin, strings.Fields(mode)) })
	}
}

// stopTwice runs TestDevSecondInterruptStopsAtOnce on the built
// binary bin with the command line args (dev, or dev as its own restart
// supervisor, whose child serves).
func stopTwice(t *testing.T, bin string, args []string) {
	const key = "idk_second_interrupt_0123456789"
	addr := testutil.FreeAddr(t)
	prefix := fmt.Sprintf("sigint%d-", time.Now().UnixNano())
	cmd := exec.Command(bin, append(args, "--addr", addr, "--emulator", "moto", "--api-key", key+"=acme", "--table-prefix", prefix)...)
	cmd.Env = append(os.Environ(), envSupervised+"=")
	p := testutil.Start(t, cmd, 30*time.Second)
	deadline := time.Now().Add(2 * time.Minute)
	serving := regexp.MustCompile(`serving http://` + regexp.QuoteMeta(addr) + ` \([^ ]+ at (http://[^,]+), ready`)
	var endpoint string
	for {
		if m := serving.FindStringSubmatch(p.Log.String()); m != nil {
			endpoint = m[1]
			break
		}
		if p.Exited() || time.Now().After(deadline) {
			t.Fatalf("idemkit dev is not serving:\n%s", p.Log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	m := regexp.MustCompile(`"msg":"dev: started the DynamoDB engine"[^\n]*"pid":(\d+)`).FindStringSubmatch(p.Log.String())
	if m == nil {
		t.Fatalf("no engine pid in the log:\n%s", p.Log.String())
	}
	enginePID, _ := strconv.Atoi(m[1])

	// A request that holds its answer 10 s, in flight.
	answered := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", "http://"+addr+"/runs", strings.NewReader(`{"workflowId":"conformance-delay","inputs":{"delayMs":10000}}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Idempotency-Key", fmt.Sprintf("second-interrupt-%d", time.Now().UnixNano()))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	c := emulator.Client(endpoint)
	for {
		o, err := c.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(prefix + "IdempotencyTable")})
		if err == nil && len(o.Items) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the request's claim never showed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	if err := syscall.Kill(p.PID(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// The first Ctrl-C waits for the request, and says how to stop at once.
	for !strings.Contains(p.Log.String(), "Ctrl-C again stops at once") {
		if p.Exited() {
			t.Fatalf("idemkit dev exited at the first Ctrl-C with a request in flight:\n%s", p.Log.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first Ctrl-C did not say that a second one stops at once:\n%s", p.Log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if p.Exited() {
		t.Fatalf("idemkit dev did not wait for the request in flight:\n%s", p.Log.String())
	}
	second := time.Now()
	if err := syscall.Kill(p.PID(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	// A hang guard, not a speed limit (it took 1.3 to 2.2 s beside four
	// busy loops, the engine's stop among it): that the stop did not wait
	// for the request in flight is shown below, by its answer.
	select {
	case <-p.Done():
	case <-time.After(time.Minute):
		t.Fatalf("idemkit dev still running %s after the second Ctrl-C:\n%s", time.Since(second).Round(time.Millisecond), p.Log.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("idemkit dev exited %d after the second Ctrl-C:\n%s", code, p.Log.String())
	}
	if !strings.Contains(p.Log.String(), "stopped at once") {
		t.Fatalf("no line says the stop cut the requests in flight:\n%s", p.Log.String())
	}
	if err := syscall.Kill(enginePID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the engine (pid %d) outlived the second Ctrl-C: kill 0: %v", enginePID, err)
	}
	// No process serving addr is left (the supervisor's child).
	if pids := processesWith("--addr=" + addr); len(pids) > 0 {
		t.Fatalf("processes %v serving %s outlived the second Ctrl-C", pids, addr)
	}
	select {
	case code := <-answered:
		if code == 201 {
			t.Fatalf("the request in flight ran to its answer: the stop waited for it")
		}
	case <-time.After(time.Minute):
		t.Fatal("the request in flight was neither answered nor cut")
	}
}

// processesWith returns the pids whose command line holds arg (Linux's
// /proc; nil where there is none).
func processesWith(arg string) []int {
	dirs, _ := os.ReadDir("/proc")
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err == nil && slices.Contains(strings.Split(string(b), "\x00"), arg) {
			pids = append(pids, pid)
		}
	}
	return pids
}
