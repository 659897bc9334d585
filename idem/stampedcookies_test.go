package idem_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// TestFirstAnswerKeepsItsCookiesWhenItsBodyIsStampedOrRendered: the first
// answer carries the handler's cookies (the v2 Cookies field among them)
// also when the Guard builds that answer anew from the handler's: a body
// stamped with the current request id (the ERP policy's request_id) or
// rendered by a route's Contract. A replay carries none. Before the fix
// the HTTP API adapters dropped the Cookies field from such a first
// answer: they kept it only when the answer was the handler's own value.
func TestFirstAnswerKeepsItsCookiesWhenItsBodyIsStampedOrRendered(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(*idem.Config)
	}{
		{"ERPRequestIDStamp", func(cfg *idem.Config) { cfg.Policy = erp.Policy }},
		{"ContractRender", func(cfg *idem.Config) {
			cfg.Routes = map[string]idem.Route{"POST /runs": {Contract: &idem.Contract{
				Version: "test/1",
				Decode: func(_ string, body []byte) (any, error) {
					var v any
					return v, json.Unmarshal(body, &v)
				},
				Render: func(r *idem.Response, _ string) *idem.Response {
					out := *r
					out.Body = append([]byte(nil), r.Body...)
					return &out
				},
			}}}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, c.mod)
			runs := 0
			h := func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				runs++
				return events.APIGatewayV2HTTPResponse{StatusCode: 201,
					Headers: map[string]string{"Content-Type": "application/json", "Set-Cookie": "header=1"},
					Body:    `{"request_id":"handler","ok":true}`, Cookies: []string{"session=1"}}, nil
			}
			key := "k_cookie_stamp_0123456789"
			for _, w := range []struct {
				name string
				call func(events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)
			}{
				{"HTTPAPI", func(ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
					return e.guard.HTTPAPI(h)(context.Background(), ev)
				}},
				{"Do", func(ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
					return e.guard.Do(context.Background(), idem.Request{Event: ev}, func(ctx context.Context) (events.APIGatewayV2HTTPResponse, error) {
						return h(ctx, ev)
					})
				}},
			} {
				t.Run(w.name, func(t *testing.T) {
					runs = 0
					k := key + w.name
					first, err := w.call(v2event("POST", "POST /runs", k, `{"a":1}`))
					if err != nil || first.StatusCode != 201 || runs != 1 {
						t.Fatalf("first: %d %s, %v (runs %d)", first.StatusCode, first.Body, err, runs)
					}
					if !slices.Contains(first.Cookies, "session=1") || !slices.Contains(first.Cookies, "header=1") {
						t.Fatalf("first answer's cookies %q; want the handler's session=1 and header=1", first.Cookies)
					}
					second, err := w.call(v2event("POST", "POST /runs", k, `{"a":1}`))
					if err != nil || second.StatusCode != 201 || runs != 1 || len(second.Cookies) != 0 {
						t.Fatalf("replay: %d %s cookies %q, %v (runs %d); want the replay without cookies", second.StatusCode, second.Body, second.Cookies, err, runs)
					}
				})
			}
		})
	}
}
