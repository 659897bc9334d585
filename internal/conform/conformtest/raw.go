package conformtest

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
)

// HTTPTest starts s on a loopback httptest server that also lets it see the
// raw Idempotency-Key header lines, which Go's HTTP server trims before any
// handler runs: only served this way does the ERP policy's "leading/trailing
// whitespace rejected" rule hold (httptest.NewServer(s) serves every other
// rule). The server is closed at the caller's Close.
func HTTPTest(s *Server) *httptest.Server {
	srv := httptest.NewUnstartedServer(s)
	srv.Listener = rawListener{srv.Listener}
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if rc, ok := c.(*rawConn); ok {
			return context.WithValue(ctx, rawConnKey{}, rc)
		}
		return ctx
	}
	srv.Start()
	return srv
}

type rawConnKey struct{}

type rawListener struct{ net.Listener }

func (l rawListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &rawConn{Conn: c}, nil
}

// maxRaw bounds what a rawConn keeps of what it read.
const maxRaw = 64 << 10

// rawConn remembers the first bytes read from the connection.
type rawConn struct {
	net.Conn
	mu  sync.Mutex
	buf []byte
}

func (c *rawConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	if room := maxRaw - len(c.buf); room > 0 {
		c.buf = append(c.buf, p[:min(n, room)]...)
	}
	c.mu.Unlock()
	return n, err
}

// rawKeyWhitespace reports whether an Idempotency-Key line read on r's
// connection had whitespace around its value (beyond the one space after
// the colon). Go's client never writes one, so on a reused connection a
// line of an earlier request never is one either.
func rawKeyWhitespace(r *http.Request) bool {
	c, ok := r.Context().Value(rawConnKey{}).(*rawConn)
	if !ok {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, line := range bytes.Split(c.buf, []byte("\r\n")) {
		name, v, ok := bytes.Cut(line, []byte(":"))
		if !ok || !bytes.EqualFold(bytes.TrimSpace(name), []byte("Idempotency-Key")) {
			continue
		}
		v = bytes.TrimPrefix(v, []byte(" "))
		if len(v) > 0 && (isWS(v[0]) || isWS(v[len(v)-1])) {
			return true
		}
	}
	return false
}

func isWS(b byte) bool { return b == ' ' || b == '\t' }
