package webhook

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/ledger"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// TestDeliveryGoesOnlyWhereCreateRunChecked (RED_TEAM 443): createRun
// reads inputs.url, inputs.payload, inputs.businessKey and inputs.delayMs
// by their exact member names; the delivery read the stored inputs with
// Go's case-insensitive struct decoding, so a member spelled "URL" (or
// "Url", "BusinessKey", ...) after the checked one, or in place of an
// optional one, chose the destination, payload or identity of the
// delivery without createRun ever checking it, and against what the run's
// inputs show as inputs.url.
func TestDeliveryGoesOnlyWhereCreateRunChecked(t *testing.T) {
	var checked, unchecked atomic.Int32
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { checked.Add(1) }))
	defer good.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { unchecked.Add(1) }))
	defer other.Close()
	policy := WebhookPolicy{AllowLoopback: true}

	body, _ := json.Marshal(map[string]any{"workflowId": WorkflowWebhook, "inputs": json.RawMessage(
		`{"url":` + quote(good.URL) + `,"payload":{"a":1},"URL":` + quote(other.URL) + `,"Payload":{"b":2},"BusinessKey":"evt-9"}`)})
	req, e := ParseCreate(body, &policy)
	if e != nil {
		t.Fatal(e)
	}
	if req.URL != good.URL || req.BusinessKey != "" {
		t.Fatalf("createRun read url %q businessKey %q", req.URL, req.BusinessKey)
	}
	dest, payload, err := webhookInputs(req.Inputs)
	if err != nil || dest != req.URL || string(payload) != string(req.Payload) {
		t.Fatalf("the delivery reads url %q payload %s (%v); createRun checked url %q payload %s", dest, payload, err, req.URL, req.Payload)
	}
	run := runs.NewRun("acme", WorkflowWebhook, req.Inputs, time.Now())
	id, err := WebhookIdentity(run)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := WebhookIdentity(runs.NewRun("acme", WorkflowWebhook, []byte(`{"url":"https://example.com/"}`), time.Now())); id.Keying != want.Keying {
		t.Fatalf("keying %q: a member createRun did not read keyed the effect (want %q)", id.Keying, want.Keying)
	}
	l, err := ledger.New(ledger.Config{Store: ledgermem.New()})
	if err != nil {
		t.Fatal(err)
	}
	w := &Webhook{Ledger: l, Policy: policy, MaxTries: 1}
	if _, err := w.Deliver(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	if checked.Load() != 1 || unchecked.Load() != 0 {
		t.Fatalf("checked destination got %d requests, unchecked %d", checked.Load(), unchecked.Load())
	}

	// A graph workflow's optional url: absent at createRun, so the node
	// goes to the host's fixture destination, whatever else is spelled.
	g, _ := GraphOf(WorkflowReplaySideEffect)
	body, _ = json.Marshal(map[string]any{"workflowId": WorkflowReplaySideEffect, "inputs": json.RawMessage(
		`{"delayMs":5,"URL":` + quote(other.URL) + `,"DelayMs":60000}`)})
	req, e = ParseCreate(body, &policy)
	if e != nil {
		t.Fatal(e)
	}
	if in := ReadGraphInputs(g, req.Inputs); in.URL != req.URL || in.DelayMs != req.DelayMs {
		t.Fatalf("the executor reads %+v; createRun checked url %q delayMs %d", in, req.URL, req.DelayMs)
	}
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }
