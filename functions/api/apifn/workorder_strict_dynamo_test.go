package apifn

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/apikeys"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/functions/host/workorder"
	"github.com/idemkit/idemkit/idem"
	idemdynamo "github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
	"github.com/idemkit/idemkit/internal/dynamotest"
	"github.com/idemkit/idemkit/internal/header"
	"github.com/idemkit/idemkit/ledger"
	ledgermem "github.com/idemkit/idemkit/ledger/memstore"
)

// liveWorkOrderReq is a keyed request on the live work-order route with
// the credential every policy reads (tenant, commerce's namespace and
// worker, the ERP policy's client, company and organisation).
func liveWorkOrderReq(key, contentType, body string) events.APIGatewayV2HTTPRequest {
	e := ev("POST", LiveWorkOrderPath, "acme", key, body)
	e.RouteKey = workorder.RouteLive
	e.Headers["content-type"] = contentType
	for k, v := range map[string]any{"namespace": "shop", "worker": "checkout", "clientId": "erp-client", "companyId": "C100", "organizationId": "ORG-1"} {
		e.RequestContext.Authorizer.Lambda[k] = v
	}
	return e
}

// TestWorkOrderRouteRefusesUndefinedBodiesUnderEveryPolicy: the live
// work-order route as the deployed api function wires it (the work-order
// contract on the route under every policy, DynamoDB stores, every
// engine): a body the contract does not define — invalid UTF-8, a Latin-1
// charset, an other-case or duplicate member, an XML element or attribute
// it does not define, a foreign namespace, an element inside a scalar —
// gets 400 validation_error under each policy and is never answered with
// another work order's replay, while a valid work order and its XML twin
// still replay and a different one under the key is that policy's 409.
func TestWorkOrderRouteRefusesUndefinedBodiesUnderEveryPolicy(t *testing.T) {
	const original = `{"work_order_number":"WO-7","projects":[{"code":"p-1","name":"Pump","quantity":2}]}`
	const twin = "<work_order>\n <work_order_number>WO-7</work_order_number>\n <projects><project><code>P-1</code><name>Pump</name><quantity>2</quantity></project></projects>\n</work_order>"
	const px = `<project><code>P-1</code><name>Pump</name><quantity>2</quantity></project>`
	refused := []struct{ name, ct, body string }{
		{"invalid UTF-8", "application/json", `{"work_order_number":"WO-7` + "\xff" + `","projects":[{"code":"P-1","name":"Pump","quantity":2}]}`},
		{"Latin-1 charset", "application/json; charset=iso-8859-1", `{"work_order_number":"WO-7","projects":[{"code":"P-1","name":"Pump` + "\xe9" + `","quantity":2}]}`},
		{"member in another case", "application/json", `{"Work_Order_Number":"WO-7","projects":[{"code":"P-1","name":"Pump","quantity":2}]}`},
		{"duplicate member", "application/json", `{"work_order_number":"WO-8","work_order_number":"WO-7","projects":[{"code":"P-1","name":"Pump","quantity":2}]}`},
		{"XML unknown element", "application/xml", `<work_order><work_order_number>WO-7</work_order_number><extra/><projects>` + px + `</projects></work_order>`},
		{"XML attribute", "application/xml", `<work_order v="2"><work_order_number>WO-7</work_order_number><projects>` + px + `</projects></work_order>`},
		{"XML foreign namespace", "text/xml", `<work_order xmlns="urn:x"><work_order_number>WO-7</work_order_number><projects>` + px + `</projects></work_order>`},
		{"XML element inside a scalar", "application/xml", `<work_order><work_order_number>WO-<b>7</b></work_order_number><projects>` + px + `</projects></work_order>`},
	}
	for _, p := range []idem.Policy{idem.PolicyOpenWOP, commerce.Policy, erp.Policy} {
		t.Run(p.Name, func(t *testing.T) {
			dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
				c := e.Client(dynamotest.FastRetries)
				st, err := idemdynamo.New(idemdynamo.Config{Client: c, Table: e.CreateTable(t, "IdempotencyTable")})
				if err != nil {
					t.Fatal(err)
				}
				g, err := idem.New(idem.Config{Store: st, Policy: p, Tenant: idem.AuthorizerKey("tenantId"), BodyTenantField: "tenantId", Logger: discard(),
					Routes: map[string]idem.Route{workorder.RouteLive: {Contract: workorder.Contract()}}})
				if err != nil {
					t.Fatal(err)
				}
				l, err := ledger.New(ledger.Config{Store: ledgermem.New()})
				if err != nil {
					t.Fatal(err)
				}
				h, err := New(Config{Runs: &runs.DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable")}, Guard: g, Ledger: l, Logger: discard()})
				if err != nil {
					t.Fatal(err)
				}
				do := func(ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, map[string]any) {
					t.Helper()
					r, err := h.Handle(context.Background(), ev)
					if err != nil {
						t.Fatal(err)
					}
					var m map[string]any
					_ = json.Unmarshal([]byte(r.Body), &m)
					return r, m
				}
				replayed := func(r events.APIGatewayV2HTTPResponse) bool {
					return header.First(r.Headers, erp.HeaderReplayed) == "true" || header.First(r.Headers, "Idempotent-Replayed") == "true" ||
						header.First(r.Headers, "OpenWOP-Idempotent-Replay") == "true"
				}
				key := "WO-KEY-" + apikeys.NewAPIKey()[:20]
				if r, _ := do(liveWorkOrderReq(key, "application/json", original)); r.StatusCode != 201 || replayed(r) {
					t.Fatalf("original: %d %v %s", r.StatusCode, r.Headers, r.Body)
				}
				if r, _ := do(liveWorkOrderReq(key, "application/xml", twin)); r.StatusCode != 201 || !replayed(r) {
					t.Fatalf("the XML twin under the key: %d %v %s, want the original replayed", r.StatusCode, r.Headers, r.Body)
				}
				for _, c := range refused {
					r, m := do(liveWorkOrderReq(key, c.ct, c.body))
					if r.StatusCode != 400 || m["error"] != "validation_error" || replayed(r) {
						t.Errorf("%s under the original's key: %d %v %s, want 400 validation_error", c.name, r.StatusCode, r.Headers, r.Body)
					}
				}
				other := `{"work_order_number":"WO-7","projects":[{"code":"p-1","name":"Pump","quantity":3}]}`
				if r, _ := do(liveWorkOrderReq(key, "application/json", other)); r.StatusCode != 409 || replayed(r) {
					t.Errorf("another work order under the key: %d %v %s, want 409", r.StatusCode, r.Headers, r.Body)
				}
			})
		})
	}
}

