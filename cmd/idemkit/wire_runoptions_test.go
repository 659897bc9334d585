package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/client"
	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/wireschema"
)

// TestDevWireRunOptions: through `idemkit dev` on a real engine, a
// createRun's RunOptions (configurable, tags, metadata) are persisted and
// surface unchanged on getRun's snapshot and on the values-mode events
// frame, each response valid against the closed v2 schema the OpenAPI
// document names (run-snapshot.schema.json for the snapshot); the replay
// of the create answers the first 201; a configurable the host refuses is
// 400 validation_error or 403 in the v2 envelope and creates nothing; a run
// created without RunOptions has none of the fields; metadata filling the
// largest body the host accepts is stored and read back.
func TestDevWireRunOptions(t *testing.T) {
	o := wireschema.Load(t)
	e := dynamotest.Start(t, dynamotest.Moto)
	prefix := fmt.Sprintf("wireopts%d-", time.Now().UnixNano())
	const keyA = "idk_wire-a-0123456789abcdef"
	_, base := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix, "--api-key", keyA+"=acme")
	c := &wireClient{t: t, o: o, base: base, seen: map[string]bool{}}

	const (
		configurable = `{"version":1,"run":{"runTimeoutMs":60000,"escalationThreshold":0.50},"budget":{"maxCostUsd":2.5,"onExhaustion":"fail"},"extensions":{"acme":{"z":1,"a":null}}}`
		tags         = `["b","\u00e9t\u00e9","","b"]`
		metadata     = `{"z":[1,2.50,{"n":null}],"e":1e2,"s":"<&>","a":{}}`
	)
	body := `{"workflowId":"conformance-noop","configurable": ` + configurable + `, "tags": ` + tags + `, "metadata": ` + metadata + `}`
	key := "wire-" + client.NewKey()
	first := c.do("POST", "/runs", "/runs", keyA, body, "Idempotency-Key", key)
	replay := c.do("POST", "/runs", "/runs", keyA, body, "Idempotency-Key", key)
	if first.status != 201 || replay.status != 201 || replay.header.Get("OpenWOP-Idempotent-Replay") != "true" || replay.json["runId"] != first.json["runId"] {
		t.Fatalf("create/replay: %d %s / %d %s", first.status, first.body, replay.status, replay.body)
	}
	p := "/runs/" + runs.ProjectID(first.json["runId"].(string))
	snap := waitTerminal(t, c, p, keyA)
	for _, want := range []string{`"configurable":` + configurable, `"tags":` + tags, `"metadata":` + metadata} {
		if !strings.Contains(string(snap.body), want) {
			t.Errorf("the snapshot lacks %s:\n%s", want, snap.body)
		}
	}
	if r := c.do("GET", "/runs/{runId}/events", p+"/events?streamMode=values", keyA, ""); r.status != 200 || !strings.Contains(string(r.body), `"metadata":`+metadata) {
		t.Errorf("values frame: %d %s", r.status, r.body)
	}

	for _, cc := range []struct {
		configurable string
		status       int
		code         string
	}{
		{`{"version":1,"run":{"runTimeoutMs":0}}`, 400, "validation_error"},
		{`{"version":1,"ai.provider":"x"}`, 400, "validation_error"},
		{`{"version":1,"ai":{"credentialRef":"c"}}`, 403, "credential_forbidden"},
	} {
		k := "wire-" + client.NewKey()
		r := c.do("POST", "/runs", "/runs", keyA, `{"workflowId":"conformance-noop","configurable":`+cc.configurable+`}`, "Idempotency-Key", k)
		if r.status != cc.status || r.json["error"] != cc.code {
			t.Errorf("%s: %d %s, want %d %s", cc.configurable, r.status, r.body, cc.status, cc.code)
		}
		// Not cached: the same key then creates the run.
		if r := c.do("POST", "/runs", "/runs", keyA, `{"workflowId":"conformance-noop"}`, "Idempotency-Key", k); r.status != 201 {
			t.Errorf("the same key after %s: %d %s", cc.configurable, r.status, r.body)
		}
	}

	plain := c.do("POST", "/runs", "/runs", keyA, `{"workflowId":"conformance-noop"}`)
	ps := c.do("GET", "/runs/{runId}", "/runs/"+runs.ProjectID(plain.json["runId"].(string)), keyA, "")
	for _, k := range []string{"configurable", "tags", "metadata"} {
		if _, ok := ps.json[k]; ok {
			t.Errorf("a run created without RunOptions has %s: %s", k, ps.body)
		}
	}

	pad := strings.Repeat("x", apifn.MaxBodyBytes-len(`{"workflowId":"conformance-noop","metadata":{"p":""}}`))
	big := c.do("POST", "/runs", "/runs", keyA, `{"workflowId":"conformance-noop","metadata":{"p":"`+pad+`"}}`)
	if big.status != 201 {
		t.Fatalf("a body of MaxBodyBytes: %d %.200s", big.status, big.body)
	}
	bs := waitTerminal(t, c, "/runs/"+runs.ProjectID(big.json["runId"].(string)), keyA)
	if !strings.Contains(string(bs.body), `"metadata":{"p":"`+pad+`"}`) {
		t.Errorf("the largest metadata did not read back (%d bytes of snapshot)", len(bs.body))
	}
}
