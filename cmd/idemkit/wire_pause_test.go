package main

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/wireschema"
)

// TestDevPauseResume: `idemkit dev` serves POST /runs/{runId}:pause and
// :resume (pauseRun, resumeRun) behind the credential as the deployed HTTP
// API routes them, each answer checked against the OpenWOP document: a
// run holding in a node is paused immediately (202 paused; its hold is
// cut, and it stays paused), a second pause is 409 run_state_conflict;
// the resume (202 running) reaches the executor through the runs stream's
// record of the change, as the deployed mapping's filter passes it, and
// the run completes, its events valid, with one run.paused and one
// run.resumed before its end. Another tenant's run is 403
// id_tenant_mismatch; no credential 401.
func TestDevPauseResume(t *testing.T) {
	o := wireschema.Load(t)
	e := dynamotest.Start(t, dynamotest.Moto)
	prefix := fmt.Sprintf("wirep%d-", time.Now().UnixNano())
	const keyA, keyB = "idk_wire-a-0123456789abcdef", "idk_wire-b-0123456789abcdef"
	_, base := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", prefix, "--idempotency-wait", "2s",
		"--api-key", keyA+"=acme", "--api-key", keyB+"=globex")
	c := &wireClient{t: t, o: o, base: base, seen: map[string]bool{}}
	const pauseTpl, resumeTpl = "/runs/{runId}:pause", "/runs/{runId}:resume"

	// A hold of 10 s: the pause lands long before it ends.
	created := c.do("POST", "/runs", "/runs", keyA, `{"workflowId":"conformance-replay-side-effect","inputs":{"delayMs":10000}}`)
	id := created.json["runId"].(string)
	p := "/runs/" + runs.ProjectID(id)
	r := c.do("POST", pauseTpl, p+":pause", keyA, `{"drainPolicy":"immediate","reason":"wire"}`, "Idempotency-Key", "k-dev-pause-0123456789abcdef")
	if r.status != 202 || r.json["status"] != "paused" {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	if again := c.do("POST", pauseTpl, p+":pause", keyA, ""); again.status != 409 || again.json["error"] != "run_state_conflict" {
		t.Fatalf("second pause: %d %s", again.status, again.body)
	}
	if other := c.do("POST", pauseTpl, p+":pause", keyB, ""); other.status != 403 || other.json["error"] != "id_tenant_mismatch" {
		t.Fatalf("another tenant's pause: %d %s", other.status, other.body)
	}
	if none := c.do("POST", resumeTpl, p+":resume", "", ""); none.status != 401 {
		t.Fatalf("no credential: %d %s", none.status, none.body)
	}
	if s := c.do("GET", "/runs/{runId}", p, keyA, ""); s.json["status"] != "paused" {
		t.Fatalf("snapshot while paused: %s", s.body)
	}
	r = c.do("POST", resumeTpl, p+":resume", keyA, `{"reason":"wire"}`, "Idempotency-Key", "k-dev-resume-0123456789abcdef")
	if r.status != 202 || r.json["status"] != "running" {
		t.Fatalf("resume: %d %s", r.status, r.body)
	}
	end := waitTerminal(t, c, p, keyA)
	if end.json["status"] != "completed" {
		t.Fatalf("the resumed run ended %s", end.body)
	}
	ev := c.do("GET", "/runs/{runId}/events/poll", p+"/events/poll", keyA, "")
	var body struct {
		Events []struct {
			Type    string          `json:"type"`
			Payload json.RawMessage `json:"payload"`
		} `json:"events"`
	}
	if err := json.Unmarshal(ev.body, &body); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, x := range body.Events {
		seen[x.Type]++
	}
	if seen[runs.EventRunPaused] != 1 || seen[runs.EventRunResumed] != 1 || body.Events[len(body.Events)-1].Type != "run.completed" || seen["node.failed"] != 0 {
		t.Fatalf("events %s, want one run.paused, one run.resumed, no node.failed, run.completed last", ev.body)
	}
}
