package devstack

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/apierr"
	"github.com/idemkit/idemkit/internal/rawconn"
)

// Vendor error codes of the refusals net/http makes before a request reaches
// the gateway (the OpenWOP registry has rows for none of these statuses
// except 400, which gets validation_error).
const (
	codeHeadersTooLarge       = "idemkit.request_headers_too_large" // 431
	codeURITooLong            = "idemkit.uri_too_long"              // 414
	codeExpectationFailed     = "idemkit.expectation_failed"        // 417
	codeTransferEncodingUnsup = "idemkit.transfer_encoding_unsupported"
	codeHTTPRefused           = "idemkit.http_refused" // any other status net/http answers itself
)

// envelopeListener wraps the dev server's listener so that the responses
// net/http writes by itself — a request it cannot parse never reaches a
// handler: headers over the limit (431; 414 when the request line alone
// is, which devListener tells apart), a NUL or other invalid byte in a
// header, a malformed path escape or a missing Host (400), an unsupported
// Transfer-Encoding (501), an Expect it cannot meet (417) — carry the v2
// error envelope {error, message} as application/json, like every other
// error of the host, instead of net/http's plain text.
//
// How: net/http's own refusals are recognised by what net/http writes, and
// nothing else is touched: a refusal before any handler runs is one Write
// of a status line >= 400 whose head is exactly net/http's fixed
// "Content-Type: text/plain; charset=utf-8" and "Connection: close" (a
// handler's response always has a Date header); an unmet Expect is a 417
// whose head is only Connection, Date and "Content-Length: 0" (the gateway
// never answers 417). Everything a handler wrote — an XML error answer,
// a bodiless error, any status, with its X-Request-ID, key echo and replay
// headers — passes through byte for byte.
type envelopeListener struct{ net.Listener }

func (l envelopeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &envelopeConn{Conn: c}, nil
}

// devListener is the dev server's listener (serve.go): each connection is an
// envelopeConn inside a rawconn.Conn (devraw.go), and the envelopeConn
// asks the rawconn.Conn whether a refused head was refused for its request
// line, so that a request target over the limit is 414
// idemkit.uri_too_long rather than 431.
type devListener struct{ net.Listener }

func (l devListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	ec := &envelopeConn{Conn: c}
	rc := &rawconn.Conn{Conn: ec}
	ec.raw = rc
	return rc, nil
}

type envelopeConn struct {
	net.Conn
	raw *rawconn.Conn // the connection that reads through this one, if any
	// state is the connection's http.ConnState plus one (devConnState; 0:
	// not known); timedOut is set once a head cut short was answered 408
	// (Read).
	state    atomic.Int32
	timedOut atomic.Bool
}

