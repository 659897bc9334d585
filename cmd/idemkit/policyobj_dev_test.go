package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
)

// startPolicyDev starts `idemkit dev --policy policy` (in process) on e,
// with one API key for tenant acme, and returns its URL and the key. The
// tests of the policy objects run on every engine with streams (DynamoDB
// Local and moto), as idemkit dev does.
func startPolicyDev(t *testing.T, e *dynamotest.Emulator, policy string, extra ...string) (url, key string) {
	t.Helper()
	prefix := fmt.Sprintf("pol%s%d-", policy, time.Now().UnixNano())
	key = "idk_policyobj_" + policy + "_0123456789"
	args := append([]string{"--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix, "--api-key", key + "=acme", "--policy", policy}, extra...)
	_, url = startDevInProcess(t, args...)
	return url, key
}

// projected is a runId as a path segment.
func projected(id string) string { return strings.Replace(id, "/", "~2F", 1) }

// TestDevOneKeyOnTwoRunsCancelIsKeyMismatch: behind `idemkit dev` (the
// OpenWOP default) the Layer-1 scope of cancelRun is the route, as in the
// library: one key reused on a second run's cancel is 409
// idempotency_key_mismatch and the second run is not cancelled.
func TestDevOneKeyOnTwoRunsCancelIsKeyMismatch(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, devOneKeyOnTwoRunsCancelIsKeyMismatch)
}

func devOneKeyOnTwoRunsCancelIsKeyMismatch(t *testing.T, e *dynamotest.Emulator) {
	url, key := startPolicyDev(t, e, "openwop")
	auth := []string{"Authorization", testutil.Bearer(key)}
	var ids []string
	for range 2 {
		resp, m := testutil.DoJSON(t, "POST", url+"/runs", `{"workflowId":"conformance-delay","inputs":{"delayMs":1}}`, auth...)
		if resp.StatusCode != 201 {
			t.Fatalf("createRun: %d %v", resp.StatusCode, m)
		}
		ids = append(ids, m["runId"].(string))
	}
	const ik = "cancel-key-0123456789abcdef"
	hdr := append([]string{"Idempotency-Key", ik}, auth...)
	resp, m := testutil.DoJSON(t, "POST", url+"/runs/"+projected(ids[0])+"/cancel", `{}`, hdr...)
	if resp.StatusCode != 200 && !(resp.StatusCode == 409 && m["error"] == "run_terminal") {
		t.Fatalf("first cancel: %d %v", resp.StatusCode, m)
	}
	resp, m = testutil.DoJSON(t, "POST", url+"/runs/"+projected(ids[1])+"/cancel", `{}`, hdr...)
	if resp.StatusCode != 409 || m["error"] != "idempotency_key_mismatch" {
		t.Fatalf("same key on another run's cancel: %d %v, want 409 idempotency_key_mismatch", resp.StatusCode, m)
	}
	if _, m := testutil.DoJSON(t, "GET", url+"/runs/"+projected(ids[1]), "", auth...); m["status"] == "cancelled" {
		t.Fatalf("the second run was cancelled by a reused key: %v", m)
	}
}

// TestDevCommerceReplayIsTheRunAsItIsNow: behind `idemkit dev --policy
// commerce` a key binds one run: a run that failed after its 201 (its
// webhook answered 400) replays as failed — 201, the first answer's shape,
// status failed with its error, Idempotent-Replayed: true — and a replay
// of a run still running with Idempotency-Mode: async is that pending
// Action at once (202, Retry-After, runId and links); a GET of the run
// carries its version as a strong ETag.
func TestDevCommerceReplayIsTheRunAsItIsNow(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, devCommerceReplayIsTheRunAsItIsNow)
}

func devCommerceReplayIsTheRunAsItIsNow(t *testing.T, e *dynamotest.Emulator) {
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadRequest) }))
	defer refuse.Close()
	hold := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(hold)
	url, key := startPolicyDev(t, e, "commerce", "--allow-loopback-webhooks")
	post := func(ik, mode, body string) (*http.Response, map[string]any) {
		return testutil.DoJSON(t, "POST", url+"/runs", body, "Authorization", testutil.Bearer(key), "Idempotency-Key", ik, "Idempotency-Mode", mode)
	}
	failing := `{"workflowId":"webhook","inputs":{"url":"` + refuse.URL + `/hook","payload":{"order":42}}}`
	first, m := post("checkout cart 42", "", failing)
	id, _ := m["runId"].(string)
	if first.StatusCode != 201 || id == "" {
		t.Fatalf("createRun: %d %v", first.StatusCode, m)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		g, s := testutil.DoJSON(t, "GET", url+"/runs/"+projected(id), "", "Authorization", testutil.Bearer(key))
		if g.Header.Get("ETag") == "" || !strings.HasPrefix(g.Header.Get("ETag"), `"`) {
			t.Fatalf("GET carries no strong ETag: %v", g.Header)
		}
		if s["status"] == "failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run did not fail: %v", s)
		}
		time.Sleep(200 * time.Millisecond)
	}
	r, m := post("checkout cart 42", "", failing)
	if r.StatusCode != 201 || m["runId"] != id || m["status"] != "failed" || m["error"] == nil || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay of a failed run: %d %v %v", r.StatusCode, r.Header, m)
	}

	pending := `{"workflowId":"webhook","inputs":{"url":"` + slow.URL + `/hook","payload":{"order":43}}}`
	_, m = post("checkout cart 43", "", pending)
	id2, _ := m["runId"].(string)
	r, m = post("checkout cart 43", "async", pending)
	if r.StatusCode != 202 || m["runId"] != id2 || m["statusUrl"] == nil || m["requestId"] != nil || r.Header.Get("Retry-After") == "" ||
		r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("async replay of a running run: %d %v %v", r.StatusCode, r.Header, m)
	}
}

