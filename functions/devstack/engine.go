package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	hostsettings "github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/emulator"
)

// devEngine is the DynamoDB engine the stack runs on: one dev started, or
// the endpoint Options.Endpoint gives (behind a serializing proxy when it
// is a moto server).
type devEngine struct {
	// engine names it: a name of the engine table, or "external".
	engine string
	// endpoint is where the stack reaches it.
	endpoint string
	// streams: the engine has DynamoDB Streams (the engine table's
	// capability; for an external endpoint, emulator.HasStreams).
	streams bool
	// stop stops what startEngine started (the engine, or the proxy).
	stop func()
	// exited is closed when the engine dev started exits, by stop or on
	// its own (nil, never closed, for an external endpoint); pid and
	// output are that engine's.
	exited <-chan struct{}
	pid    int
	output func() string
}

// errEngineExited is dev's result when the engine it started exited
// under it (RED_TEAM 499): its tables were in that process's memory, so
// no retry of the stack's requests can succeed.
type errEngineExited struct {
	engine string
	pid    int
	output string
}

func (e errEngineExited) Error() string {
	msg := fmt.Sprintf("the DynamoDB engine (%s, pid %d) exited while dev was serving; its tables went with it: start idemkit dev again", e.engine, e.pid)
	if out := strings.TrimSpace(e.output); out != "" {
		// Its last lines: a crash's message comes last, a banner first.
		if lines := strings.Split(out, "\n"); len(lines) > 4 {
			out = strings.Join(lines[len(lines)-4:], "\n")
		}
		if len(out) > 600 {
			out = "…" + out[len(out)-600:]
		}
		msg += "; its last output:\n" + out
	}
	return msg
}

// startEngine starts the DynamoDB engine of o, or reaches o.Endpoint.
func startEngine(ctx context.Context, o Options, logger *slog.Logger) (*devEngine, error) {
	stop := func() {}
	var exited <-chan struct{}
	var pid int
	var output func() string
	endpoint, engine := o.Endpoint, o.Engine
	// streams: the engine has DynamoDB Streams (the engine table's
	// capability; an external endpoint is asked, emulator.HasStreams).
	streams := true
	if endpoint == "" {
		if engine == "" {
			engine = emulator.DefaultDevKind()
		}
		noteEndpointVarUnused(o, logger)
		if err := checkToolsVar(o.Getenv); err != nil {
			return nil, err
		}
		m, err := emulator.StartDev(ctx, engine, emulator.Options{ToolsDir: devToolsDir(o.Getenv), Progress: o.Progress, SharedDB: true})
		if err != nil {
			return nil, err
		}
		stop = m.Stop
		endpoint, streams = m.Endpoint, m.Engine.Caps.Streams
		exited, pid, output = m.Done(), m.PID(), m.Output
		logger.Info("dev: started the DynamoDB engine", slog.String("engine", engine), slog.String("endpoint", endpoint), slog.Int("pid", m.PID()))
	} else {
		engine, streams = "external", emulator.HasStreams(ctx, endpoint)
		if emulator.IsMoto(ctx, endpoint) {
			// moto checks a condition and applies the write in separate
			// steps: reached directly, concurrent lease renewals and
			// outcome writes interleave. Serialize this process's calls.
			ser, err := emulator.Serialize(endpoint)
			if err != nil {
				return nil, err
			}
			stop = ser.Close
			engine, endpoint = emulator.Moto, ser.Endpoint
			logger.Info("dev: --dynamodb-endpoint is a moto server; reaching it one request at a time", slog.String("endpoint", shownURL(o.Endpoint)))
		}
	}
	return &devEngine{engine: engine, endpoint: endpoint, streams: streams, stop: stop, exited: exited, pid: pid, output: output}, nil
}

// engineName is how the ready line names the DynamoDB engine: its Label in
// the engine table, "DynamoDB" for an external endpoint.
func engineName(kind string) string {
	if e, err := emulator.Lookup(kind); err == nil {
		return e.Label
	}
	return "DynamoDB"
}

