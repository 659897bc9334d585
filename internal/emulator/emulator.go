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
	Moto          = "moto"
	Dynalite      = "dynalite"
	DynamoDBLocal = "dynamodb-local"
)

// Kinds are the emulator kinds Start accepts, in the order tests run them.
var Kinds = []string{DynamoDBLocal, Moto, Dynalite}

func known(kind string) bool {
	for _, k := range Kinds {
		if k == kind {
			return true
		}
	}
	return false
}

// readyTimeout bounds one start attempt's wait for ListTables to answer.
const readyTimeout = 90 * time.Second

// stopGrace is how long Stop waits after SIGTERM before SIGKILL.
const stopGrace = 2 * time.Second

// Options configure Start.
type Options struct {
	// ToolsDir is the directory whose package.json/package-lock.json pin
	// dynalite and DynamoDB Local (the repository's tools/). Required for
	// Dynalite and DynamoDBLocal, unused for Moto. Default: none.
	ToolsDir string
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
	// Kind is Moto, Dynalite or DynamoDBLocal.
	Kind string
	// Endpoint is the base URL clients use, e.g. http://127.0.0.1:40123.
	// For moto it is the serializing proxy (see the package doc).
	Endpoint string
	// Backend is the emulator's own listening URL: Endpoint, except for
	// moto, where it bypasses the serializing proxy (tests of that
	// bypass use it; nothing else should).
	Backend string

	proc  *proc.Process
	out   *proc.Buffer
	proxy *serializer
	once  sync.Once
}

// Start starts an emulator of kind on a free loopback port (Options.Port: that one, tried once) and returns
// once it answers ListTables (bounded by ctx and 90 s per attempt; a port
// lost to another process is retried on a new one, 3 attempts). On error
// nothing it started is left running.
func Start(ctx context.Context, kind string, o Options) (*Server, error) {
	if !known(kind) {
		return nil, fmt.Errorf("unknown emulator kind %q (want dynamodb-local, moto or dynalite)", kind)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := o.Port, error(nil)
		if port == 0 {
			if port, err = proc.FreePort(); err != nil {
				return nil, err
			}
		}
		cmd, jarDir, err := command(ctx, kind, port, o)
		if err != nil {
			return nil, err
		}
		s := &Server{Kind: kind, Endpoint: "http://127.0.0.1:" + strconv.Itoa(port), out: &proc.Buffer{Max: 8 << 10}}
		cmd.Stdout, cmd.Stderr = s.out, s.out
		if kind == DynamoDBLocal {
			cmd.Dir = jarDir
		}
		cmd.WaitDelay = stopGrace
		if s.proc, err = proc.Start(cmd); err != nil {
			return nil, err
		}
		rctx, cancel := context.WithTimeout(ctx, readyTimeout)
		s.Backend = s.Endpoint
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
		if ctx.Err() != nil || o.Port != 0 {
			break
		}
	}
	return nil, lastErr
}

// StartDev starts kind for `idemkit dev`: Start(ctx, kind, o), with a hint
// at --emulator and --dynamodb-endpoint when the emulator's program is not
// installed.
func StartDev(ctx context.Context, kind string, o Options) (*Server, error) {
	s, err := Start(ctx, kind, o)
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, ErrNoJava) {
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

// command returns the emulator command line for kind listening on port,
// and for DynamoDBLocal the directory it must run in.
func command(ctx context.Context, kind string, port int, o Options) (*exec.Cmd, string, error) {
	p := strconv.Itoa(port)
	switch kind {
	case Moto:
		bin, err := exec.LookPath("moto_server")
		if err != nil {
			return nil, "", fmt.Errorf("moto_server is not on PATH (pip install 'moto[server]'): %w", err)
		}
		return exec.Command(bin, "-H", "127.0.0.1", "-p", p), "", nil
	case DynamoDBLocal:
		java, err := exec.LookPath("java")
		if err != nil {
			return nil, "", fmt.Errorf("%w: %w", ErrNoJava, err)
		}
		dir, err := dynamoDBLocalDir(ctx, o.ToolsDir)
		if err != nil {
			return nil, "", err
		}
		// -XX:+UseSerialGC and -XX:TieredStopAtLevel=1: one GC thread and
		// the quick compiler only. Measured on two busy cores: ready in
		// 3.3 s on 1.3 s of CPU, against 6.0 s on 2.0 s of CPU without.
		args := []string{"-Djava.library.path=DynamoDBLocal_lib", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
			"-jar", "DynamoDBLocal.jar", "-port", p}
		if o.DBPath != "" {
			args = append(args, "-dbPath", o.DBPath)
		} else {
			args = append(args, "-inMemory")
		}
		if o.SharedDB {
			args = append(args, "-sharedDb")
		}
		return exec.Command(java, args...), dir, nil
	}
	bin, err := dynaliteBin(ctx, o.ToolsDir)
	if err != nil {
		return nil, "", err
	}
	return exec.Command(bin, "--host", "127.0.0.1", "--port", p,
		"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0"), "", nil
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
