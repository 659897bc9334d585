package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/wireschema"
)

// TestDevConformanceSeams: without --conformance-seams, idemkit dev neither
// advertises nor serves the seams profile (the seam path is the API's 404);
// with it, discovery carries conformance.seamsProfile (still valid against
// the closed schema) and forceEffectTransportRetry drives ONE effect through
// a transport retry: the provider receives two requests carrying the same
// Idempotency-Key, which is the providerKey the ledger records on both
// attempts (escaped, then completed), and the seam answers 201 {runId,
// effectId} per api/seams-v2.yaml. A provider that cuts the first
// connection itself gets no third request.
func TestDevConformanceSeams(t *testing.T) {
	o := wireschema.Load(t)
	e := dynamotest.Start(t, dynamotest.Moto)
	const key = "idk_seams-0123456789abcdef"
	seamPath := "/conformance/seams/sample/test/idempotency/effect-retry"

	_, plain := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", fmt.Sprintf("seam0%d-", time.Now().UnixNano()),
		"--api-key", key+"=acme", "--allow-loopback-webhooks")
	c := &wireClient{t: t, o: o, base: plain, seen: map[string]bool{}}
	if r := c.do("GET", "/.well-known/openwop", "/.well-known/openwop", "", ""); r.json["conformance"] != nil {
		t.Fatalf("seams advertised without the flag: %s", r.body)
	}
	if r := c.do("POST", "", seamPath, key, `{"providerUrl":"http://127.0.0.1:9/"}`); r.status != 404 {
		t.Fatalf("seam served without the flag: %d %s", r.status, r.body)
	}

	_, base := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", fmt.Sprintf("seam1%d-", time.Now().UnixNano()),
		"--api-key", key+"=acme", "--allow-loopback-webhooks", "--conformance-seams")
	c = &wireClient{t: t, o: o, base: base, seen: map[string]bool{}}
	caps := c.do("GET", "/.well-known/openwop", "/.well-known/openwop", "", "")
	if conf, _ := caps.json["conformance"].(map[string]any); conf["seamsProfile"] != settings.SeamsProfile {
		t.Fatalf("seams profile not advertised: %s", caps.body)
	}
	if r := c.do("POST", "", seamPath, "", `{"providerUrl":"http://127.0.0.1:9/"}`); r.status != 401 {
		t.Fatalf("seam without a key: %d", r.status)
	}
	for _, b := range []string{`{}`, `{"providerUrl":"nope"}`, `{"providerUrl":"http://127.0.0.1:9/","x":1}`, `[]`} {
		if r := c.do("POST", "", seamPath, key, b); r.status != 400 {
			t.Fatalf("%s: %d %s", b, r.status, r.body)
		}
	}
	if r := c.do("POST", "", "/conformance/seams/sample/effect-seams/fire", key, `{"seam":"x"}`); r.status != 404 {
		t.Fatalf("unserved seam: %d", r.status)
	}

	for _, cut := range []bool{false, true} {
		var mu sync.Mutex
		var keys []string
		rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			keys = append(keys, r.Header.Get("Idempotency-Key"))
			first := len(keys) == 1
			mu.Unlock()
			if cut && first {
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					_ = conn.(*net.TCPConn).SetLinger(0)
					conn.Close()
				}
				return
			}
			w.WriteHeader(http.StatusOK)
		}))
		resp, m := postJSON(t, base+seamPath, key, `{"providerUrl":"`+rx.URL+`"}`)
		rx.Close()
		if resp != http.StatusCreated || m["runId"] == nil || m["effectId"] == nil || len(m) != 2 {
			t.Fatalf("cut=%v: seam answered %d %v", cut, resp, m)
		}
		mu.Lock()
		got := append([]string(nil), keys...)
		mu.Unlock()
		if len(got) != 2 || got[0] == "" || got[0] != got[1] {
			t.Fatalf("cut=%v: provider saw keys %q, want the same key twice", cut, got)
		}
		fx := c.do("GET", "/runs/{runId}/effects", "/runs/"+runs.ProjectID(m["runId"].(string))+"/effects", key, "")
		rows, _ := fx.json["effects"].([]any)
		if len(rows) != 2 {
			t.Fatalf("cut=%v: ledger rows %s", cut, fx.body)
		}
		for i, want := range []string{"escaped", "completed"} {
			row := rows[i].(map[string]any)
			if row["effectId"] != m["effectId"] || row["providerKey"] != got[0] || row["state"] != want || row["attempt"] != float64(i+1) {
				t.Fatalf("cut=%v: row %d %v, want %s with the provider's key %s", cut, i, row, want, got[0])
			}
		}
		if !strings.HasPrefix(m["runId"].(string), "acme/") {
			t.Fatalf("seam run of another tenant: %v", m)
		}
	}
}

func postJSON(t *testing.T, url, key, body string) (int, map[string]any) {
	t.Helper()
	code, m := devCall(t, "POST", url, key, body)
	return code, m
}
