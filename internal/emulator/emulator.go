package emulator

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/idemkit/idemkit/internal/emulator/proc"
)

// Emulator kinds accepted by Start.
const (
	Moto     = "moto"
	Dynalite = "dynalite"
)

// readyTimeout bounds one start attempt's wait for ListTables to answer.
const readyTimeout = 90 * time.Second

// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
const stopGrace = 2 * time.Second

// Options configure Start.
type Options struct {
	// ToolsDir is the directory whose package.json/package-lock.json pin
	// dynalite (the repository's tools/). Required for Dynalite, unused for
	// Moto. Default: none.
	ToolsDir string
}

// Server is a running emulator. Stop it with Stop.
type Server struct {
	// Kind is Moto or Dynalite.
	Kind string
	// Endpoint is the base URL clients use, e.g. http://127.0.0.1:40123.
	// For moto it is the serializing proxy (see the package doc).
	Endpoint string

	proc  *proc.Process
	out   *proc.Buffer
	proxy *serializer
	once  sync.Once
}

// Start starts an emulator of kind on a free loopback port and returns
// once it answers ListTables (bounded by ctx and 90 s per attempt; a port
// lost to another process is retried on a new one, 3 attempts). On error
// nothing it started is left running.
func Start(ctx context.Context, kind string, o Options) (*Server, error) {
	if kind != Moto && kind != Dynalite {
		return nil, fmt.Errorf("unknown emulator kind %q (want moto or dynalite)", kind)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := proc.FreePort()
		if err != nil {
			return nil, err
		}
		cmd, err := command(ctx, kind, port, o)
		if err != nil {
			return nil, err
		}
		s := &Server{Kind: kind, Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), out: &proc.Buffer{Max: 8 << 10}}
		cmd.Stdout, cmd.Stderr = s.out, s.out
		cmd.WaitDelay = stopGrace
		if s.proc, err = proc.Start(cmd); err != nil {
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, readyTimeout)
		err = WaitReady(rctx, Client(s.Endpoint), s.proc.Done())
		cancel()
		if err == nil && kind == Moto {
			var ep string
			if s.proxy, ep, err = startSerializer(s.Endpoint); err == nil {
				s.Endpoint = ep
			}
		}
		if err == nil {
			return s, nil
		}
		s.Stop()
		lastErr = fmt.Errorf("%s did not become ready: %v; output: %s", kind, err, s.out.String())
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

// StartMoto starts moto for `idemkit dev`: Start(ctx, Moto, Options{}), with
// a hint at --dynamodb-endpoint when moto_server is not installed.
func StartMoto(ctx context.Context) (*Server, error) {
	s, err := Start(ctx, Moto, Options{})
	if errors.Is(err, exec.ErrNotFound) {
		err = fmt.Errorf("%w; or pass --dynamodb-endpoint", err)
	}
	return s, err
}

// command returns the emulator command line for kind listening on port.
func command(ctx context.Context, kind string, port int, o Options) (*exec.Cmd, error) {
	p := strconv.Itoa(port)
	if kind == Moto {
		bin, err := exec.LookPath("moto_server")
		if err != nil {
			return nil, fmt.Errorf("moto_server is not on PATH (pip install 'moto[server]'): %w", err)
		}
		return exec.Command(bin, "-H", "127.0.0.1", "-p", p), nil
	}
	bin, err := dynaliteBin(ctx, o.ToolsDir)
	if err != nil {
		return nil, err
	}
	return exec.Command(bin, "--host", "127.0.0.1", "--port", p,
		"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"), nil
}

// PID is the emulator's process id (it leads its own process group).
func (s *Server) PID() int { return s.proc.PID() }

// Output returns the last 8 KiB the emulator wrote to stdout and stderr.
func (s *Server) Output() string { return s.out.String() }

// Stop stops the proxy and the emulator's process group (SIGTERM, then
// SIGKILL after 2 s) and returns once the emulator has exited. Safe to call
// more than once.
func (s *Server) Stop() {
	s.once.Do(func() {
		s.proxy.close()
		s.proc.Stop(stopGrace)
	})
}