// TestERPXMLErrorAnswerKeepsItsHeadersOnLambda: as the deployed api
// function answers it (the payload 2.0 response API Gateway relays as is),
// the work-order route's deterministic 409 NO_PROJECT_PROCESSED asked for
// with Accept: application/xml is XML with X-Request-ID, the key echoed,
// Idempotency-Replayed and the original request id, on the first answer
// and on the replay, on every engine.
func TestERPXMLErrorAnswerKeepsItsHeadersOnLambda(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		c := e.Client(dynamotest.FastRetries)
		st, err := idemdynamo.New(idemdynamo.Config{Client: c, Table: e.CreateTable(t, "IdempotencyTable")})
		if err != nil {
			t.Fatal(err)
		}
		g, err := idem.New(idem.Config{Store: st, Policy: erp.Policy, Tenant: idem.AuthorizerKey("tenantId"), Logger: discard(),
			Routes: map[string]idem.Route{workorder.RouteLive: {Contract: workorder.Contract()}}})
		if err != nil {
			t.Fatal(err)
		}
		l, _ := ledger.New(ledger.Config{Store: ledgermem.New()})
		h, err := New(Config{Runs: &runs.DynamoRuns{Client: c, Table: e.CreateTable(t, "RunsTable")}, Guard: g, Ledger: l, Logger: discard()})
		if err != nil {
			t.Fatal(err)
		}
		const none = `{"work_order_number":"WO-79","projects":[{"code":"p9","quantity":20000}]}`
		var firstID string
		for i, want := range []string{"false", "true"} {
			req := liveWorkOrderReq("ERP-WO-79-000001", "application/json", none)
			req.RequestContext.RequestID = fmt.Sprintf("req-lambda-%d", i)
			req.Headers["accept"] = "application/xml"
			r, err := h.Handle(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				firstID = req.RequestContext.RequestID
			}
			if r.StatusCode != 409 || header.First(r.Headers, "Content-Type") != "application/xml" || !strings.Contains(r.Body, "<error>NO_PROJECT_PROCESSED</error>") ||
				header.First(r.Headers, erp.HeaderRequestID) != req.RequestContext.RequestID || !strings.Contains(r.Body, "<request_id>"+req.RequestContext.RequestID+"</request_id>") ||
				header.First(r.Headers, idem.HeaderKey) != "ERP-WO-79-000001" || header.First(r.Headers, erp.HeaderReplayed) != want ||
				header.First(r.Headers, erp.HeaderOriginalRequestID) != firstID {
				t.Fatalf("answer %d: %d %v %s", i+1, r.StatusCode, r.Headers, r.Body)
			}
		}
	})
}
