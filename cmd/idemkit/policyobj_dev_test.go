package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
)

// startPolicyDev starts `idemkit dev --policy policy` (in process) on
// DynamoDB Local, with one API key for tenant acme, and returns its URL and
// the key.
func startPolicyDev(t *testing.T, policy string, extra ...string) (url, key string) {
	t.Helper()
	e := dynamotest.Start(t, dynamotest.DynamoDBLocal)
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
	url, key := startPolicyDev(t, "openwop")
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
	url, key := startPolicyDev(t, "commerce", "--allow-loopback-webhooks")
	post := func(ik, mode, body string) (*http.Response, map[string]any) {
		return testutil.DoJSON(t, "POST", url+"/runs", body, "Authorization", testutil.Bearer(key), "Idempotency-Key", ik, "Idempotency-Mode", mode)
	}
	failing := `{"workflowId":"webhook","inputs":{"url":"` + refuse.URL + `/hook","payload":{"order":42}}}`
	first, m := post("checkout cart 42", "", failing)
	id, _ := m["runId"].(string)
	if first.StatusCode != 201 || id == "" {
		t.Fatalf("createRun: %d %v", first.StatusCode, m)
	}
	deadline := time.Now().Add(60 * time.Second)
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
