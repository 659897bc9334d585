package client

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// hungServer is a server whose every request hangs until the request's
// context ends (the client gives up) or the test ends.
func hungServer(t *testing.T) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before srv.Close, which waits for the handlers
	return srv
}
