package conform

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idemkit/client"
)

// rawPost sends the checked route with keyLine written verbatim as the
// Idempotency-Key header's value (Go's HTTP client trims whitespace around
// header values, so a key with surrounding whitespace has to be written by
// hand), over its own connection, closed after the answer.
func (e *env) rawPost(ctx context.Context, keyLine, body string) (*answer, error) {
	u, err := url.Parse(e.url(e.cfg.path))
	if err != nil {
		return nil, err
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	host := net.JoinHostPort(u.Hostname(), port)
	d := net.Dialer{Timeout: e.cfg.Timeout}
	var conn net.Conn
	if u.Scheme == "https" {
		td := tls.Dialer{NetDialer: &d, Config: &tls.Config{ServerName: u.Hostname()}}
		conn, err = td.DialContext(ctx, "tcp", host)
	} else {
		conn, err = d.DialContext(ctx, "tcp", host)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", e.cfg.method, e.cfg.path, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(e.cfg.Timeout))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", e.cfg.method, u.RequestURI(), u.Host)
	if len(e.cfg.APIKeys) > 0 {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", e.cfg.APIKeys[0])
	}
	fmt.Fprintf(&b, "Content-Type: application/json\r\nAccept: application/json\r\nContent-Length: %s\r\n", strconv.Itoa(len(body)))
	fmt.Fprintf(&b, "Idempotency-Key:%s\r\nConnection: close\r\n\r\n%s", keyLine, body)
	a := &answer{sent: time.Now()}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return nil, fmt.Errorf("%s %s: %w", e.cfg.method, e.cfg.path, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", e.cfg.method, e.cfg.path, err)
	}
	defer resp.Body.Close()
	a.body, err = io.ReadAll(io.LimitReader(resp.Body, maxBody))
	a.done = time.Now()
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %w", e.cfg.method, e.cfg.path, err)
	}
	a.status, a.header = resp.StatusCode, resp.Header
	if a.status >= 400 {
		a.code = client.ErrorCode(a.body)
	}
	return a, nil
}
