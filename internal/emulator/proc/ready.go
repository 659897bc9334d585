package proc

import (
	"context"
	"errors"
	"fmt"
	"net"
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
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
