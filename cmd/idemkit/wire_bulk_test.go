package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/wireschema"
)

// TestDevBulkCancel: `idemkit dev` serves POST /runs:bulk-cancel
// (bulkCancelRuns) behind the credential, as the deployed HTTP API routes
// it: one entry per id in request order, each answer checked against the
// OpenWOP document's 200 (its entries' envelopes included) or the error
// envelope: an ended run is run_terminal, another tenant's id
// id_tenant_mismatch, an unknown id not_found, a live run cancelled (or
// run_terminal, had it ended first); the key replays the answer byte for
// byte; over 100 ids is 400 with details.maxRunIds; no credential 401;
// another method 405.
func TestDevBulkCancel(t *testing.T) {
	o := wireschema.Load(t)
	e := dynamotest.Start(t, dynamotest.Moto)
	prefix := fmt.Sprintf("wireb%d-", time.Now().UnixNano())
	const keyA, keyB = "idk_wire-a-0123456789abcdef", "idk_wire-b-0123456789abcdef"
	_, base := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix, "--idempotency-wait", "2s",
		"--api-key", keyA+"=acme", "--api-key", keyB+"=globex")
	c := &wireClient{t: t, o: o, base: base, seen: map[string]bool{}}
	const tpl = "/runs:bulk-cancel"

	done := c.do("POST", "/runs", "/runs", keyA, `{"workflowId":"conformance-noop"}`)
	doneID := done.json["runId"].(string)
	waitTerminal(t, c, "/runs/"+runs.ProjectID(doneID), keyA)
	live := c.do("POST", "/runs", "/runs", keyA, `{"workflowId":"conformance-noop"}`).json["runId"].(string)
	other := c.do("POST", "/runs", "/runs", keyB, `{"workflowId":"conformance-noop"}`).json["runId"].(string)
	unknown := "acme/zzzzzzzzzzzzzzzzzzzz"
	ids := []string{doneID, other, unknown, live}
	b, _ := json.Marshal(map[string]any{"runIds": ids, "reason": "wire"})
	const idem = "k-dev-bulk-0123456789abcdef"
	r := c.do("POST", tpl, tpl, keyA, string(b), "Idempotency-Key", idem)
	if r.status != 200 {
		t.Fatalf("bulk cancel: %d %s", r.status, r.body)
	}
	var got struct {
		Results []struct {
			RunID string         `json:"runId"`
			OK    bool           `json:"ok"`
			Error map[string]any `json:"error"`
		} `json:"results"`
	}
	if err := json.Unmarshal(r.body, &got); err != nil || len(got.Results) != len(ids) {
		t.Fatalf("%s %v", r.body, err)
	}
	for i, want := range []string{"run_terminal", "id_tenant_mismatch", "not_found"} {
		if res := got.Results[i]; res.RunID != ids[i] || res.OK || res.Error["error"] != want {
			t.Errorf("entry %d: %+v, want %s for %s", i, res, want, ids[i])
		}
	}
	if res := got.Results[3]; res.RunID != live || !res.OK && res.Error["error"] != "run_terminal" {
		t.Errorf("the live run's entry: %+v", res)
	}
	again := c.do("POST", tpl, tpl, keyA, string(b), "Idempotency-Key", idem)
	if again.status != 200 || !bytes.Equal(again.body, r.body) || again.header.Get("OpenWOP-Idempotent-Replay") != "true" {
		t.Fatalf("replay: %d %s, want %s", again.status, again.body, r.body)
	}
	over := make([]string, 101)
	for i := range over {
		over[i] = fmt.Sprintf("acme/%022d", i)
	}
	b, _ = json.Marshal(map[string]any{"runIds": over})
	if r := c.do("POST", tpl, tpl, keyA, string(b)); r.status != 400 || r.json["details"].(map[string]any)["maxRunIds"] != float64(100) {
		t.Errorf("101 ids: %d %s", r.status, r.body)
	}
	if r := c.do("POST", tpl, tpl, "", `{"runIds":["`+live+`"]}`); r.status != 401 {
		t.Errorf("no credential: %d %s", r.status, r.body)
	}
	if r := c.do("GET", tpl, tpl, keyA, ""); r.status != 405 || !strings.Contains(r.header.Get("Allow"), "POST") {
		t.Errorf("GET: %d %s", r.status, r.body)
	}
}
