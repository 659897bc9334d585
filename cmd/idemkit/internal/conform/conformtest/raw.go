package conformtest

import (
	"bytes"
	"net/http"
	"net/http/httptest"

	"github.com/idemkit/idemkit/internal/rawconn"
)

// HTTPTest starts s on a loopback httptest server that also lets it see the
// raw Idempotency-Key header lines, which Go's HTTP server trims before any
// handler runs: only served this way does the ERP policy's "leading/trailing
// whitespace rejected" rule hold (httptest.NewServer(s) serves every other
// rule). The server is closed at the caller's Close.
func HTTPTest(s *Server) *httptest.Server {
	srv := httptest.NewUnstartedServer(s)
	srv.Listener = rawconn.Listener{Listener: srv.Listener}
	srv.Config.ConnContext = rawconn.ConnContext
	srv.Start()
	return srv
}

// rawKeyWhitespace reports whether an Idempotency-Key line read on r's
// connection had whitespace around its value (beyond the one space after
// the colon). Go's client never writes one, so on a reused connection a
// line of an earlier request never is one either.
func rawKeyWhitespace(r *http.Request) bool {
	c, ok := rawconn.FromContext(r.Context())
	if !ok {
		return false
	}
	found := false
	c.Use(func(buf []byte) int {
		for _, line := range bytes.Split(buf, []byte("\r\n")) {
			name, v, ok := bytes.Cut(line, []byte(":"))
			if !ok || !bytes.EqualFold(bytes.TrimSpace(name), []byte("Idempotency-Key")) {
				continue
			}
			v = bytes.TrimPrefix(v, []byte(" "))
			if len(v) > 0 && (isWS(v[0]) || isWS(v[len(v)-1])) {
				found = true
				return 0
			}
		}
		return 0
	})
	return found
}

func isWS(b byte) bool { return b == ' ' || b == '\t' }
