package devstack

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/idemkit/idemkit/internal/emulator"
)

// dev runs the stack of s until ctx ends: once it serves, it records what
// s reports and closes ready. It is the root the stack is composed in: the
// engine (startEngine), the tables and settings (devTables), the wired
// handlers (newStack), serving them (serve).
func dev(ctx context.Context, o Options, stdout io.Writer, logger *slog.Logger, s *Stack, ready chan<- struct{}) (err error) {
	start := time.Now()
	stdout = &syncWriter{w: stdout}
	ln, err := net.Listen("tcp", o.Addr) // fail fast on a taken port
	if err != nil {
		return err
	}
	defer ln.Close()

	eng, err := startEngine(ctx, o, logger)
	if err != nil {
		return err
	}
	defer eng.stop()
	if eng.exited != nil {
		// The engine dev started exits under it: stop the stack, and
		// say so (RED_TEAM 499), rather than serve 503s no retry cures.
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		go func() {
			select {
			case <-eng.exited:
				cancel(errEngineExited{engine: eng.engine, pid: eng.pid, output: eng.output()})
			case <-ctx.Done():
			}
		}()
		defer func() {
			if e := (errEngineExited{}); errors.As(context.Cause(ctx), &e) {
				err = e
			}
		}()
	}
	// tw wakes a table's stream poller after the stack wrote to it.
	tw := newTableWaker()
	client := emulator.Client(eng.endpoint, watchStore, tw.option, keepConns)
	names, env, err := devTables(ctx, client, o, eng.endpoint)
	if err != nil {
		return err
	}
	st, err := newStack(ctx, o, stdout, logger, baseURL(ln), client, tw, eng, env)
	if err != nil {
		return err
	}
	waiting := func() { s.waitingOnce.Do(func() { close(s.waiting) }) }
	cut := func() { s.cut.Store(true) }
	return st.serve(ctx, s.now, waiting, cut, ln, start, func() {
		s.url, s.endpoint, s.keys, s.tables = baseURL(ln), eng.endpoint, st.o.APIKeys, names
		close(ready)
	})
}
