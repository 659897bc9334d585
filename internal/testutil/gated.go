package testutil

import (
	"io"
	"net"
	"sync"
	"testing"
)

// GatedListener is a loopback listener that accepts a connection only
// once the test lets it (DialWritten, after writing what the connection
// is to carry): a server's read of it, and the read's timeout, start with
// those bytes there. A test of a short server timeout (ReadTimeout,
// ReadHeaderTimeout) then does not depend on how soon a loaded machine
// runs the client between its dial and its write: on a plain listener a
// pause of 150 ms there timed out the read of a request never begun, and
// the server closed the connection without the answer under test.
type GatedListener struct {
	net.Listener
	allow  chan struct{}
	open   chan struct{}
	closed chan struct{}
	once   sync.Once
	opened sync.Once
}

// NewGatedListener listens on a free loopback port.
func NewGatedListener(t testing.TB) *GatedListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return &GatedListener{Listener: ln, allow: make(chan struct{}), open: make(chan struct{}), closed: make(chan struct{})}
}

// DialWritten dials l, writes raw on the connection, and then lets l
// accept it (it returns once the server's Accept took it).
func (l *GatedListener) DialWritten(t testing.TB, raw string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, raw); err != nil {
		conn.Close()
		t.Fatal(err)
	}
	select {
	case l.allow <- struct{}{}:
	case <-l.open: // accepted as any other
	case <-l.closed:
		conn.Close()
		t.Fatal("the gated listener was closed before it accepted the connection")
	}
	return conn
}

// Open lets l accept every later connection at once, as a plain
// listener does (a client that writes when it likes, after the gated
// ones).
func (l *GatedListener) Open() { l.opened.Do(func() { close(l.open) }) }

// Accept waits until DialWritten lets it (or Open), then accepts.
func (l *GatedListener) Accept() (net.Conn, error) {
	select {
	case <-l.allow:
	case <-l.open:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	return l.Listener.Accept()
}

// Close closes the listener and ends a waiting Accept.
func (l *GatedListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}
