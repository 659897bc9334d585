package apifn

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/policy/erp"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/ledger"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

const (
	testWorkOrderJSON = `{"work_order_number":"WO-1","projects":[{"code":"p-1","name":"Pump","quantity":2}]}`
	testWorkOrderXML  = `<work_order><work_order_number>WO-1</work_order_number><projects><project><code>P-1</code><name>Pump</name><quantity>2</quantity></project></projects></work_order>`
)

// testWorkOrderReq is a request on the format-validation route, with no
// authorizer context (the route opts out of the authorizer).
func testWorkOrderReq(contentType, body string, headers map[string]string) events.APIGatewayV2HTTPRequest {
	h := map[string]string{"content-type": contentType}
	for k, v := range headers {
		h[k] = v
	}
	return events.APIGatewayV2HTTPRequest{
		RouteKey: "POST " + TestWorkOrderPath, RawPath: TestWorkOrderPath, Headers: h, Body: body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{RequestID: "req-test-route",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: TestWorkOrderPath}},
	}
}

// TestERPTestRoutePublicNeverTouchesStore: POST
// /api/v1/inbound/work-orders/test is public (no credential: the dev
// gateway's apifn.Authorized says it skips the authorizer, and a request
// with no authorizer context is served) and needs no Idempotency-Key (none,
// a valid one, a malformed one and two are all served alike, with no
// idempotency headers, even under the ERP policy with keys required). It
// answers whether the work order is valid — JSON or XML, rendered per
// Accept; 400 naming the field; 415 — and never calls a store: zero
// DynamoDB round trips on the idempotency and runs tables, on every engine.
func TestERPTestRoutePublicNeverTouchesStore(t *testing.T) {
	if Authorized("POST", TestWorkOrderPath) {
		t.Fatalf("the format-validation route passes the authorizer")
	}
	if m, _, found, _ := MatchRoute("POST", TestWorkOrderPath); !found || !m.Route.Public || m.Route.Idempotent || m.Route.Op != OpTestWorkOrder {
		t.Fatalf("route %+v found %v", m.Route, found)
	}
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		cnt := dynamotest.NewCounter()
		c := e.Client(dynamotest.FastRetries, cnt.Middleware())
		st, err := idemdynamo.New(idemdynamo.Config{Client: c, Table: e.CreateTable(t, "IdempotencyTable")})
		if err != nil {
			t.Fatal(err)
		}
		g, err := idem.New(idem.Config{Store: st, Policy: erp.Policy, Required: true, Tenant: idem.AuthorizerKey("tenantId"), Logger: discard()})
		if err != nil {
			t.Fatal(err)
		}
		l, err := ledger.New(ledger.Config{Store: ledgermem.New()})
		if err != nil {
			t.Fatal(err)
		}
		runs := &runs.DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable")}
		h, err := New(Config{Runs: runs, Guard: g, Ledger: l, Logger: discard()})
		if err != nil {
			t.Fatal(err)
		}
		do := func(ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
			t.Helper()
			r, err := h.Handle(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		cnt.Reset()
		for name, hdrs := range map[string]map[string]string{
			"no key":       nil,
			"a key":        {"idempotency-key": "ERP-WO-20260807-000001"},
			"a bad key":    {"idempotency-key": " bad "},
			"two keys":     {"idempotency-key": "ERP-WO-20260807-000001,ERP-WO-20260807-000002"},
			"with a token": {"authorization": "Bearer not-checked"},
		} {
			for range 2 {
				r := do(testWorkOrderReq("application/json", testWorkOrderJSON, hdrs))
				var m map[string]any
				_ = json.Unmarshal([]byte(r.Body), &m)
				if r.StatusCode != 200 || m["valid"] != true || m["work_order_number"] != "WO-1" || m["projects"] != float64(1) {
					t.Fatalf("%s: %d %s", name, r.StatusCode, r.Body)
				}
				for _, hd := range []string{erp.HeaderReplayed, idem.HeaderKey, erp.HeaderOriginalRequestID} {
					if r.Headers[hd] != "" {
						t.Fatalf("%s: idempotency header %s on the test route: %v", name, hd, r.Headers)
					}
				}
				// Every answer under the ERP policy carries its request id.
				if r.Headers[erp.HeaderRequestID] != "req-test-route" {
					t.Fatalf("%s: X-Request-ID %q on the test route", name, r.Headers[erp.HeaderRequestID])
				}
			}
		}
		if r := do(testWorkOrderReq("application/xml", testWorkOrderXML, map[string]string{"accept": "application/xml"})); r.StatusCode != 200 ||
			r.Headers["Content-Type"] != "application/xml" || !strings.Contains(r.Body, "<valid>true</valid>") {
			t.Fatalf("XML work order, Accept XML: %d %v %s", r.StatusCode, r.Headers, r.Body)
		}
		bad := do(testWorkOrderReq("application/json", `{"work_order_number":"WO-1","projects":[{"code":"P-1","quantity":0}]}`, nil))
		var env map[string]any
		_ = json.Unmarshal([]byte(bad.Body), &env)
		if d, _ := env["details"].(map[string]any); bad.StatusCode != 400 || env["error"] != "validation_error" || d["field"] != "/projects/0/quantity" {
			t.Fatalf("invalid work order: %d %s", bad.StatusCode, bad.Body)
		}
		if r := do(testWorkOrderReq("text/csv", "WO-1,P-1,2", nil)); r.StatusCode != 415 {
			t.Fatalf("text/csv: %d %s", r.StatusCode, r.Body)
		}
		if n := cnt.Total(); n != 0 {
			t.Fatalf("the test route made %d DynamoDB round trips %v, want 0", n, cnt.Ops())
		}
	})
}
