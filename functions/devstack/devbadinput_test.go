package devstack

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/authorizer/authfn"
	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/internal/rawconn"
	"github.com/idemkit/idemkit/ledger"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// deployedMemGateway is memGateway with the Guard the kit builds for the
// deployed api function (the body's tenantId refused when it is not the
// credential's, the JSON routes, the work-order contract).
func deployedMemGateway(t *testing.T) *gateway {
	t.Helper()
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	g, err := idem.New(idem.Config{Tenant: idem.AuthorizerKey("tenantId"), Store: memstore.New(), Logger: logger,
		BodyTenantField: "tenantId", Routes: kit.Layer1Routes()})
	if err != nil {
		t.Fatal(err)
	}
	l, _ := ledger.New(ledger.Config{Store: ledgermem.New()})
	api, err := apifn.New(apifn.Config{Runs: runs.NewMemRuns(), Guard: g, Ledger: l, BaseURL: "http://dev", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	keys := apikeys.NewMemKeys()
	_ = keys.PutKey(context.Background(), "k1", "acme")
	return &gateway{api: api, auth: &authfn.Handler{Keys: keys, Logger: logger}}
}

// TestDevAnswersBadInputAsTheHandler sends requests a client gets wrong
// to every body-reading route over raw HTTP/1.1 through `idemkit dev`'s
// server (its listener, header capture and gateway, as serve configures
// them) and, as the API Gateway event of the same request (header names
// lower-cased, a body that is not UTF-8 base64-encoded, the raw path),
// straight to the api handler behind it: bodies that are not I-JSON, not
// UTF-8, of another tenant, truncated, of the wrong shape; other media
// types; invalid Idempotency-Keys; ids with %2F, .. and unicode. Each is
// refused (the few a route takes are skipped), and the two answers are the
// same status and the same body: the gateway's translation changes no
// refusal.
func TestDevAnswersBadInputAsTheHandler(t *testing.T) {
	gw := deployedMemGateway(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: gw, ReadHeaderTimeout: 10 * time.Second}
	rawconn.Configure(srv)
	srv.ConnState = devConnState(srv.ConnState)
	go func() { _ = srv.Serve(devListener{ln}) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()

	exchange := func(wire string) (int, string) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, wire); err != nil {
			t.Fatal(err)
		}
		r, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%.80q: no answer: %v", wire, err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, string(b)
	}
	var extra [][2]string // more header lines, in order (a name may repeat)
	direct := func(method, path, ct, key, body string) (int, string) {
		t.Helper()
		raw, query, _ := strings.Cut(path, "?")
		ev := events.APIGatewayV2HTTPRequest{Version: "2.0", RouteKey: "$default", RawPath: raw, RawQueryString: query,
			Headers: map[string]string{"authorization": "Bearer k1", "host": "dev"}}
		if ct != "" {
			ev.Headers["content-type"] = ct
		}
		if key != "" {
			ev.Headers["idempotency-key"] = key
		}
		for _, h := range extra {
			// As API Gateway passes them: names lower-cased, repeats
			// joined with commas.
			name := strings.ToLower(h[0])
			if v, ok := ev.Headers[name]; ok {
				ev.Headers[name] = v + "," + h[1]
			} else {
				ev.Headers[name] = h[1]
			}
		}
		if utf8.ValidString(body) {
			ev.Body = body
		} else {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString([]byte(body)), true
		}
		ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = method, raw
		ev.RequestContext.DomainName, ev.RequestContext.RequestID = "dev", "req-direct"
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{"tenantId": "acme"}}
		r, err := gw.api.Handle(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		return r.StatusCode, r.Body
	}
	overHTTP := func(method, path, ct, key, body string) (int, string) {
		t.Helper()
		wire := method + " " + path + " HTTP/1.1\r\nHost: dev\r\nAuthorization: Bearer k1\r\n"
		if ct != "" {
			wire += "Content-Type: " + ct + "\r\n"
		}
		if key != "" {
			wire += "Idempotency-Key: " + key + "\r\n"
		}
		for _, h := range extra {
			wire += h[0] + ": " + h[1] + "\r\n"
		}
		return exchange(wire + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body)
	}

	// A live run and a failed one of acme's, made through the gateway.
	mk := func() string {
		st, b := overHTTP("POST", "/runs", "application/json", "", `{"workflowId":"conformance-noop"}`)
		var m map[string]any
		if st != http.StatusCreated || json.Unmarshal([]byte(b), &m) != nil {
			t.Fatalf("createRun: %d %s", st, b)
		}
		id, _ := m["runId"].(string)
		return "/runs/" + strings.Replace(id, "/", "~2F", 1)
	}
	live, other := mk(), mk()
	paths := []string{"/runs", live + "/cancel", "/runs:bulk-cancel", live + "/retry", live + ":fork", live + ":pause", live + ":resume",
		"/inbox/AAAAAAAAAAAAAAAAAAAAAA/resubmit", "/inbox/AAAAAAAAAAAAAAAAAAAAAA/discard", "/api/v1/inbound/work-orders/test", "/api/v1/inbound/work-orders"}
	bodies := []string{"{", `{"a":1,"a":2}`, "{\"reason\":\"\xff\"}", `{"reason":"\ud800"}`, `{"reason":1}`, `[]`, `null`, `{"tenantId":"globex"}`,
		`{"workflowId":"conformance-noop","tenantId":"globex"}`, `{"runIds":["` + strings.TrimPrefix(other, "/runs/") + `"]}`, `{"runIds":[]}`,
		`{"mode":"x"}`, `{"drainPolicy":"later"}`, `{"n":1e400}`, "\ufeff{}", `{} x`, `{"work_order_number":1}`}
	n, refused := 0, 0
	compare := func(method, path, ct, key, body string) {
		t.Helper()
		s1, b1 := overHTTP(method, path, ct, key, body)
		if s1 < 400 {
			return // a body this route takes (the cancel's is open): no refusal to compare
		}
		s2, b2 := direct(method, path, ct, key, body)
		refused++
		if s1 != s2 || b1 != b2 {
			t.Errorf("%s %s (Content-Type %q, key %q, body %.60q): over HTTP %d %s; as the event %d %s", method, path, ct, key, body, s1, b1, s2, b2)
		}
	}
	for _, p := range paths {
		for _, b := range bodies {
			for _, ct := range []string{"application/json", "", "text/plain"} {
				n++
				compare("POST", p, ct, "", b)
				compare("POST", p, ct, fmt.Sprintf("k-dev-bad-input-%012d", n), b)
			}
		}
		for _, key := range []string{"short", strings.Repeat("k", 129), "k-with-\xc3\xa9-0123456789abcdef"} {
			compare("POST", p, "application/json", key, "{")
		}
	}
	// Headers sent twice, or holding what a client gets wrong.
	for _, hs := range [][][2]string{
		{{"Content-Type", "application/json"}, {"Content-Type", "application/json"}},
		{{"Content-Type", "text/plain"}, {"content-type", "application/json"}},
		{{"Idempotency-Key", "k-dev-twice-0123456789abcdef"}, {"Idempotency-Key", "k-dev-twice-0123456789abcdef"}},
		{{"OpenWOP-Version", "2"}, {"OpenWOP-Version", "3"}},
		{{"OpenWOP-Version", "2.x"}},
		{{"Content-Encoding", "gzip"}},
		{{"Content-Encoding", "identity"}, {"Content-Encoding", "br"}},
		{{"If-Match", "\"1\""}, {"If-Match", "\"2\""}},
		{{"Idempotency-Decided-Version", "-1"}},
		{{"Idempotency-Decided-Version", "1"}, {"Idempotency-Decided-Version", "2"}},
		{{"OpenWOP-Dedup", "enforce"}, {"OpenWOP-Dedup", "enforce"}},
		{{"OpenWOP-Force-Engine-Version", "1"}},
		{{"Last-Event-ID", "x"}},
	} {
		extra = hs
		for _, p := range paths {
			compare("POST", p, "", "", `{"a":1,"a":2}`)
			compare("POST", p, "application/json", "k-dev-headers-0123456789ab", "{")
		}
		for _, p := range []string{live + "/events", live + "/events/poll?afterSequence=x", live + "?x=%zz"} {
			compare("GET", p, "", "", "")
		}
		extra = nil
	}
	for _, id := range []string{"acme%2F" + strings.Repeat("z", 22), "..", "%2e%2e", "acme~2F%C3%A9" + strings.Repeat("z", 20), "acme~2F~zz", strings.Repeat("a", 300)} {
		for _, s := range []string{"", "/cancel", ":fork", ":pause", "/retry", "/effects", "/events", "/events/poll"} {
			m := "POST"
			if s == "" || strings.HasPrefix(s, "/e") {
				m = "GET"
			}
			compare(m, "/runs/"+id+s, "", "", "")
		}
	}
	if refused < 1000 {
		t.Fatalf("%d refusals compared", refused)
	}
}
