package conformtest

import (
	"errors"
	"net/http"
	"net/http/httptest"

	"github.com/idemkit/idemkit/internal/rawconn"
)

// HTTPTest starts s on a loopback httptest server that also lets it see
// each request's Idempotency-Key header lines as received, which Go's HTTP
// server trims before any handler runs: only served this way does the ERP
// policy's "leading/trailing whitespace rejected" rule hold
// (httptest.NewServer(s) serves every other rule). The lines are those of
// exactly the request being served (rawconn), never of a pipelined one or
// of a body. The server is closed at the caller's Close.
func HTTPTest(s *Server) *httptest.Server {
	srv := httptest.NewUnstartedServer(s)
	srv.Listener = rawconn.Listener{Listener: srv.Listener}
	rawconn.Configure(srv.Config)
	srv.Start()
	return srv
}

// rawKey reads r's Idempotency-Key lines as received: ws reports whether
// one had whitespace around its value (beyond the one space after the
// colon) or was folded onto another line; untracked that r was served
// through HTTPTest but its header block is not known (its connection is
// closed after the answer).
func rawKey(r *http.Request) (ws, untracked bool) {
	h, err := rawconn.HeadOf(r.Context())
	switch {
	case errors.Is(err, rawconn.ErrNotRaw):
		return false, false
	case err != nil:
		return false, true
	}
	vs, err := h.Values("Idempotency-Key")
	if err != nil {
		return true, false
	}
	for _, v := range vs {
		if len(v) > 0 && (isWS(v[0]) || isWS(v[len(v)-1])) {
			return true, false
		}
	}
	return false, false
}

func isWS(b byte) bool { return b == ' ' || b == '\t' }
