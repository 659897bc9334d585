package main

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/idemkit/idemkit/internal/rawconn"
)

// The dev gateway hands the api handler the Idempotency-Key header as it
// was received, like API Gateway's HTTP API, which preserves whitespace
// around a header value: Go's HTTP server trims it before any handler runs,
// and without the raw value the ERP policy's "leading or trailing
// whitespace is rejected" rule could not hold behind `idemkit dev`.
// net/http has no hook for the raw header lines, so the connection keeps
// what it read of the current request and the gateway reads the key's lines
// from there.

// What the connection keeps is bounded (rawconn.MaxBytes, the oldest bytes
// dropped first): a header block that no longer fits is not found, and the
// gateway uses the value net/http parsed.

// rawHeader returns the values of the header name in r's header block as
// received (only the one space after the colon removed), and drops what was
// read up to the end of that block. ok is false when r was not read through
// a rawconn.Conn or its header block is not in what the connection kept.
func rawHeader(r *http.Request, name string) (values []string, ok bool) {
	c, isRaw := rawconn.FromContext(r.Context())
	if !isRaw {
		return nil, false
	}
	line := []byte(r.Method + " " + r.RequestURI + " " + r.Proto + "\r\n")
	c.Use(func(buf []byte) int {
		// The last request line like r's is r's: what follows the previous
		// header block (that request's body) comes before it.
		start := bytes.LastIndex(buf, line)
		if start < 0 {
			return 0
		}
		block := buf[start+len(line):]
		end := bytes.Index(block, []byte("\r\n\r\n"))
		if end < 0 {
			return 0
		}
		for _, l := range bytes.Split(block[:end], []byte("\r\n")) {
			k, v, found := bytes.Cut(l, []byte(":"))
			if found && strings.EqualFold(string(k), name) {
				values = append(values, string(bytes.TrimPrefix(v, []byte(" "))))
			}
		}
		ok = true
		return start + len(line) + end + 4
	})
	return values, ok
}
