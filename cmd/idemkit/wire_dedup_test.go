package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/idemkit/idemkit/client"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/wireschema"
)

// TestDevWireDedup: through `idemkit dev` on a real engine, createRun with
// `OpenWOP-Dedup: enforce` and a scopeId is refused 409
// run_already_active with Retry-After while the tenant's run of that
// scopeId is live (every answer checked against the OpenAPI document by
// wireClient); another tenant's run of the same scopeId is created; the
// refused key creates its run once the holder was cancelled; without the
// header the scopeId changes nothing.
func TestDevWireDedup(t *testing.T) {
	o := wireschema.Load(t)
	e := dynamotest.Start(t, dynamotest.Moto)
	const keyA, keyB = "idk_wire-dedup-a-0123456789", "idk_wire-dedup-b-0123456789"
	_, base := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", fmt.Sprintf("wirededup%d-", time.Now().UnixNano()),
		"--api-key", keyA+"=acme", "--api-key", keyB+"=globex", "--conformance-seams")
	c := &wireClient{t: t, o: o, base: base, seen: map[string]bool{}}
	const body = `{"workflowId":"conformance-cancellable","inputs":{"delayMs":60000},"scopeId":"order-7"}`
	create := func(api, idem string, hdr ...string) wireResp {
		return c.do("POST", "/runs", "/runs", api, body, append([]string{"Idempotency-Key", idem}, hdr...)...)
	}
	cancel := func(api, runID string) {
		p := "/runs/" + runs.ProjectID(runID)
		if r := c.do("POST", "/runs/{runId}/cancel", p+"/cancel", api, `{"reason":"test"}`); r.status != 200 {
			t.Fatalf("cancel %s: %d %s", runID, r.status, r.body)
		}
		waitTerminal(t, c, p, api)
	}
	holder := create(keyA, "wire-"+client.NewKey(), "OpenWOP-Dedup", "enforce")
	if holder.status != 201 {
		t.Fatalf("first enforced create: %d %s", holder.status, holder.body)
	}
	refusedKey := "wire-" + client.NewKey()
	r := create(keyA, refusedKey, "OpenWOP-Dedup", "enforce")
	if r.status != 409 || r.json["error"] != "run_already_active" || r.header.Get("Retry-After") != "5" {
		t.Fatalf("second enforced create while live: %d %v %s", r.status, r.header, r.body)
	}
	other := create(keyB, "wire-"+client.NewKey(), "OpenWOP-Dedup", "enforce")
	if other.status != 201 {
		t.Fatalf("another tenant, same scopeId: %d %s", other.status, other.body)
	}
	plain := create(keyA, "wire-"+client.NewKey())
	if plain.status != 201 {
		t.Fatalf("without the header: %d %s", plain.status, plain.body)
	}
	cancel(keyA, holder.json["runId"].(string))
	again := create(keyA, refusedKey, "OpenWOP-Dedup", "enforce")
	if again.status != 201 || again.json["runId"] == holder.json["runId"] {
		t.Fatalf("the refused key after the holder ended: %d %s", again.status, again.body)
	}
	for _, x := range []struct {
		api string
		r   wireResp
	}{{keyA, again}, {keyB, other}, {keyA, plain}} {
		cancel(x.api, x.r.json["runId"].(string))
	}
}
