package devstack

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestClientHalfCloseIsNotAStoreOutage: over a real connection, on
// every engine, a client sends POST /runs and half-closes its
// side while the Layer-1 claim is in flight (the claim's DynamoDB call
// waits for its context to end: the claim's call is detached from the
// request's cancellation, so that a claim is given back only after it
// landed, and ends at its own deadline, the store timeout; when net/http
// reads the EOF first, the claim fails before its call is sent). The client, still reading, gets 499
// idemkit.client_closed_request, not 503 idemkit.store_unavailable, and a
// retry with the same key is 201. The engines run at once: each one's
// time is the held claim's wait for the store timeout.
func TestClientHalfCloseIsNotAStoreOutage(t *testing.T) {
	dynamotest.ForEachConcurrently(t, func(t *testing.T, e *dynamotest.Emulator) {
		a := &dynamotest.AwaitHangUp{}
		gw, logs := hangUpGateway(t, e, a.Middleware())
		gw.timeout = time.Minute
		srv := httptest.NewServer(gw)
		defer srv.Close()

		const key = "halfclose-0123456789abcdef"
		body := `{"workflowId":"conformance-noop"}`
		a.Arm("PutItem")
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		req := "POST /runs HTTP/1.1\r\nHost: dev\r\nAuthorization: Bearer k1\r\nIdempotency-Key: " + key +
			"\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
		if _, err := io.WriteString(conn, req); err != nil {
			t.Fatal(err)
		}
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Minute)) // a bound on a hang, not a verdict
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("reading the answer after the half-close: %v", err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != idem.StatusClientClosed || !strings.Contains(string(got), idem.CodeClientClosed) {
			t.Fatalf("the half-closed client got %d %s", resp.StatusCode, got)
		}
		a.Arm("") // a claim that failed before its call was sent leaves it armed
		if out := logs.String(); strings.Contains(out, `"level":"ERROR"`) || !strings.Contains(out, "dev: the client closed the request") {
			t.Fatalf("logs:\n%s", out)
		}
		r, m := testutil.DoJSON(t, "POST", srv.URL+"/runs", body, "Authorization", "Bearer k1", "Idempotency-Key", key, "Content-Type", "application/json")
		if r.StatusCode != http.StatusCreated {
			t.Fatalf("the retry: %d %v; logs:\n%s", r.StatusCode, m, logs.String())
		}
	})
}
