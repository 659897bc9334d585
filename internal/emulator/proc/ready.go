package proc

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// ErrExited is returned by Poll when the process it waits for exits first.
var ErrExited = errors.New("process exited")

// Poll calls probe every interval until it returns nil (Poll returns nil),
// ctx ends (Poll returns ctx's error, annotated with probe's last error), or
// exited closes (Poll returns ErrExited; a nil exited never closes). probe
// is called at once, and bounds each attempt itself.
func Poll(ctx context.Context, interval time.Duration, exited <-chan struct{}, probe func(context.Context) error) error {
	for {
		err := probe(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-exited:
			return ErrExited
		case <-time.After(interval):
		}
	}
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
// Another process may take it before the caller binds it: servers started on
// it are retried on a new port when they do not come up.
//
// The port is drawn at random below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), where no listener asking for port 0 (a
// test's httptest server, another engine's proxy) and no outgoing
// connection is ever given it: an engine that takes seconds to bind its
// port (a JVM) does not lose it to them meanwhile, and its readiness probe
// never reaches someone else's server. Where the range leaves no room
// below it, the kernel chooses (port 0), as before.
func FreePort() (int, error) {
	if lo, hi, ok := belowEphemeral(); ok {
		for range 64 {
			port := lo + rand.IntN(hi-lo)
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			if err != nil {
				continue // in use
			}
			l.Close()
			return port, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// belowEphemeral is the span FreePort draws from: the up to 12,000 ports
// just below the start of the ephemeral range, never below 10,000.
func belowEphemeral() (lo, hi int, ok bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, false
	}
	start, err := strconv.Atoi(f[0])
	if err != nil {
		return 0, 0, false
	}
	hi = start
	lo = max(hi-12000, 10000)
	return lo, hi, hi-lo >= 1000
}