func (c *envelopeConn) Write(p []byte) (int, error) {
	if c.timedOut.Load() {
		return len(p), nil // the 408 was the answer
	}
	if out, ok := envelopeFor(p, c.raw != nil && c.raw.InRequestLine()); ok {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// envelopeFor returns the envelope response replacing p when p is a whole
// error response net/http wrote by itself. inRequestLine says that the
// head being read when net/http refused it ended inside its request line:
// net/http's 431 is then a request target over the limit, answered 414
// (RFC 9110 §15.5.15).
func envelopeFor(p []byte, inRequestLine bool) ([]byte, bool) {
	if !bytes.HasPrefix(p, []byte("HTTP/1.")) || len(p) < 12 || p[8] != ' ' {
		return nil, false
	}
	status, err := strconv.Atoi(string(p[9:12]))
	if err != nil || status < 400 || status > 599 {
		return nil, false
	}
	end := bytes.Index(p, []byte("\r\n\r\n"))
	if end < 0 {
		return nil, false
	}
	if !refusedByNetHTTP(status, p[:end]) {
		return nil, false
	}
	var e *apierr.Error
	switch {
	case status == http.StatusBadRequest:
		e = apierr.New(status, apierr.CodeValidation, "the request is not valid HTTP (malformed request line, path escape or header)")
	case status == http.StatusRequestHeaderFieldsTooLarge && inRequestLine:
		status = http.StatusRequestURITooLong
		e = apierr.New(status, codeURITooLong, "the request line (method, target and version) exceeds %d bytes", rawconn.MaxHeadBytes)
	case status == http.StatusRequestHeaderFieldsTooLarge:
		e = apierr.New(status, codeHeadersTooLarge, "the request headers exceed %d bytes", rawconn.MaxHeadBytes)
	case status == http.StatusExpectationFailed:
		e = apierr.New(status, codeExpectationFailed, "the only Expect value supported is 100-continue")
	case status == http.StatusNotImplemented:
		e = apierr.New(status, codeTransferEncodingUnsup, "the request's Transfer-Encoding is not supported")
	default:
		e = apierr.New(status, codeHTTPRefused, "%s", http.StatusText(status))
	}
	return envelopeResponse(status, e), true
}

// envelopeResponse is a whole response of status carrying e's envelope,
// closing the connection.
func envelopeResponse(status int, e *apierr.Error) []byte {
	body := e.Body()
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nOpenWOP-Version: %s\r\nConnection: close\r\n\r\n",
		status, http.StatusText(status), len(body), settings.ProtocolVersion)
	b.Write(body)
	return b.Bytes()
}

// refusedByNetHTTP reports whether head (the status line and headers, no
// final blank line) is a refusal net/http wrote by itself: its fixed head
// before any handler runs, or its bodiless 417 to an unmet Expect.
func refusedByNetHTTP(status int, head []byte) bool {
	lines := strings.Split(string(head), "\r\n")[1:]
	if len(lines) == 2 && lines[0] == "Content-Type: text/plain; charset=utf-8" && lines[1] == "Connection: close" {
		return true
	}
	if status != http.StatusExpectationFailed || len(lines) != 3 {
		return false
	}
	seen := 0
	for _, l := range lines {
		switch {
		case l == "Connection: close", l == "Content-Length: 0", strings.HasPrefix(l, "Date: "):
			seen++
		}
	}
	return seen == 3
}

// codeRequestTimeout is the vendor code of the 408 a head cut short gets
// (the registry has no row for 408).
const codeRequestTimeout = "idemkit.request_timeout"

// requestTimeoutWrite bounds the write of that 408: the connection's own
// write deadline may be a past request's.
const requestTimeoutWrite = 5 * time.Second

// devConnState is the dev server's http.Server ConnState (serve.go), next
// the one it had: it records each connection's state on its envelopeConn,
// so that a read timing out can tell a head being read (the connection new
// or idle: no request is being served) from a request being served.
func devConnState(next func(net.Conn, http.ConnState)) func(net.Conn, http.ConnState) {
	return func(c net.Conn, s http.ConnState) {
		if rc, ok := c.(*rawconn.Conn); ok {
			if ec, ok := rc.Conn.(*envelopeConn); ok {
				ec.state.Store(int32(s) + 1)
			}
		}
		if next != nil {
			next(c, s)
		}
	}
}

// Read reads from the connection. A read that times out while no request
// is being served and part of a request head has been read (the client
// stopped mid-head: the server's ReadHeaderTimeout ended the wait) is
// answered 408 idemkit.request_timeout with the envelope before net/http
// closes the connection, which it would otherwise close without a byte;
// whatever net/http writes after it is dropped (RED_TEAM 360). A
// connection idle between requests closes without an answer, as HTTP lets
// it.
func (c *envelopeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	var ne net.Error
	if err != nil && errors.As(err, &ne) && ne.Timeout() && c.raw != nil {
		st := c.state.Load() // 0: no devConnState, the state is not known
		if (st == int32(http.StateNew)+1 || st == int32(http.StateIdle)+1) && c.raw.InHead() && c.timedOut.CompareAndSwap(false, true) {
			_ = c.Conn.SetWriteDeadline(time.Now().Add(requestTimeoutWrite))
			_, _ = c.Conn.Write(envelopeResponse(http.StatusRequestTimeout,
				apierr.New(http.StatusRequestTimeout, codeRequestTimeout, "the request head was not received in time")))
		}
	}
	return n, err
}
