package devstack

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/internal/testutil"
	"github.com/idemkit/idemkit/ledger"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// memGateway is the dev gateway over memory stores (key "k1" of tenant
// acme), its api built with base as BaseURL and then mod (nil: none).
func memGateway(t *testing.T, base string, mod func(*apifn.Config)) *gateway {
	t.Helper()
	g, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: memstore.New(), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := ledger.New(ledger.Config{Store: ledgermem.New()})
	cfg := apifn.Config{Runs: runs.NewMemRuns(), Guard: g, Ledger: l, BaseURL: base}
	if mod != nil {
		mod(&cfg)
	}
	api, err := apifn.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	keys := apikeys.NewMemKeys()
	_ = keys.PutKey(context.Background(), "k1", "acme")
	return &gateway{api: api, auth: &authfn.Handler{Keys: keys, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}}
}

// limitsGateway is memGateway behind an httptest server; its address.
func limitsGateway(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(memGateway(t, "http://dev", nil))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// TestDeclaredOversizeBodyIs413BeforeReading: a request whose
// Content-Length declares more than apifn.MaxBodyBytes is answered 413
// payload_too_large at once, without reading the body — the client that
// sent only part of it, or waits for 100 Continue, gets the answer instead
// of a hang and a 400 — and the connection is closed after it; a body of
// exactly the limit is still read.
func TestDeclaredOversizeBodyIs413BeforeReading(t *testing.T) {
	addr := limitsGateway(t)
	for _, expect := range []string{"", "Expect: 100-continue\r\n"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.WriteString(c, "POST /runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k1\r\nContent-Type: application/json\r\n"+expect+
			"Content-Length: "+strconv.Itoa(apifn.MaxBodyBytes+1)+"\r\n\r\n{")
		r, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Errorf("%q: no answer: %v", expect, err)
			c.Close()
			continue
		}
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		r.Body.Close()
		c.Close()
		if r.StatusCode != 413 || m["error"] != "payload_too_large" || r.Header.Get("OpenWOP-Version") == "" || !r.Close {
			t.Errorf("%q: %d %v %v (close %v)", expect, r.StatusCode, r.Header, m, r.Close)
		}
	}
	head, tail := `{"workflowId":"conformance-noop","inputs":{"pad":"`, `"}}`
	body := head + strings.Repeat("x", apifn.MaxBodyBytes-len(head)-len(tail)) + tail
	if len(body) != apifn.MaxBodyBytes {
		t.Fatalf("body of %d bytes", len(body))
	}
	req, _ := http.NewRequest("POST", "http://"+addr+"/runs", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer k1")
	req.Header.Set("Content-Type", "application/json")
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode == 413 {
		t.Errorf("a body of exactly %d bytes: 413", apifn.MaxBodyBytes)
	}
}

// TestBodyCutShortIs408: a request whose body stops before its
// Content-Length (the client stalled) is answered, once the server's
// ReadTimeout ends the wait, 408 idemkit.request_timeout with the
// envelope and Connection: close — a timeout a client may retry (idemkit's
// client does), not 400 validation_error "could not read the body", a
// final refusal of a body that was never read (RED_TEAM 361).
func TestBodyCutShortIs408(t *testing.T) {
	srv := httptest.NewUnstartedServer(memGateway(t, "http://dev", nil))
	srv.Config.ReadTimeout = 100 * time.Millisecond
	srv.Listener.Close()
	ln := testutil.NewGatedListener(t) // the request is written before the server reads
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	const part = `{"workflowId":"conformance-noop"`
	conn := ln.DialWritten(t, "POST /runs HTTP/1.1\r\nHost: dev\r\nAuthorization: Bearer k1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"+part)
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute)) // a bound on a hang, not a verdict
	r, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), `"error":"idemkit.request_timeout"`) || !r.Close {
		t.Fatalf("a body cut short: %d %v %s, want 408 idemkit.request_timeout with Connection: close", r.StatusCode, r.Header, b)
	}
}
