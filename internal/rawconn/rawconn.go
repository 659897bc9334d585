// Package rawconn keeps the raw bytes read from each connection of an HTTP
// server, for the handlers that need what net/http does not hand them (a
// header value as received, whitespace kept).
//
// Serve with a Listener and ConnContext; a handler reaches the request's
// Conn with FromContext.
package rawconn

import (
	"context"
	"net"
	"sync"
)

// MaxBytes bounds what a Conn keeps: when more was read, the oldest bytes
// are dropped first.
const MaxBytes = 64 << 10

// Listener wraps each accepted connection in a Conn.
type Listener struct{ net.Listener }

// Accept waits for the next connection and returns it as a *Conn.
func (l Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &Conn{Conn: c}, nil
}

type connKey struct{}

// ConnContext is an http.Server's ConnContext: it makes the Conn reachable
// from the requests served on it (a connection that is not a *Conn adds
// nothing).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if rc, ok := c.(*Conn); ok {
		return context.WithValue(ctx, connKey{}, rc)
	}
	return ctx
}

// FromContext is the Conn a request was read from (a request's Context);
// ok is false when it was not served through a Listener with ConnContext.
func FromContext(ctx context.Context) (c *Conn, ok bool) {
	c, ok = ctx.Value(connKey{}).(*Conn)
	return c, ok
}

// Conn is a connection that keeps the last MaxBytes bytes read from it.
// It is safe for concurrent use.
type Conn struct {
	net.Conn
	mu  sync.Mutex
	buf []byte
}

// Read reads from the connection and keeps what it read.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.buf = append(c.buf, p[:n]...)
		if over := len(c.buf) - MaxBytes; over > 0 {
			c.buf = append(c.buf[:0], c.buf[over:]...)
		}
		c.mu.Unlock()
	}
	return n, err
}

// Use calls f with the bytes kept, oldest first, while no Read changes
// them, and then drops the first drop of them (drop is clamped to
// 0..len(kept)). f must not keep kept after it returns.
func (c *Conn) Use(f func(kept []byte) (drop int)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	drop := min(max(f(c.buf), 0), len(c.buf))
	c.buf = append(c.buf[:0], c.buf[drop:]...)
}