// erpDo sends one request to `idemkit dev --policy erp` and returns its
// status, headers and body.
func erpDo(t *testing.T, method, url, ct, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestDevERPLiveWorkOrderRoute: behind `idemkit dev --policy erp` POST
// /api/v1/inbound/work-orders is served under Idempotency-Key with the
// work-order contract: a JSON original and the same work order in XML under
// one key replay (Idempotency-Replayed: true), a replay with Accept:
// application/xml answers in XML, and the deterministic 409
// NO_PROJECT_PROCESSED is stored and replayed; every answer's request_id is
// its own X-Request-ID.
func TestDevERPLiveWorkOrderRoute(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, devERPLiveWorkOrderRoute)
}

func devERPLiveWorkOrderRoute(t *testing.T, e *dynamotest.Emulator) {
	url, key := startPolicyDev(t, e, "erp")
	auth := []string{"Authorization", testutil.Bearer(key)}
	const js = `{"work_order_number":" WO-77 ","projects":[{"code":"p1","name":"Pump","quantity":3}]}`
	const xmlBody = `<work_order><work_order_number>WO-77</work_order_number><projects><project><code>P1</code><name>Pump</name><quantity>3</quantity></project></projects></work_order>`
	first, b := erpDo(t, "POST", url+"/api/v1/inbound/work-orders", "application/json", js, append(auth, "Idempotency-Key", "ERP-WO-77-000001")...)
	var m map[string]any
	_ = json.Unmarshal([]byte(b), &m)
	if first.StatusCode != 201 || first.Header.Get("Idempotency-Replayed") != "false" || m["request_id"] != first.Header.Get("X-Request-Id") || m["work_order_number"] != "WO-77" {
		t.Fatalf("first: %d %v %s", first.StatusCode, first.Header, b)
	}
	r, b := erpDo(t, "POST", url+"/api/v1/inbound/work-orders", "application/xml", xmlBody, append(auth, "Idempotency-Key", "ERP-WO-77-000001", "Accept", "application/xml")...)
	if r.StatusCode != 201 || r.Header.Get("Idempotency-Replayed") != "true" || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/xml") ||
		!strings.Contains(b, "<request_id>"+r.Header.Get("X-Request-Id")+"</request_id>") || r.Header.Get("X-Request-Id") == first.Header.Get("X-Request-Id") {
		t.Fatalf("XML replay of a JSON original: %d %v %s", r.StatusCode, r.Header, b)
	}
	const none = `{"work_order_number":"WO-78","projects":[{"code":"p9","name":"Too many","quantity":20000}]}`
	for i, want := range []string{"false", "true"} {
		r, b := erpDo(t, "POST", url+"/api/v1/inbound/work-orders", "application/json", none, append(auth, "Idempotency-Key", "ERP-WO-78-000001")...)
		_ = json.Unmarshal([]byte(b), &m)
		if r.StatusCode != 409 || m["error"] != "NO_PROJECT_PROCESSED" || r.Header.Get("Idempotency-Replayed") != want || m["request_id"] != r.Header.Get("X-Request-Id") {
			t.Fatalf("NO_PROJECT_PROCESSED %d: %d %v %s", i+1, r.StatusCode, r.Header, b)
		}
	}
}

// TestDevERPXMLErrorAnswerPassesThroughTheGateway: behind `idemkit dev
// --policy erp` the work-order route's deterministic 409
// NO_PROJECT_PROCESSED asked for with Accept: application/xml reaches the
// caller as the handler wrote it, on the first answer and on every replay:
// XML, with X-Request-ID, the key echoed, Idempotency-Replayed and the
// original request id, the request id inside the body, and the connection
// kept open — never replaced by the gateway's own envelope.
func TestDevERPXMLErrorAnswerPassesThroughTheGateway(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, devERPXMLErrorAnswerPassesThroughTheGateway)
}

