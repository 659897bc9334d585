package devstack

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

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
}

func (c *envelopeConn) Write(p []byte) (int, error) {
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
	body := e.Body()
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nOpenWOP-Version: %s\r\nConnection: close\r\n\r\n",
		status, http.StatusText(status), len(body), settings.ProtocolVersion)
	b.Write(body)
	return b.Bytes(), true
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
