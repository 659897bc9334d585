package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idemkit/idemkit/functions/devstack"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/internal/emulator/proc"
)

// envSupervised marks a `idemkit dev` process started by the restart
// supervisor (superviseDev), "1": its durability seam may kill it. "0"
// runs `idemkit dev --conformance-seams` in this process with no
// supervisor (the kill modes answer 409; the command's in-process tests).
const envSupervised = "IDEMKIT_DEV_SUPERVISED"

// envSupervisedKeys hands the supervisor's API keys (KEY=TENANT, one a
// line) to the `idemkit dev` it starts, which takes them as its --api-key
// values and removes the variable from its environment.
const envSupervisedKeys = "IDEMKIT_DEV_SUPERVISED_API_KEYS"

// supervisedKeys returns the API keys the supervisor handed this process
// (envSupervisedKeys) and removes the variable; nil when it set none.
func supervisedKeys() []string {
	v, ok := os.LookupEnv(envSupervisedKeys)
	if !ok {
		return nil
	}
	_ = os.Unsetenv(envSupervisedKeys)
	if v == "" {
		return nil
	}
	return strings.Split(v, "\n")
}

// The restart supervisor's timing, two terms of the recovery bound the
// durability seam declares (devstack.Restart).
const (
	superviseRestartDelay = 500 * time.Millisecond
	superviseBootBudget   = 60 * time.Second
)

// supervisedRestart is the devstack.Restart of a process the supervisor
// started: Kill is SIGKILL to itself, no shutdown of any kind.
func supervisedRestart() *devstack.Restart {
	return &devstack.Restart{Delay: superviseRestartDelay, BootBudget: superviseBootBudget, Kill: func() {
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			_ = p.Kill()
		}
	}}
}

// superviseDev runs `idemkit dev --conformance-seams` as a restart
// supervisor, which the durability seam's kill modes need: the engine
// (unless --dynamodb-endpoint names one) and the API keys belong to this
// process, and the stack runs in a child `idemkit dev` on the same
// address, tables and keys. A child that dies by a signal (the seam's
// SIGKILL) is started again after superviseRestartDelay and must serve
// within superviseBootBudget; a child that exits by itself ends the
// supervisor with its status. SIGINT or SIGTERM stops the child, then the
// engine.
func superviseDev(ctx context.Context, fs *flag.FlagSet, o devstack.Options, stdout, stderr io.Writer) int {
	addr := o.Addr
	if host, port, err := net.SplitHostPort(addr); err == nil && port == "0" {
		// Every child listens on the same port: choose it once, below
		// the ephemeral range, so that no outgoing connection takes it
		// while a killed child is being started again.
		p, err := proc.FreePort()
		if err != nil {
			fmt.Fprintf(stderr, "idemkit dev: %v\n", err)
			return 1
		}
		addr = net.JoinHostPort(host, strconv.Itoa(p))
	}
	endpoint := o.Endpoint
	if endpoint == "" {
		ep, stop, err := devstack.StartEngine(ctx, o)
		if err != nil && ctx.Err() != nil {
			// Ctrl-C while the engine started: a stop, as plain dev's
			// (RED_TEAM 498); StartEngine stopped what it had started.
			fmt.Fprintln(stderr, "idemkit dev: interrupted while starting; stopped what it had started")
			return 0
		}
		if err != nil {
			fmt.Fprintf(stderr, "idemkit dev: %v\n", err)
			return 1
		}
		defer stop()
		endpoint = ep
	}
	keys := o.APIKeys
	if len(keys) == 0 {
		for _, t := range []string{"demo-a", "demo-b"} {
			k := apikeys.NewAPIKey()
			keys = append(keys, k+"="+t)
			fmt.Fprintf(stdout, "demo API key for tenant %s: %s\n", t, k)
		}
	}
	args := []string{"dev", "--addr=" + addr, "--dynamodb-endpoint=" + endpoint}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "addr", "emulator", "dynamodb-endpoint", "api-key":
			return
		}
		args = append(args, "--"+f.Name+"="+f.Value.String())
	})
	// The keys go to the child in its environment, never on its command
	// line, which every user of the machine reads in the process list
	// (RED_TEAM 496); a process's environment is its user's to read.
	keyEnv := envSupervisedKeys + "=" + strings.Join(keys, "\n")
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "idemkit dev: %v\n", err)
		return 1
	}
	for restarts := 0; ; restarts++ {
		cmd := exec.Command(exe, args...)
		cmd.Stdout, cmd.Stderr = stdout, stderr
		cmd.Env = append(os.Environ(), envSupervised+"=1", keyEnv)
		p, err := proc.Start(cmd)
		if err != nil {
			fmt.Fprintf(stderr, "idemkit dev: %v\n", err)
			return 1
		}
		if restarts > 0 && !serving(ctx, "http://"+addr, p, superviseBootBudget) {
			p.Stop(10 * time.Second)
			if ctx.Err() != nil {
				return 0
			}
			fmt.Fprintf(stderr, "idemkit dev: the restarted stack did not serve within %s\n", superviseBootBudget)
			return 1
		}
		select {
		case <-ctx.Done():
			// The child stops as dev does: it gives its requests in
			// flight their grace, and a second Ctrl-C here, passed on
			// as a second signal, stops it at once.
			go func() {
				select {
				case <-secondInterrupt(ctx):
					_ = syscall.Kill(-p.PID(), syscall.SIGTERM)
				case <-p.Done():
				}
			}()
			p.Stop(15 * time.Second)
			return 0
		case <-p.Done():
		}
		if code := cmd.ProcessState.ExitCode(); code != -1 {
			return code // exited by itself
		}
		fmt.Fprintf(stderr, "idemkit dev: the stack was killed (%s); starting it again\n", cmd.ProcessState)
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(superviseRestartDelay):
		}
	}
}

// serving polls base's discovery document until it answers 200 (true),
// or the budget, ctx or the process ends (false).
func serving(ctx context.Context, base string, p *proc.Process, budget time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/.well-known/openwop", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-p.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}
