package dynamostore_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/dynamostore"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestGuardRoundTripsPerPath pins the Layer-1 round trips of each path a
// request takes through the API Gateway adapters (HTTPAPI, REST), under
// each policy (OpenWOP, commerce, ERP), on every engine, by operation:
// a first execution 2 PutItems (claim, completion); a replay, an in-flight
// answer (no wait budget) and a key mismatch 1 PutItem (the refused
// claim; one GetItem more where the engine returns no item from it); a
// handler's 5xx or error, never a key's answer, the claim and its
// release (an UpdateItem; under the commerce policy a 5xx is the
// action's recorded failure, a completion); a request refused before the
// claim (no key where keys are required, a key outside the policy's
// grammar) none; the same key under another tenant a first execution of
// its own (another record), never more than a plain new key.
func TestGuardRoundTripsPerPath(t *testing.T) {
	dynamotest.ForEach(t, func(t *testing.T, e *dynamotest.Emulator) {
		for _, p := range []struct {
			policy idem.Policy
			key    func() string
		}{{idem.PolicyOpenWOP, newKey}, {commerce.Policy, newKey}, {erp.Policy, erpKey}} {
			t.Run(p.policy.Name, func(t *testing.T) {
				cnt := dynamotest.NewCounter()
				st, err := dynamostore.New(dynamostore.Config{Client: e.Client(dynamotest.FastRetries, cnt.Middleware()), Table: e.CreateTable(t, "IdempotencyTable")})
				if err != nil {
					t.Fatal(err)
				}
				g, err := idem.New(idem.Config{Store: st, Policy: p.policy, Required: true, Tenant: idem.AuthorizerKey("tenantId"), Wait: -1,
					Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
				if err != nil {
					t.Fatal(err)
				}
				var mu sync.Mutex
				holds := map[string]chan struct{}{} // body -> release
				held := make(chan struct{}, 1)
				answer := func(body string) (int, error) {
					mu.Lock()
					release := holds[body]
					mu.Unlock()
					if release != nil {
						held <- struct{}{}
						<-release
					}
					switch body {
					case `{"fail":5}`:
						return 500, nil
					case `{"err":true}`:
						return 0, errors.New("handler error")
					}
					return 201, nil
				}
				httpapi := g.HTTPAPI(func(_ context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
					code, err := answer(ev.Body)
					return events.APIGatewayV2HTTPResponse{StatusCode: code, Body: `{"ok":true}`, Headers: map[string]string{"Content-Type": "application/json"}}, err
				})
				rest := g.REST(func(_ context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
					code, err := answer(ev.Body)
					return events.APIGatewayProxyResponse{StatusCode: code, Body: `{"ok":true}`, Headers: map[string]string{"Content-Type": "application/json"}}, err
				})
				attrs := func(tenant string) map[string]any {
					return map[string]any{"tenantId": tenant, "namespace": "shop", "worker": "checkout",
						"clientId": "erp-client", "companyId": "C100", "organizationId": "ORG-1"}
				}
				type call func(tenant, key, body string) int
				adapters := map[string]call{
					"HTTPAPI": func(tenant, key, body string) int {
						ev := guardEvent(key, body)
						if key == "" {
							delete(ev.Headers, "idempotency-key")
						}
						ev.RequestContext.Authorizer.Lambda = attrs(tenant)
						r, err := httpapi(context.Background(), ev)
						if err != nil {
							return -1
						}
						return r.StatusCode
					},
					"REST": func(tenant, key, body string) int {
						ev := events.APIGatewayProxyRequest{HTTPMethod: "POST", Resource: "/runs", Path: "/runs", Body: body,
							Headers: map[string]string{"content-type": "application/json"}}
						if key != "" {
							ev.Headers["idempotency-key"] = key
						}
						ev.RequestContext.RequestID = "req-" + rnd(4)
						ev.RequestContext.Authorizer = attrs(tenant)
						r, err := rest(context.Background(), ev)
						if err != nil {
							return -1
						}
						return r.StatusCode
					},
				}
				refused := map[string]int{"PutItem": 1}
				if !e.Caps.ReturnValuesOnConditionCheckFailure {
					refused["GetItem"] = 1
				}
				first := map[string]int{"PutItem": 2}
				// A 5xx or an error is never a key's answer: the claim is
				// released (one UpdateItem) for the key's retry, except a
				// commerce policy's 5xx, recorded as the action's failure.
				released := map[string]int{"PutItem": 1, "UpdateItem": 1}
				failed5xx := released
				if p.policy.Name == commerce.Policy.Name {
					failed5xx = first
				}
				for name, do := range adapters {
					for _, c := range []struct {
						outcome string
						setup   func() (tenant, key, body string)
						ops     map[string]int
					}{
						{"first execution", func() (string, string, string) { return "acme", p.key(), `{"n":1}` }, first},
						{"replay", func() (string, string, string) {
							k := p.key()
							do("acme", k, `{"n":1}`)
							return "acme", k, `{"n":1}`
						}, refused},
						{"key mismatch", func() (string, string, string) {
							k := p.key()
							do("acme", k, `{"n":1}`)
							return "acme", k, `{"n":2}`
						}, refused},
						{"the same key under another tenant", func() (string, string, string) {
							k := p.key()
							do("acme", k, `{"n":1}`)
							return "globex", k, `{"n":1}`
						}, first},
						{"a handler's 5xx", func() (string, string, string) { return "acme", p.key(), `{"fail":5}` }, failed5xx},
						{"a handler's error", func() (string, string, string) { return "acme", p.key(), `{"err":true}` }, released},
						{"no key, keys required", func() (string, string, string) { return "acme", "", `{"n":1}` }, map[string]int{}},
						{"a key outside the grammar", func() (string, string, string) { return "acme", " bad key ", `{"n":1}` }, map[string]int{}},
					} {
						tenant, key, body := c.setup()
						cnt.Reset()
						status := do(tenant, key, body)
						if got := cnt.Ops(); !maps.Equal(got, c.ops) {
							t.Errorf("%s, %s: %d, round trips %v, want %v", name, c.outcome, status, got, c.ops)
						}
					}
					// In flight: the first holds its claim while a duplicate
					// is answered at once.
					k := p.key()
					release := make(chan struct{})
					mu.Lock()
					holds[`{"n":"held"}`] = release
					mu.Unlock()
					done := make(chan struct{})
					go func() { defer close(done); do("acme", k, `{"n":"held"}`) }()
					<-held
					mu.Lock()
					delete(holds, `{"n":"held"}`)
					mu.Unlock()
					cnt.Reset()
					status := do("acme", k, `{"n":"held"}`)
					got := cnt.Ops()
					close(release)
					<-done
					if !maps.Equal(got, refused) {
						t.Errorf("%s, in flight: %d, round trips %v, want %v", name, status, got, refused)
					}
				}
			})
		}
	})
}
