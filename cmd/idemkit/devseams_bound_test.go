package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
)

// TestDevEffectRetrySeamBoundsAndBodyRules (RED_TEAM 265): the
// effect-retry seam's wait for its run is bounded by --request-timeout,
// and a provider that never answers gets the caller 503 runner_unavailable
// with Retry-After within it (not 500 internal_error after 30 s), its run
// cancelled rather than left retrying; the seam's body follows every JSON
// route's rules: another media type is 415 unsupported_media_type, a
// member named twice 400 validation_error.
func TestDevEffectRetrySeamBoundsAndBodyRules(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	const key = "idk_seams-0123456789abcdef"
	seamPath := "/conformance/seams/sample/test/idempotency/effect-retry"
	_, base := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", fmt.Sprintf("seamb%d-", time.Now().UnixNano()),
		"--api-key", key+"=acme", "--allow-loopback-webhooks", "--conformance-seams", "--request-timeout", "1500ms")

	post := func(ct, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", base+seamPath, strings.NewReader(body))
		req.Header.Set("Authorization", testutil.Bearer(key))
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	if resp, b := post("text/plain", `{"providerUrl":"http://127.0.0.1:9/"}`); resp.StatusCode != 415 || !strings.Contains(b, `"unsupported_media_type"`) {
		t.Fatalf("text/plain body: %d %s; want 415 unsupported_media_type", resp.StatusCode, b)
	}
	if resp, b := post("application/json", `{"providerUrl":"http://127.0.0.1:9/","providerUrl":"http://127.0.0.1:9/"}`); resp.StatusCode != 400 || !strings.Contains(b, `"validation_error"`) {
		t.Fatalf("a member named twice: %d %s; want 400 validation_error", resp.StatusCode, b)
	}

	stop := make(chan struct{})
	rx := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(stop); rx.Close() })
	start := time.Now()
	resp, b := post("application/json", `{"providerUrl":"`+rx.URL+`"}`)
	took := time.Since(start)
	// Within 15 s: the 1.5 s request timeout and the run's cancel on a
	// loaded engine fit; the unbounded wait answered 500 after 30 s.
	if resp.StatusCode != 503 || !strings.Contains(b, `"runner_unavailable"`) || resp.Header.Get("Retry-After") == "" || took > 15*time.Second {
		t.Fatalf("a provider that never answers: %d %s Retry-After %q after %s; want 503 runner_unavailable with Retry-After within the request timeout",
			resp.StatusCode, b, resp.Header.Get("Retry-After"), took)
	}
	// Its run is cancelled, not left retrying the delivery for an hour.
	m := regexp.MustCompile(`its run (acme/\S+) is cancelled`).FindStringSubmatch(b)
	if m == nil {
		t.Fatalf("the 503 names no run: %s", b)
	}
	code, run := devCall(t, "GET", base+"/runs/"+runs.ProjectID(m[1]), key, "")
	if code != 200 || run["status"] != "cancelled" {
		t.Fatalf("the seam's run after the 503: %d %v; want cancelled", code, run)
	}
}
