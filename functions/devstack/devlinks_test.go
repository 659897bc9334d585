package devstack

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/functions/api/apifn"
)

// TestDevLinksFollowTheLoopbackOriginRequested: idemkit dev builds its
// links (Location, statusUrl, eventsUrl) under the origin the request was
// made to (runs.md §Response) when its Host names this server by a
// loopback name and its port — http://localhost:PORT and http://[::1]:PORT
// as well as http://127.0.0.1:PORT; any other Host (another name, another
// port, none) gets the server's own address, never a name taken from the
// request.
func TestDevLinksFollowTheLoopbackOriginRequested(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	srv := httptest.NewUnstartedServer(memGateway(t, base, func(c *apifn.Config) { c.Test.BaseURLOf = loopbackOrigin(base) }))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	for host, want := range map[string]string{
		"localhost:" + port:              "http://localhost:" + port,
		"LocalHost:" + port:              "http://localhost:" + port,
		"127.0.0.1:" + port:              base,
		"[::1]:" + port:                  "http://[::1]:" + port,
		"evil.example:" + port:           base,
		"localhost:1" + port:             base,
		"localhost":                      base,
		"localhost.evil.example:" + port: base,
	} {
		req, _ := http.NewRequest("POST", base+"/runs", strings.NewReader(`{"workflowId":"conformance-noop"}`))
		req.Host = host
		req.Header.Set("Authorization", "Bearer k1")
		req.Header.Set("Content-Type", "application/json")
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		loc := r.Header.Get("Location")
		if r.StatusCode != 201 || !strings.HasPrefix(loc, want+"/runs/") || !strings.Contains(string(b), `"statusUrl":"`+want+"/runs/") ||
			!strings.Contains(string(b), `"eventsUrl":"`+want+"/runs/") {
			t.Errorf("Host %q: %d Location %q %s, want links under %s", host, r.StatusCode, loc, b, want)
		}
	}
}
