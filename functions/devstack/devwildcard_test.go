package devstack_test

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/devstack"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestDevOnEveryInterfaceNamesLocalhost: `idemkit dev --addr :PORT` (or
// 0.0.0.0:PORT, [::]:PORT) listens on every interface, as asked, and
// names itself http://localhost:PORT (RED_TEAM 514): in its ready and try
// lines, Stack.URL, and the links of a request whose Host is no loopback
// name of it (Location, statusUrl, eventsUrl), where it named
// http://[::]:PORT, an address a client cannot reach. A line says where it
// listens. The server still answers on 127.0.0.1 (and ::1 where the
// machine has it). A specific address (127.0.0.1:PORT) is unchanged.
func TestDevOnEveryInterfaceNamesLocalhost(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	key := "idk_wildcard_test_0123456789"
	for i, addr := range []string{":0", "0.0.0.0:0", "[::]:0"} {
		t.Run(addr, func(t *testing.T) {
			out := &testutil.SyncBuffer{}
			s, err := devstack.Start(t.Context(), devstack.Options{Endpoint: e.Endpoint, Addr: addr, Stdout: out, APIKeys: []string{key + "=acme"},
				TablePrefix: "wildcard" + strconv.Itoa(i) + strconv.FormatInt(time.Now().UnixNano(), 10) + "-"})
			if err != nil {
				t.Fatalf("Start: %v", err)
			}
			t.Cleanup(func() { _ = s.Stop() })
			u, err := url.Parse(s.URL())
			if err != nil || u.Hostname() != "localhost" || u.Port() == "" || u.Port() == "0" {
				t.Fatalf("Stack.URL() = %q, want http://localhost:PORT", s.URL())
			}
			base, port := s.URL(), u.Port()
			text := out.String()
			if !strings.Contains(text, "idemkit dev: serving "+base+" (") || !strings.Contains(text, "curl -si -X POST "+base+"/runs ") {
				t.Errorf("dev printed:\n%s\nwant the serving and try lines to name %s", text, base)
			}
			if !strings.Contains(text, "listening on every interface") || strings.Contains(text, "http://[::]") || strings.Contains(text, "http://0.0.0.0") {
				t.Errorf("dev printed:\n%s\nwant a line saying it listens on every interface, and no link to an unspecified address", text)
			}
			hosts := []string{"127.0.0.1"}
			if ln, err := net.Listen("tcp6", "[::1]:0"); err == nil {
				ln.Close()
				hosts = append(hosts, "::1")
			}
			for _, h := range hosts {
				origin := "http://" + net.JoinHostPort(h, port)
				req, _ := http.NewRequest("POST", origin+"/runs", strings.NewReader(`{"workflowId":"conformance-noop"}`))
				req.Host = "devbox.example:" + port // a name dev does not know: its own base URL
				req.Header.Set("Authorization", testutil.Bearer(key))
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("POST %s/runs: %v (dev must listen on every interface)", origin, err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 201 || !strings.HasPrefix(resp.Header.Get("Location"), base+"/runs/") ||
					!strings.Contains(string(b), `"statusUrl":"`+base+`/runs/`) || !strings.Contains(string(b), `"eventsUrl":"`+base+`/runs/`) {
					t.Errorf("POST %s/runs: %d Location %q %s, want links under %s", origin, resp.StatusCode, resp.Header.Get("Location"), b, base)
				}
			}
		})
	}
}
