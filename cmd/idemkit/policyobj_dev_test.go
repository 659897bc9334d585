package main

import (
	"fmt"
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
