package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/settings"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/testutil"
)

// `idemkit dev` with IDEMPOTENCY_ENABLED=false (Layer 1 off): the same
// Idempotency-Key twice creates two runs, neither answer a replay, so
// GET /.well-known/openwop advertises no idempotency family and names no
// idempotency policy, and GET /runs/{runId}/effects, gated on that family,
// is 404 not_found. The line dev prints to try the API does not promise
// a replay.
func TestDevLayer1OffAdvertisesNoIdempotency(t *testing.T) {
	t.Setenv("IDEMPOTENCY_ENABLED", "false")
	e := dynamotest.Start(t, dynamotest.Moto)
	prefix := fmt.Sprintf("devoff%d-", time.Now().UnixNano())
	const key = "idk_off_test_0123456789"
	out, url := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix, "--api-key", key+"=acme")

	resp, m := testutil.DoJSON(t, "GET", url+"/.well-known/openwop", "")
	ext, _ := m["extensions"].(map[string]any)
	if resp.StatusCode != 200 || m["protocolVersions"] == nil {
		t.Fatalf("discovery: %d %v", resp.StatusCode, m)
	}
	if m["idempotency"] != nil || ext[settings.ExtensionIdempotency] != nil {
		t.Errorf("discovery with Layer 1 off advertises idempotency: %v", m)
	}

	var ids []string
	for i := range 2 {
		resp, m := testutil.DoJSON(t, "POST", url+"/runs", `{"workflowId":"conformance-noop"}`,
			"Authorization", testutil.Bearer(key), "Idempotency-Key", "layer1-off-key-0123456789")
		if resp.StatusCode != 201 {
			t.Fatalf("create %d: %d %v", i, resp.StatusCode, m)
		}
		for h := range resp.Header {
			if strings.Contains(strings.ToLower(h), "replay") {
				t.Errorf("create %d carries %s: %v", i, h, resp.Header)
			}
		}
		id, _ := m["runId"].(string)
		ids = append(ids, id)
	}
	if ids[0] == "" || ids[0] == ids[1] {
		t.Fatalf("the same key twice gave runs %q, want two runs", ids)
	}
	if code, m := devCall(t, "GET", url+"/runs/"+runs.ProjectID(ids[0])+"/effects", key, ""); code != 404 || m["error"] != "not_found" {
		t.Errorf("GET effects with Layer 1 off: %d %v, want 404 not_found", code, m)
	}
	if text := out.text(); !strings.Contains(text, "each POST makes a run): curl") || strings.Contains(text, "replay") {
		t.Errorf("with Layer 1 off dev's output promises a replay or offers no try line:\n%s", text)
	}
}