func devERPXMLErrorAnswerPassesThroughTheGateway(t *testing.T, e *dynamotest.Emulator) {
	url, key := startPolicyDev(t, e, "erp")
	const none = `{"work_order_number":"WO-79","projects":[{"code":"p9","name":"Too many","quantity":20000}]}`
	var firstID string
	for i, want := range []string{"false", "true", "true"} {
		r, b := erpDo(t, "POST", url+"/api/v1/inbound/work-orders", "application/json", none,
			"Authorization", testutil.Bearer(key), "Idempotency-Key", "ERP-WO-79-000001", "Accept", "application/xml")
		id := r.Header.Get("X-Request-Id")
		if i == 0 {
			firstID = id
		}
		if r.StatusCode != 409 || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/xml") || r.Close ||
			!strings.Contains(b, "<error>NO_PROJECT_PROCESSED</error>") || id == "" || !strings.Contains(b, "<request_id>"+id+"</request_id>") ||
			r.Header.Get("Idempotency-Key") != "ERP-WO-79-000001" || r.Header.Get("Idempotency-Replayed") != want ||
			r.Header.Get("Idempotency-Original-Request-Id") != firstID {
			t.Fatalf("answer %d: %d %v %s (close %v)", i+1, r.StatusCode, r.Header, b, r.Close)
		}
	}
}

// TestDevERPEveryAnswerCarriesRequestID: under `idemkit dev --policy erp`
// every answer carries X-Request-ID and every error envelope its
// request_id, equal to it: the gateway's 401 without a credential, 404,
// 405, 413, 415, a malformed run id and a 403 tenant mismatch.
func TestDevERPEveryAnswerCarriesRequestID(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, devERPEveryAnswerCarriesRequestID)
}

func devERPEveryAnswerCarriesRequestID(t *testing.T, e *dynamotest.Emulator) {
	url, key := startPolicyDev(t, e, "erp")
	auth := []string{"Authorization", testutil.Bearer(key)}
	big := strings.Repeat("x", 300<<10)
	for _, c := range []struct {
		name, method, path, ct, body string
		hdr                          []string
		status                       int
	}{
		{"401 without a credential", "POST", "/runs", "application/json", `{}`, nil, 401},
		{"404", "GET", "/nowhere", "", "", auth, 404},
		{"405", "DELETE", "/runs", "", "", auth, 405},
		{"413", "POST", "/runs", "application/json", big, auth, 413},
		{"415", "POST", "/runs", "text/plain", "x", auth, 415},
		{"malformed run id", "GET", "/runs/not-a-run-id", "", "", auth, 400},
		{"403 tenant mismatch", "GET", "/runs/globex~2Fabcdefghijklmnopqrstuv", "", "", auth, 403},
	} {
		r, b := erpDo(t, c.method, url+c.path, c.ct, c.body, c.hdr...)
		var m map[string]any
		_ = json.Unmarshal([]byte(b), &m)
		if r.StatusCode != c.status || r.Header.Get("X-Request-Id") == "" || m["request_id"] != r.Header.Get("X-Request-Id") {
			t.Errorf("%s: %d %v %s", c.name, r.StatusCode, r.Header, b)
		}
	}
}

// TestDevCommerceFailedRunListsItsRetries: behind `idemkit dev --policy
// commerce` (the run written inside the Layer-1 completion transaction) a
// run that failed is retried by POST /runs/{runId}/retry: the new run is
// linked to it by on on the retry's answer and on every read of the new
// run, and every read of the failed run lists it among its retries.
func TestDevCommerceFailedRunListsItsRetries(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, devCommerceFailedRunListsItsRetries)
}

func devCommerceFailedRunListsItsRetries(t *testing.T, e *dynamotest.Emulator) {
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadRequest) }))
	defer refuse.Close()
	url, key := startPolicyDev(t, e, "commerce", "--allow-loopback-webhooks")
	auth := []string{"Authorization", testutil.Bearer(key)}
	_, m := testutil.DoJSON(t, "POST", url+"/runs", `{"workflowId":"webhook","inputs":{"url":"`+refuse.URL+`/hook","payload":{"order":44}}}`,
		append(auth, "Idempotency-Key", "checkout cart 44")...)
	id, _ := m["runId"].(string)
	if id == "" {
		t.Fatalf("createRun: %v", m)
	}
	ext := func(s map[string]any) map[string]any {
		x, _ := s["extensions"].(map[string]any)
		r, _ := x["idemkit.run"].(map[string]any)
		return r
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if _, s := testutil.DoJSON(t, "GET", url+"/runs/"+projected(id), "", auth...); s["status"] == "failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the run did not fail")
		}
	}
	r, m := testutil.DoJSON(t, "POST", url+"/runs/"+projected(id)+"/retry", `{}`, append(auth, "Idempotency-Key", "retry cart 44")...)
	retry, _ := m["runId"].(string)
	if r.StatusCode != 201 || m["on"] != id || retry == "" {
		t.Fatalf("retry: %d %v", r.StatusCode, m)
	}
	if _, s := testutil.DoJSON(t, "GET", url+"/runs/"+projected(retry), "", auth...); ext(s)["on"] != id {
		t.Fatalf("GET of the retry: %v", s)
	}
	_, s := testutil.DoJSON(t, "GET", url+"/runs/"+projected(id), "", auth...)
	if rs, _ := ext(s)["retries"].([]any); len(rs) != 1 || rs[0] != retry {
		t.Fatalf("the failed run's retries: %v, want [%s]", ext(s), retry)
	}
}
