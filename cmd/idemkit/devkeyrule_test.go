package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/api/apifn"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	idemmem "github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// deployedAnswer is the deployed api function's answer to POST /runs with
// the Idempotency-Key value key as API Gateway hands it over (whitespace
// kept), under policy, from tenant acme with the credential attributes
// dev's seeded keys carry: its status and its body, request_id left out
// (it differs per request).
func deployedAnswer(t *testing.T, policy, key string) (int, map[string]any) {
	t.Helper()
	p, err := idem.PolicyNamed(policy)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
	g, err := idem.New(idem.Config{Policy: p, Tenant: idem.AuthorizerKey("tenantId"), Store: idemmem.New(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(ledger.Config{Store: ledgermem.New()})
	if err != nil {
		t.Fatal(err)
	}
	h, err := apifn.New(apifn.Config{Runs: runs.NewMemRuns(), Guard: g, Ledger: l, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	e := events.APIGatewayV2HTTPRequest{RawPath: "/runs", Body: createRunBody,
		Headers: map[string]string{"content-type": "application/json", "idempotency-key": key}}
	e.RequestContext.HTTP.Method, e.RequestContext.HTTP.Path = "POST", "/runs"
	e.RequestContext.DomainName, e.RequestContext.RequestID = "api.example.com", "req-1"
	e.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{Lambda: map[string]any{
		"tenantId": "acme", "namespace": "acme-ns", "worker": "demo-worker",
		"clientId": "acme-client", "companyId": "acme-company", "organizationId": "acme-org"}}
	r, err := h.Handle(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal([]byte(r.Body), &m)
	delete(m, "request_id")
	return r.StatusCode, m
}

// TestDevRefusesIdempotencyKeysAsTheDeployedAPIDoes: `idemkit dev`
// checks an Idempotency-Key with the one rule the deployed api function
// uses (its policy's key grammar, in Layer 1), on the key as received: a
// key of one character is refused under the OpenWOP and ERP policies
// (details.reason "length") and accepted under the commerce policy (any
// string of 1..255 characters); a key of whitespace only, or with leading
// whitespace, is refused under every policy with 400
// idempotency_key_invalid, details.reason "whitespace", in the policy's
// envelope ({error, message, details} under the OpenWOP policy): dev's
// answer is the deployed function's, status and body.
func TestDevRefusesIdempotencyKeysAsTheDeployedAPIDoes(t *testing.T) {
	e := dynamotest.Start(t, dynamotest.Moto)
	for _, policy := range devPolicies {
		t.Run(policy, func(t *testing.T) {
			d := &rawDev{e: e, policy: policy, apiKey: "idk_keyrule_test_0123456789",
				prefix: fmt.Sprintf("keyrule-%s-%d-", policy, time.Now().UnixNano())}
			_, url := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", d.prefix, "--api-key", d.apiKey+"=acme", "--policy", policy)
			d.addr = strings.TrimPrefix(url, "http://")
			for _, key := range []string{"a", " ", "   ", "\t", " \t ", " " + uniqueKey("lead")} {
				got := d.exchange(t, d.postRuns(key, createRunBody), 1)[0]
				status, want := deployedAnswer(t, policy, key)
				if got.status != status {
					t.Errorf("key %q: dev %d %s, the deployed api %d %v", key, got.status, got.raw, status, want)
					continue
				}
				if status/100 == 2 {
					if policy != "commerce" || key != "a" {
						t.Errorf("key %q: %d, want it refused", key, status)
					}
					continue
				}
				body := maps.Clone(got.body)
				delete(body, "request_id")
				if fmt.Sprint(body) != fmt.Sprint(want) {
					t.Errorf("key %q: dev answers %v, the deployed api %v", key, body, want)
				}
				wantReason := "whitespace"
				if key == "a" {
					wantReason = "length"
				}
				if policy == "openwop" {
					if ks := slices.Sorted(maps.Keys(body)); fmt.Sprint(ks) != "[details error message]" || body["error"] != "idempotency_key_invalid" {
						t.Errorf("key %q: envelope %v, want {error: idempotency_key_invalid, message, details}", key, body)
					}
					if det, _ := body["details"].(map[string]any); det["reason"] != wantReason {
						t.Errorf("key %q: details %v, want reason %q", key, body["details"], wantReason)
					}
				}
			}
		})
	}
}
