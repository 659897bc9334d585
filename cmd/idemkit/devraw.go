package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
)

// The dev gateway hands the api handler the Idempotency-Key header as it
// was received, like API Gateway's HTTP API, which preserves whitespace
// around a header value: Go's HTTP server trims it before any handler runs,
// and without the raw value the ERP policy's "leading or trailing
// whitespace is rejected" rule could not hold behind `idemkit dev`.
// net/http has no hook for the raw header lines, so the connection keeps
// what it read of the current request and the gateway reads the key's lines
// from there.

// maxRawRequestBytes bounds what a rawConn keeps: the oldest bytes are
// dropped first. A header block that no longer fits is not found, and the
// gateway uses the value net/http parsed.
const maxRawRequestBytes = 64 << 10

type rawConnKey struct{}

// rawListener wraps each accepted connection in a rawConn.
type rawListener struct{ net.Listener }

func (l rawListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &rawConn{Conn: c}, nil
}

// rawConnContext is the server's ConnContext: it makes the rawConn
// reachable from the requests served on it.
func rawConnContext(ctx context.Context, c net.Conn) context.Context {
	if rc, ok := c.(*rawConn); ok {
		return context.WithValue(ctx, rawConnKey{}, rc)
	}
	return ctx
}

// rawConn remembers the bytes read since the last request it was asked
// about.
type rawConn struct {
	net.Conn
	mu  sync.Mutex
	buf []byte
}

func (c *rawConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.buf = append(c.buf, p[:n]...)
		if over := len(c.buf) - maxRawRequestBytes; over > 0 {
			c.buf = append(c.buf[:0], c.buf[over:]...)
		}
		c.mu.Unlock()
	}
	return n, err
}

// rawHeader returns the values of the header name in r's header block as
// received (only the one space after the colon removed), and drops what was
// read up to the end of that block. ok is false when r was not read through
// a rawConn or its header block is not in what the connection kept.
func rawHeader(r *http.Request, name string) (values []string, ok bool) {
	c, isRaw := r.Context().Value(rawConnKey{}).(*rawConn)
	if !isRaw {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	line := []byte(r.Method + " " + r.RequestURI + " " + r.Proto + "\r\n")
	// The last request line like r's is r's: what follows the previous
	// header block (that request's body) comes before it.
	start := bytes.LastIndex(c.buf, line)
	if start < 0 {
		return nil, false
	}
	block := c.buf[start+len(line):]
	end := bytes.Index(block, []byte("\r\n\r\n"))
	if end < 0 {
		return nil, false
	}
	for _, l := range bytes.Split(block[:end], []byte("\r\n")) {
		k, v, found := bytes.Cut(l, []byte(":"))
		if found && strings.EqualFold(string(k), name) {
			values = append(values, string(bytes.TrimPrefix(v, []byte(" "))))
		}
	}
	c.buf = append(c.buf[:0], block[end+4:]...)
	return values, true
}
