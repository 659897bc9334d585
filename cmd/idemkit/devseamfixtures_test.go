package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/webhook"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/wireschema"
)

// pollTypes is the event types of a run's log (GET
// /runs/{runId}/events/poll), in order.
func pollTypes(t *testing.T, c *wireClient, p, key string) []string {
	t.Helper()
	r := c.do("GET", "/runs/{runId}/events/poll", p+"/events/poll?timeout=1", key, "")
	evs, _ := r.json["events"].([]any)
	var out []string
	for _, e := range evs {
		m, _ := e.(map[string]any)
		typ, _ := m["type"].(string)
		node, _ := m["nodeId"].(string)
		if node != "" {
			typ += " " + node
		}
		out = append(out, typ)
	}
	return out
}

func count(xs []string, x string) int {
	n := 0
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

// TestDevSeamFixtures: under --conformance-seams, idemkit dev (on moto)
// runs the seams-only fixtures as the public suite's scenarios describe
// them, every answer valid against the closed v2 schemas:
// conformance-failure fails its one node once (node.started, node.failed,
// run failed) and is not retried; conformance-multi-node completes a, b, c
// in order, so its log has node.completed events strictly inside it;
// conformance-cancellable stays running until a cancel, which answers 200
// cancelled, and its log ends with run.cancelled. Without the flag the same
// creates are 400 validation_error.
func TestDevSeamFixtures(t *testing.T) {
	o := wireschema.Load(t)
	e := dynamotest.Start(t, dynamotest.Moto)
	const key = "idk_seamfx-0123456789abcdef"
	_, plain := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", fmt.Sprintf("sfx0%d-", time.Now().UnixNano()),
		"--api-key", key+"=acme")
	c := &wireClient{t: t, o: o, base: plain, seen: map[string]bool{}}
	for _, wf := range webhook.SeamWorkflows {
		if r := c.do("POST", "/runs", "/runs", key, `{"workflowId":"`+wf+`"}`); r.status != 400 || r.json["error"] != "validation_error" {
			t.Fatalf("%s without the seams: %d %s", wf, r.status, r.body)
		}
	}

	_, base := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", fmt.Sprintf("sfx1%d-", time.Now().UnixNano()),
		"--api-key", key+"=acme", "--conformance-seams")
	c = &wireClient{t: t, o: o, base: base, seen: map[string]bool{}}
	create := func(body string) string {
		r := c.do("POST", "/runs", "/runs", key, body)
		if r.status != 201 {
			t.Fatalf("%s: %d %s", body, r.status, r.body)
		}
		return "/runs/" + runs.ProjectID(r.json["runId"].(string))
	}

	fp := create(`{"workflowId":"conformance-failure"}`)
	if s := waitTerminal(t, c, fp, key); s.json["status"] != "failed" {
		t.Fatalf("conformance-failure: %s", s.body)
	}
	if ty := pollTypes(t, c, fp, key); count(ty, "node.started fail") != 1 || count(ty, "node.failed fail") != 1 || count(ty, "run.failed") != 1 {
		t.Fatalf("conformance-failure log: %v", ty)
	}

	mp := create(`{"workflowId":"conformance-multi-node"}`)
	if s := waitTerminal(t, c, mp, key); s.json["status"] != "completed" {
		t.Fatalf("conformance-multi-node: %s", s.body)
	}
	ty := pollTypes(t, c, mp, key)
	var nodes []string
	for _, x := range ty {
		if len(x) > 15 && x[:15] == "node.completed " {
			nodes = append(nodes, x[15:])
		}
	}
	if fmt.Sprint(nodes) != "[a b c]" || ty[len(ty)-1] != "run.completed" {
		t.Fatalf("conformance-multi-node log: %v", ty)
	}

	cp := create(`{"workflowId":"conformance-cancellable","inputs":{"delayMs":60000}}`)
	for deadline := time.Now().Add(2 * time.Minute); ; { // a hang guard
		r := c.do("GET", "/runs/{runId}", cp, key, "")
		if r.json["status"] == "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("conformance-cancellable never running: %s", r.body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := c.do("POST", "/runs/{runId}/cancel", cp+"/cancel", key, `{"reason":"test"}`); r.status != 200 || r.json["status"] != "cancelled" {
		t.Fatalf("cancel a running run: %d %s", r.status, r.body)
	}
	if s := waitTerminal(t, c, cp, key); s.json["status"] != "cancelled" {
		t.Fatalf("conformance-cancellable after the cancel: %s", s.body)
	}
	if ty := pollTypes(t, c, cp, key); count(ty, "run.cancelled") != 1 || count(ty, "node.completed hold") != 0 {
		t.Fatalf("conformance-cancellable log: %v", ty)
	}
}
