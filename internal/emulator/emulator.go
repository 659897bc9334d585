package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/idemkit/idemkit/internal/emulator/proc"
)

// readyTimeout bounds one start attempt's wait for ListTables to answer.
var readyTimeout = 90 * time.Second

// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
const stopGrace = 2 * time.Second

// Options configure Start.
type Options struct {
	// ToolsDir is the directory whose package.json/package-lock.json pin
	// dynalite and DynamoDB Local (the repository's tools/); they are
	// installed there with `npm ci` if missing. Unused for Moto. Default
	// "": the engines pinned by the lockfile embedded in this binary,
	// installed on first use into the user's cache directory
	// (CacheToolsDir).
	ToolsDir string
	// Progress receives one line before a first-use install into the
	// user's cache directory starts (it takes a while). Default: nil, no
	// line.
	Progress io.Writer
	// SharedDB starts DynamoDB Local with -sharedDb: one set of tables
	// whatever the credentials and region of a request (as moto and
	// dynalite behave for credentials), so any client reaches the same
	// tables. Without it DynamoDB Local keeps one set per access key and
	// region (tests simulate regions that way). Default: false.
	SharedDB bool
	// DBPath makes DynamoDB Local keep its tables in files under this
	// directory (-dbPath) instead of in memory (-inMemory), so a restart
	// on the same directory finds them again (crash tests). Unused by moto
	// and dynalite. Default "": in memory.
	DBPath string
	// Port is the loopback port to listen on (a restart on the same
	// endpoint); a port that cannot be had is an error, not retried on
	// another. Default 0: a free port.
	Port int
}

// Server is a running emulator. Stop it with Stop.
type Server struct {
	// Kind is the engine's Name (Moto, Dynalite or DynamoDBLocal).
	Kind string
	// Engine is the engine's row of the engine table.
	Engine Engine
	// Endpoint is the base URL clients use, e.g. http://127.0.0.1:40123.
	// For an engine whose Caps.Serialize is set (moto) it is the
	// serializing proxy (see the package doc).
	Endpoint string
	// Backend is the emulator's own listening URL: Endpoint, except behind
	// the serializing proxy, which it bypasses (tests of that bypass use
	// it; nothing else should).
	Backend string

	proc    *proc.Process
	out     *proc.Buffer
	proxy   *serializer
	cleanup func()
	once    sync.Once
}

// Start starts the engine named kind (a row of the engine table; any other
// name is an error matching ErrUnknownEngine) on a free loopback port (Options.Port: that one, tried once) and
// returns once it answers ListTables (bounded by ctx and 90 s; an engine
// that exits before it answers, as one whose port another process took
// does, is retried on a new port, 3 attempts; one that runs and does not
// answer within the 90 s is not). On error nothing it started is left
// running.
func Start(ctx context.Context, kind string, o Options) (*Server, error) {
	eng, err := Lookup(kind)
	if err != nil {
		return nil, err
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := o.Port, error(nil)
		if port == 0 {
			if port, err = proc.FreePort(); err != nil {
				return nil, err
			}
		}
		cmd, cleanup, err := eng.command(ctx, port, o)
		if err != nil {
			return nil, err
		}
		s := &Server{Kind: kind, Engine: eng, Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), out: &proc.Buffer{Max: 8 << 10}, cleanup: cleanup}
		cmd.Stdout, cmd.Stderr = s.out, s.out
		cmd.WaitDelay = stopGrace
		if s.proc, err = proc.Start(cmd); err != nil {
			if cleanup != nil {
				cleanup()
			}
			if bin := os.Getenv(EnvMotoServer); kind == Moto && bin != "" {
				// The variable names the executable: say so, and what
				// to do, not only the failed fork/exec of a path.
				var pe *fs.PathError
				if errors.As(err, &pe) {
					err = pe.Err
				}
				return nil, fmt.Errorf("%s names %s, which could not be started (%v): give the path of a moto_server executable, or unset it to use the moto_server on PATH", EnvMotoServer, bin, err)
			}
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, readyTimeout)
		s.Backend = s.Endpoint
		err = WaitReady(rctx, Client(s.Endpoint), s.proc.Done())
		cancel()
		if err == nil && eng.Caps.Serialize {
			var ep string
			if s.proxy, ep, err = startSerializer(s.Endpoint); err == nil {
				s.Endpoint = ep
			}
		}
		if err == nil {
			return s, nil
		}
		exited := errors.Is(err, proc.ErrExited)
		timedOut := ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded)
		s.Stop()
		if timedOut {
			// The process runs and never answered: say how long it was
			// waited for, and start it no more (RED_TEAM 494): another
			// port does not help a live process, and each attempt added
			// the whole wait again.
			return nil, fmt.Errorf("%s did not answer within %v (%v); output: %s", kind, readyTimeout, err, s.out.String())
		}
		lastErr = fmt.Errorf("%s did not become ready: %v; output: %s", kind, err, s.out.String())
		if ctx.Err() != nil || o.Port != 0 || !exited {
			break
		}
	}
	return nil, lastErr
}

// StartDev starts kind for `idemkit dev`: Start(ctx, kind, o), with a hint
// at --emulator and --dynamodb-endpoint when the emulator's program is not
// installed (moto's without java: at installing either).
func StartDev(ctx context.Context, kind string, o Options) (*Server, error) {
	s, err := Start(ctx, kind, o)
	switch {
	case kind == Moto && errors.Is(err, exec.ErrNotFound) && !HasJava():
		// Without java moto is the default: say that installing Java
		// gives dev an engine too (RED_TEAM 495).
		err = fmt.Errorf("%w; java is not on PATH either (DynamoDB Local, the default engine when it is, needs Java 11 or later): install one of the two, or pass --dynamodb-endpoint", err)
	case errors.Is(err, exec.ErrNotFound) || errors.Is(err, ErrNoJava):
		err = fmt.Errorf("%w; choose another engine with --emulator, or pass --dynamodb-endpoint", err)
	}
	return s, err
}

// DefaultDevKind is the engine `idemkit dev` starts without --emulator:
// DynamoDB Local (AWS's own engine) when java is on PATH, else moto.
func DefaultDevKind() string {
	if HasJava() {
		return DynamoDBLocal
	}
	return Moto
}

// PID is the emulator's process id (it leads its own process group).
func (s *Server) PID() int { return s.proc.PID() }

// Output returns the last 8 KiB the emulator wrote to stdout and stderr.
func (s *Server) Output() string { return s.out.String() }

// Done is closed once the emulator's process has exited, whether Stop
// ended it or it ended on its own (never, for a Server without one).
func (s *Server) Done() <-chan struct{} {
	if s.proc == nil {
		return nil
	}
	return s.proc.Done()
}

// Stop stops the proxy and the emulator's process group (SIGTERM, then
// SIGKILL after 2 s), returns once the emulator has exited, and removes
// what its start prepared. Safe to call more than once.
func (s *Server) Stop() {
	s.once.Do(func() {
		s.proxy.close()
		if s.proc != nil {
			s.proc.Stop(stopGrace)
		}
		if s.cleanup != nil {
			s.cleanup()
		}
	})
}
