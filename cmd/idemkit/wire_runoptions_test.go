package main

import (
	"encoding/json"
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

// TestDevWireRunCaps: through `idemkit dev` on a real engine, a run whose
// configurable.run.runTimeoutMs (1000) passes while its hold node waits
// (30 s) ends failed with run_timeout, and a loop run with
// maxLoopIterations 1 ends failed with loop_limit_exceeded before its
// loop's second iteration; each snapshot, poll answer and events stream
// (debug and values modes) validates against the closed v2 schemas, the
// snapshot's error code is the registry code, and the log holds one
// cap.breached (payload valid against capBreached, its kind run-duration
// or loop-iterations) right before run.failed.
func TestDevWireRunCaps(t *testing.T) {
	o := wireschema.Load(t)
	capSch, err := o.Schema("run-event-payloads.schema.json#/$defs/capBreached")
	if err != nil {
		t.Fatal(err)
	}
	e := dynamotest.Start(t, dynamotest.Moto)
	prefix := fmt.Sprintf("wirecaps%d-", time.Now().UnixNano())
	const keyA = "idk_wire-a-0123456789abcdef"
	_, base := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix, "--api-key", keyA+"=acme")
	c := &wireClient{t: t, o: o, base: base, seen: map[string]bool{}}

	for _, cc := range []struct {
		body, code, kind string
	}{
		{`{"workflowId":"conformance-replay-side-effect","inputs":{"delayMs":30000},"configurable":{"version":1,"run":{"runTimeoutMs":1000}}}`, "run_timeout", "run-duration"},
		{`{"workflowId":"conformance-replay-ordinal-loop","inputs":{"delayMs":0},"configurable":{"version":1,"run":{"maxLoopIterations":1}}}`, "loop_limit_exceeded", "loop-iterations"},
	} {
		created := c.do("POST", "/runs", "/runs", keyA, cc.body, "Idempotency-Key", "wire-"+client.NewKey())
		if created.status != 201 {
			t.Fatalf("create %s: %d %s", cc.body, created.status, created.body)
		}
		p := "/runs/" + runs.ProjectID(created.json["runId"].(string))
		snap := waitTerminal(t, c, p, keyA)
		if e, _ := snap.json["error"].(map[string]any); snap.json["status"] != "failed" || e["code"] != cc.code {
			t.Fatalf("%s: snapshot %s", cc.code, snap.body)
		}
		poll := c.do("GET", "/runs/{runId}/events/poll", p+"/events/poll?timeout=1", keyA, "")
		var body struct {
			Events []struct {
				Type    string          `json:"type"`
				Payload json.RawMessage `json:"payload"`
			} `json:"events"`
		}
		if err := json.Unmarshal(poll.body, &body); err != nil || len(body.Events) < 2 {
			t.Fatalf("%s: poll %d %s", cc.code, poll.status, poll.body)
		}
		n := len(body.Events)
		last, breach := body.Events[n-1], body.Events[n-2]
		if last.Type != "run.failed" || breach.Type != "cap.breached" || !strings.Contains(string(last.Payload), `"code":"`+cc.code+`"`) {
			t.Fatalf("%s: the log ends %s %s, %s", cc.code, breach.Type, last.Type, last.Payload)
		}
		if err := wireschema.Validate(capSch, breach.Payload); err != nil || !strings.Contains(string(breach.Payload), `"kind":"`+cc.kind+`"`) {
			t.Fatalf("%s: cap.breached %s: %v", cc.code, breach.Payload, err)
		}
		for i := 0; i < n-2; i++ {
			if body.Events[i].Type == "cap.breached" {
				t.Fatalf("%s: two cap.breached events: %s", cc.code, poll.body)
			}
		}
		for _, mode := range []string{"debug", "values"} {
			if r := c.do("GET", "/runs/{runId}/events", p+"/events?streamMode="+mode, keyA, ""); r.status != 200 {
				t.Errorf("%s: %s stream %d %s", cc.code, mode, r.status, r.body)
			}
		}
	}
}