// streamEngines names the engines of the engine table that have DynamoDB
// Streams ("dynamodb-local or moto").
func streamEngines() string {
	var names []string
	for _, e := range emulator.Engines() {
		if e.Caps.Streams {
			names = append(names, e.Name)
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// devToolsDir is the directory holding the npm-installed engines dev
// starts: $IDEMKIT_TOOLS when set; else a checkout's tools/ with the
// engines installed and the same pins as this binary (`make tools`): that
// of the source tree the binary was built from, else the first found
// upwards from the working directory; else "", which makes
// internal/emulator install the pins embedded in the binary into the
// user's cache directory on first use (a binary built with `go install`,
// or copied elsewhere, run from any directory).
func devToolsDir(getenv func(string) string) string {
	if getenv != nil && getenv(envTools) != "" {
		return getenv(envTools)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		if d := filepath.Join(filepath.Dir(file), "..", "..", "tools"); emulator.Installed(d) {
			return d
		}
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if t := filepath.Join(d, "tools"); emulator.Installed(t) {
				return t
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return ""
}

// envTools names the engines' directory dev starts DynamoDB Local and
// dynalite from (devToolsDir).
const envTools = "IDEMKIT_TOOLS"

// checkToolsVar refuses $IDEMKIT_TOOLS naming a directory that is not
// laid out as the clone's tools/ (its package-lock.json pins the
// engines): npm would otherwise be run in whatever directory it names,
// and its usage error be all dev says (RED_TEAM 497). It is checked
// whichever engine starts, as every setting dev reads is.
func checkToolsVar(getenv func(string) string) error {
	if getenv == nil {
		return nil
	}
	dir := getenv(envTools)
	if dir == "" {
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, "package-lock.json")); err != nil {
		return fmt.Errorf("%s=%s: no package-lock.json there: it names a directory laid out as the clone's tools/ (package.json and package-lock.json; the engines are installed there if missing); unset it to use the clone's tools/ or your user cache", envTools, dir)
	}
	return nil
}

// noteEndpointVarUnused logs that DYNAMODB_ENDPOINT, which stands for
// Options.Endpoint when neither Endpoint nor Engine is given, is not used:
// an Engine given (`idemkit dev --emulator`) starts an engine of its own
// whatever the variable says.
func noteEndpointVarUnused(o Options, logger *slog.Logger) {
	if o.Engine == "" || o.Getenv == nil {
		return
	}
	if v := strings.TrimSpace(o.Getenv(hostsettings.EnvDynamoDBEndpoint)); v != "" {
		logger.Info("dev: "+hostsettings.EnvDynamoDBEndpoint+" is not used: --emulator starts an engine of its own", slog.String("engine", o.Engine), slog.String("endpoint", shownURL(v)))
	}
}

// StartEngine starts the DynamoDB engine o names (Options.Engine, default
// as Start chooses) on its own, for a process that runs one stack after
// another on it: the restart supervisor of `idemkit dev
// --conformance-seams`, whose stacks reach it as Options.Endpoint. It
// returns the engine's endpoint and the function that stops it.
func StartEngine(ctx context.Context, o Options) (endpoint string, stop func(), err error) {
	engine := o.Engine
	if engine == "" {
		engine = emulator.DefaultDevKind()
	}
	if o.Logger != nil {
		noteEndpointVarUnused(o, o.Logger)
	}
	if err := checkToolsVar(o.Getenv); err != nil {
		return "", nil, err
	}
	m, err := emulator.StartDev(ctx, engine, emulator.Options{ToolsDir: devToolsDir(o.Getenv), Progress: o.Progress, SharedDB: true})
	if err != nil {
		return "", nil, err
	}
	if o.Logger != nil {
		o.Logger.Info("dev: started the DynamoDB engine", slog.String("engine", engine), slog.String("endpoint", m.Endpoint), slog.Int("pid", m.PID()))
	}
	return m.Endpoint, m.Stop, nil
}

// shownURL is an endpoint as dev prints or logs it: a password given in
// it (http://user:PASS@host, which the SDK does not send) replaced by
// "xxxxx" (RED_TEAM 434).
func shownURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}
