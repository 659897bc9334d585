package idem_test

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// TestERPKeyWhitespaceInvisibleToNetHTTP documents where the ERP policy's
// "leading/trailing whitespace rejected" cannot be checked: Go's HTTP server
// strips the whitespace around a header value while parsing the request,
// before any handler (the Middleware included) sees it, so a key sent as
// " ERP-WO-20260807-000001 " reaches the Guard as the valid key and is
// accepted. The API Gateway adapters see the raw value and reject it
// (TestERPKeyWhitespaceRejectedOnRawHeader, on every engine), and so does
// `idemkit dev`, whose gateway reads the raw header block
// (TestDevERPKeyWhitespaceRejectedAsReceived).
func TestERPKeyWhitespaceInvisibleToNetHTTP(t *testing.T) {
	st := memstore.New()
	g, err := idem.New(idem.Config{
		Store: st, Policy: erp.Policy, Tenant: idem.SingleTenant("erp"),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	mux := http.NewServeMux()
	mux.Handle("POST /api/v1/inbound/work-orders", g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r.Header.Values(idem.HeaderKey)
		w.WriteHeader(201)
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Written by hand: Go's HTTP client trims header values itself.
	_, _ = io.WriteString(c, "POST /api/v1/inbound/work-orders HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"+
		"Idempotency-Key: \t ERP-WO-20260807-000001 \t\r\nConnection: close\r\n\r\n{}")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 || len(seen) != 1 || seen[0] != "ERP-WO-20260807-000001" {
		t.Fatalf("status %d, handler saw %q: net/http no longer trims header values; "+
			"the Middleware can now reject surrounding whitespace (update the Middleware docs and this test)", resp.StatusCode, seen)
	}
	if got := resp.Header.Get(idem.HeaderKey); strings.TrimSpace(got) != got {
		t.Fatalf("echoed key %q carries whitespace", got)
	}
}
