// Package rawconn hands each request of an HTTP/1.1 server the header
// block it was read with, as received (a header value with its whitespace,
// a folded line), which net/http does not hand its handlers.
//
// Guarantee: the Head a handler gets (HeadOf) is the header block of
// exactly the request it is serving, never one of another request on the
// same connection (a pipelined one) nor bytes of a body that look like
// one. The connection (Conn) follows the request boundaries as it is read —
// each header block queued, each body skipped by its Content-Length or
// chunked framing as net/http frames it — and every request served
// (Handler) takes the next block, in order, checked against the request
// line and framing net/http parsed. When the framing cannot be followed
// (malformed, over a bound) or a check fails, no block is guessed: HeadOf
// is ErrUntracked for that request and every later one on the connection,
// which is closed after the answer.
//
// Serve with a Listener and Configure (or ConnContext and Handler by hand,
// with http.Server.DisableGeneralOptionsHandler so that "OPTIONS *"
// reaches the handler too).
package rawconn

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
)

// ErrNotRaw: the request was not served through a Listener and Handler.
var ErrNotRaw = errors.New("rawconn: the request was not served through a rawconn Listener and Handler")

// ErrUntracked: the request's header block as received is not known — its
// connection's framing could not be followed (malformed, over a bound), or
// the block did not match the request net/http parsed.
var ErrUntracked = errors.New("rawconn: the request's header block as received is not known")

// ErrFolded: a header value is folded onto a following line (obsolete line
// folding, RFC 9112 section 5.2).
var ErrFolded = errors.New("rawconn: a header value is folded across lines")

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

// Configure makes srv hand its handler each request's Head: ConnContext
// (after srv's own), Handler around srv.Handler (nil: http.DefaultServeMux)
// and DisableGeneralOptionsHandler, so that every request reaches the
// handler. Serve it on a Listener. It also lowers srv.MaxHeaderBytes so
// that net/http itself refuses (431) a header block longer than
// MaxHeadBytes, the longest a Conn keeps: every request that reaches the
// handler then has its Head, unless its connection's framing was lost.
func Configure(srv *http.Server) {
	// net/http reads a header block up to MaxHeaderBytes plus 4096 bytes
	// of its buffer's slack (its initialReadLimitSize) before it refuses.
	if srv.MaxHeaderBytes <= 0 || srv.MaxHeaderBytes > MaxHeadBytes-netHTTPHeaderSlack {
		srv.MaxHeaderBytes = MaxHeadBytes - netHTTPHeaderSlack
	}
	prev := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if prev != nil {
			ctx = prev(ctx, c)
		}
		return ConnContext(ctx, c)
	}
	srv.Handler = Handler(srv.Handler)
	srv.DisableGeneralOptionsHandler = true
}

// Conn is a connection that follows the requests read from it and keeps
// the header block of each until it is served (Next). It is safe for
// concurrent use.
type Conn struct {
	net.Conn
	mu sync.Mutex
	t  tracker
}

// Read reads from the connection and tracks what it read.
func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.t.feed(p[:n])
		c.mu.Unlock()
	}
	return n, err
}

// InRequestLine reports whether what was read from c ends inside a
// request line that has no line end yet, or whose length lost the
// framing: a refusal of the request head being read is then about its
// request line (414), not its header fields (431).
func (c *Conn) InRequestLine() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t.inRequestLine()
}

// InHead reports whether what was read from c ends inside a header block:
// a request line or header lines read, and not yet the empty line that
// ends them (a client that stopped sending mid-head).
func (c *Conn) InHead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t.longLine || c.t.state == stHead && len(c.t.buf) > 0
}

// Next removes and returns the header block of the oldest request read
// from c and not yet taken: ErrUntracked when there is none (the framing
// was lost before it).
func (c *Conn) Next() (*Head, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.t.next()
	if !ok {
		c.t.lose()
		return nil, ErrUntracked
	}
	return h, nil
}

// untrack stops the tracking of c for good (a block did not match its
// request: the order can no longer be trusted).
func (c *Conn) untrack() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t.lose()
	for ok := true; ok; _, ok = c.t.next() {
	}
}

type headKey struct{}

type headResult struct {
	head *Head
	err  error
}

// Handler serves h with each request's Head (HeadOf): every request takes
// the next header block of its Conn, exactly once and in order, before h
// runs, whatever h does with it. A request whose block is not known
// (ErrUntracked) is answered with "Connection: close", so that no later
// request of that connection is served without its block.
func Handler(h http.Handler) http.Handler {
	if h == nil {
		h = http.DefaultServeMux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res := headResult{err: ErrNotRaw}
		if c, ok := FromContext(r.Context()); ok {
			res.head, res.err = c.Next()
			if res.err == nil && !res.head.matches(r) {
				c.untrack()
				res = headResult{err: ErrUntracked}
			}
			if res.err != nil {
				w.Header().Set("Connection", "close")
			}
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), headKey{}, res)))
	})
}

// HeadOf is the header block of the request whose Context ctx is, as
// received: ErrNotRaw when it was not served through a Listener and
// Handler, ErrUntracked when it is not known.
func HeadOf(ctx context.Context) (*Head, error) {
	res, ok := ctx.Value(headKey{}).(headResult)
	if !ok {
		return nil, ErrNotRaw
	}
	return res.head, res.err
}
