package devstack

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/rawconn"
	"github.com/idemkit/idemkit/internal/testutil"
)

// serveEnveloped serves h behind the dev server's envelopeListener and
// returns its address.
func serveEnveloped(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(envelopeListener{ln}) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// rawRoundTrip writes raw to addr and reads one response.
func rawRoundTrip(t *testing.T, addr, raw string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	r, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r, string(b)
}

// TestEnvelopeOnlyNetHTTPsOwnRefusals: the dev server's connection wrapper
// replaces only the refusals net/http writes by itself (recognised by what
// net/http writes: its fixed text/plain head before any handler runs, or
// its bodiless 417) with the JSON envelope; everything a handler wrote —
// an XML error answer of any status with its X-Request-ID, key echo,
// replay marker and original request id, a bodiless error, a text/plain
// error — passes through byte for byte, and the connection stays open.
func TestEnvelopeOnlyNetHTTPsOwnRefusals(t *testing.T) {
	const xmlBody = `<?xml version="1.0" encoding="UTF-8"?>` + "\n<response><error>NO_PROJECT_PROCESSED</error><request_id>req-2</request_id></response>"
	addr := serveEnveloped(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/xml":
			w.Header().Set("Content-Type", "application/xml")
			w.Header().Set("X-Request-Id", "req-2")
			w.Header().Set("Idempotency-Key", "ERP-WO-1-000001")
			w.Header().Set("Idempotency-Replayed", "true")
			w.Header().Set("Idempotency-Original-Request-Id", "req-1")
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, xmlBody)
		case "/empty":
			w.Header().Set("X-Request-Id", "req-3")
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/text":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, "plain refusal")
		}
	}))
	r, b := rawRoundTrip(t, addr, "POST /xml HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
	if r.StatusCode != 409 || b != xmlBody || r.Header.Get("Content-Type") != "application/xml" || r.Header.Get("X-Request-Id") != "req-2" ||
		r.Header.Get("Idempotency-Key") != "ERP-WO-1-000001" || r.Header.Get("Idempotency-Replayed") != "true" ||
		r.Header.Get("Idempotency-Original-Request-Id") != "req-1" || r.Close {
		t.Fatalf("the handler's XML 409: %d %v %q (close %v)", r.StatusCode, r.Header, b, r.Close)
	}
	if r, b := rawRoundTrip(t, addr, "GET /empty HTTP/1.1\r\nHost: x\r\n\r\n"); r.StatusCode != 503 || b != "" || r.Header.Get("X-Request-Id") != "req-3" || r.Close {
		t.Fatalf("the handler's bodiless 503: %d %v %q", r.StatusCode, r.Header, b)
	}
	if r, b := rawRoundTrip(t, addr, "GET /text HTTP/1.1\r\nHost: x\r\n\r\n"); r.StatusCode != 400 || b != "plain refusal" {
		t.Fatalf("the handler's text/plain 400: %d %v %q", r.StatusCode, r.Header, b)
	}
	for name, c := range map[string]struct {
		raw    string
		status int
		code   string
	}{
		"NUL in a header":  {"GET /xml HTTP/1.1\r\nHost: x\r\nX-Nul: a\x00b\r\n\r\n", 400, "validation_error"},
		"no Host":          {"GET /xml HTTP/1.1\r\n\r\n", 400, "validation_error"},
		"bad path escape":  {"GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400, "validation_error"},
		"huge header":      {"GET /xml HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\n\r\n", 431, codeHeadersTooLarge},
		"unknown encoding": {"POST /xml HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, codeTransferEncodingUnsup},
		"unmet Expect":     {"POST /xml HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nContent-Length: 2\r\n\r\n{}", 417, codeExpectationFailed},
	} {
		r, b := rawRoundTrip(t, addr, c.raw)
		if r.StatusCode != c.status || r.Header.Get("Content-Type") != "application/json" || !strings.Contains(b, `"error":"`+c.code+`"`) {
			t.Errorf("%s: %d %v %q, want the %d envelope %s", name, r.StatusCode, r.Header, b, c.status, c.code)
		}
	}
}

// TestHeaderBlocksTheRawTrackerCannotKeepAre431: every header block is
// either kept as received (and its Idempotency-Key read from it) or
// refused by net/http with 431 and the envelope, whose message names the
// limit that applied. A block between the tracker's bound and net/http's
// default bound was once answered 400 "malformed framing".
func TestHeaderBlocksTheRawTrackerCannotKeepAre431(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, _, refuse := rawHeaders(r); refuse != nil {
			w.WriteHeader(refuse.Status)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	rawconn.Configure(srv)
	go func() { _ = srv.Serve(rawconn.Listener{Listener: envelopeListener{ln}}) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()
	limit := fmt.Sprintf("exceed %d bytes", rawconn.MaxHeadBytes)
	const head = "GET /x HTTP/1.1\r\nHost: x\r\nX-Pad: "
	fits := rawconn.MaxHeadBytes - len(head) - len("\r\n\r\n")
	for name, c := range map[string]struct {
		pad    int
		status int
	}{
		"at the bound":          {fits, http.StatusNoContent},
		"a byte over the bound": {fits + 1, http.StatusRequestHeaderFieldsTooLarge},
		"66,000 bytes":          {66_000, http.StatusRequestHeaderFieldsTooLarge},
		"500 KB":                {500 << 10, http.StatusRequestHeaderFieldsTooLarge},
		"2 MB":                  {2 << 20, http.StatusRequestHeaderFieldsTooLarge},
	} {
		r, b := rawRoundTrip(t, addr, head+strings.Repeat("a", c.pad)+"\r\n\r\n")
		if r.StatusCode != c.status {
			t.Errorf("%s: %d %q, want %d", name, r.StatusCode, b, c.status)
			continue
		}
		if c.status == http.StatusRequestHeaderFieldsTooLarge && (!strings.Contains(b, `"error":"`+codeHeadersTooLarge+`"`) || !strings.Contains(b, limit)) {
			t.Errorf("%s: %q, want the envelope %s saying the headers %s", name, b, codeHeadersTooLarge, limit)
		}
	}
}

// TestOverlongRequestTargetIs414: on the dev server's listener
// (devListener) a head refused because its request line alone is over the
// bound is 414 idemkit.uri_too_long with the envelope, not 431 (RFC 9110
// §15.5.15: the target is what is too long), on a fresh connection and
// after a request served on it; a long header field after a short request
// line stays 431 idemkit.request_headers_too_large, and a long target that
// fits is served.
func TestOverlongRequestTargetIs414(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})}
	rawconn.Configure(srv)
	go func() { _ = srv.Serve(devListener{ln}) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()
	const served = "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n"
	long := func(n int) string { return "GET /" + strings.Repeat("a", n) + " HTTP/1.1\r\nHost: x\r\n\r\n" }
	for name, c := range map[string]struct {
		raw    string
		status int
		code   string
	}{
		"100 KB target":                  {long(100 << 10), http.StatusRequestURITooLong, codeURITooLong},
		"a target just over the bound":   {long(rawconn.MaxHeadBytes), http.StatusRequestURITooLong, codeURITooLong},
		"100 KB target after a request":  {served + long(100<<10), http.StatusRequestURITooLong, codeURITooLong},
		"100 KB header":                  {"GET /x HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("a", 100<<10) + "\r\n\r\n", http.StatusRequestHeaderFieldsTooLarge, codeHeadersTooLarge},
		"100 KB header after a request":  {served + "GET /x HTTP/1.1\r\nHost: x\r\nX-Pad: " + strings.Repeat("a", 100<<10) + "\r\n\r\n", http.StatusRequestHeaderFieldsTooLarge, codeHeadersTooLarge},
		"a long target within the bound": {long(40 << 10), http.StatusNoContent, ""},
	} {
		c := c
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = io.WriteString(conn, c.raw) }()
		br := bufio.NewReader(conn)
		r, err := http.ReadResponse(br, nil)
		if err == nil && strings.HasPrefix(c.raw, served) {
			r.Body.Close()
			r, err = http.ReadResponse(br, nil)
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			conn.Close()
			continue
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		conn.Close()
		if r.StatusCode != c.status || c.code != "" && (!strings.Contains(string(b), `"error":"`+c.code+`"`) || r.Header.Get("Content-Type") != "application/json") {
			t.Errorf("%s: %d %v %s, want %d %s", name, r.StatusCode, r.Header, b, c.status, c.code)
		}
	}
}

// TestHeadCutShortIs408: a client that sends part of a request head and
// then stops is answered, once the server's ReadHeaderTimeout ends the
// wait, 408 with the envelope (idemkit.request_timeout) before the
// connection closes, on a fresh connection and on one that served a
// request first; before, net/http closed it without a byte, an answer the
// client could not tell from a crash (RED_TEAM 360). A connection idle
// between requests (no byte of a next head) is closed without one, as
// before, and a request still being served is never interrupted by it.
func TestHeadCutShortIs408(t *testing.T) {
	ln := testutil.NewGatedListener(t)
	srv := &http.Server{ReadHeaderTimeout: 50 * time.Millisecond, IdleTimeout: 50 * time.Millisecond,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNoContent)
		})}
	rawconn.Configure(srv)
	srv.ConnState = devConnState(srv.ConnState)
	go func() { _ = srv.Serve(devListener{ln}) }()
	t.Cleanup(func() { _ = srv.Close() })
	const served = "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n"
	for name, c := range map[string]struct {
		raw        string
		first      bool // a request is served before the cut
		wantAnswer bool
	}{
		"request line cut":                {"GET /x HT", false, true},
		"header fields cut":               {"GET /x HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n", false, true},
		"head cut after a served request": {served + "GET /x HTTP/1.1\r\nHost: x\r\n", true, true},
		"idle after a served request":     {served, true, false},
	} {
		conn := ln.DialWritten(t, c.raw)
		br := bufio.NewReader(conn)
		if c.first {
			r, err := http.ReadResponse(br, nil)
			if err != nil || r.StatusCode != http.StatusNoContent {
				t.Fatalf("%s: the first request: %v %v", name, r, err)
			}
			r.Body.Close()
		}
		rest, _ := io.ReadAll(br) // until the server closes the connection
		conn.Close()
		if !c.wantAnswer {
			if len(rest) != 0 {
				t.Errorf("%s: an idle connection was closed with %q, want nothing", name, rest)
			}
			continue
		}
		r, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(rest))), nil)
		if err != nil {
			t.Errorf("%s: the connection closed with %q, want a 408 answer", name, rest)
			continue
		}
		b, _ := io.ReadAll(r.Body)
		if r.StatusCode != http.StatusRequestTimeout || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("OpenWOP-Version") == "" ||
			!strings.Contains(string(b), `"error":"idemkit.request_timeout"`) {
			t.Errorf("%s: %d %v %s, want 408 idemkit.request_timeout in the envelope", name, r.StatusCode, r.Header, b)
		}
	}
}
