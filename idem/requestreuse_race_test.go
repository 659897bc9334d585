package idem_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/idem/policy/commerce"
	"github.com/idemkit/idemkit/idem/policy/erp"
)

// reuseAnswer is a deep copy of an answer Do returned, taken as it was
// returned, with the answer itself.
type reuseAnswer struct {
	got  events.APIGatewayV2HTTPResponse
	body string
	hdr  map[string]string
	ck   []string
}

func keepAnswer(r events.APIGatewayV2HTTPResponse) reuseAnswer {
	return reuseAnswer{got: r, body: strings.Clone(r.Body), hdr: maps.Clone(r.Headers), ck: slices.Clone(r.Cookies)}
}

// TestReplayReuseUnderConcurrentKeys: many goroutines replay their own
// keys, bodies and tenants through one Guard at once, under the OpenWOP,
// ERP and commerce policies and on a derived-key route, so that the
// requests Do reuses (a straight replay's) pass from one goroutine's
// request to another's. Every answer is its own request's, byte for byte
// (its key, its body's length and first bytes, its tenant; under the ERP
// policy its own request id in the body and headers), and stays so after
// every goroutine is done: nothing of an answer lives in a request that
// is reused. Under -race, any write to a reused request that an answer, a
// log line or a store still reads is reported.
func TestReplayReuseUnderConcurrentKeys(t *testing.T) {
	const workers, replays = 12, 40
	for _, c := range []struct {
		name    string
		policy  idem.Policy
		derived bool
	}{
		{"openwop", idem.PolicyOpenWOP, false},
		{"erp", erp.Policy, false},
		{"commerce", commerce.Policy, false},
		{"derived", derivedPolicy(), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs syncBuffer
			cfg := idem.Config{Store: memstore.New(), Tenant: idem.AuthorizerKey("tenantId"), Policy: c.policy,
				Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
			if c.derived {
				cfg.Routes = map[string]idem.Route{"POST /runs": {DeriveKey: func(_ []byte, header func(string) []string) (string, error) {
					if vs := header("X-Order-Id"); len(vs) == 1 {
						return vs[0], nil
					}
					return "", fmt.Errorf("no order id")
				}}}
			}
			g, err := idem.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			handler := func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				k := ev.Headers["x-order-id"]
				return events.APIGatewayV2HTTPResponse{StatusCode: 201,
					Headers: map[string]string{"Content-Type": "application/json", "X-Key": k, "X-Tenant": ev.RequestContext.Authorizer.Lambda["tenantId"].(string)},
					Body:    fmt.Sprintf(`{"request_id":%q,"key":%q,"len":%d,"head":%q}`, ev.RequestContext.RequestID, k, len(ev.Body), ev.Body[:12]),
				}, nil
			}
			h := g.HTTPAPI(handler)
			event := func(w, i int) events.APIGatewayV2HTTPRequest {
				key := fmt.Sprintf("key-%02d-0123456789abcdefghij", w)
				body := fmt.Sprintf(`{"w":"%02d","pad":%q}`, w, strings.Repeat(string(rune('a'+w)), 100*w+7))
				ev := v2event("POST", "POST /runs", "", body)
				if !c.derived {
					ev.Headers["idempotency-key"] = key
				}
				ev.Headers["x-order-id"] = key
				ev.RequestContext.RequestID = fmt.Sprintf("req-%02d-%03d", w, i)
				ev.RequestContext.Authorizer.Lambda = map[string]any{"tenantId": fmt.Sprintf("tenant-%02d", w),
					"clientId": "c", "companyId": "co", "organizationId": "o", "namespace": "ns", "worker": "wk"}
				return ev
			}
			check := func(w, i int, r events.APIGatewayV2HTTPResponse) string {
				key := fmt.Sprintf("key-%02d-0123456789abcdefghij", w)
				ev := event(w, i)
				id := ev.RequestContext.RequestID
				if i == 0 {
					id = fmt.Sprintf("req-%02d-000", w)
				}
				if c.policy.Name != erp.Policy.Name {
					id = fmt.Sprintf("req-%02d-000", w) // the first request's, replayed
				}
				want := fmt.Sprintf(`{"request_id":%q,"key":%q,"len":%d,"head":%q}`, id, key, len(ev.Body), ev.Body[:12])
				switch {
				case r.StatusCode != 201:
					return fmt.Sprintf("status %d %s", r.StatusCode, r.Body)
				case r.Body != want:
					return fmt.Sprintf("body %s, want %s", r.Body, want)
				case r.Headers["X-Key"] != key || r.Headers["X-Tenant"] != fmt.Sprintf("tenant-%02d", w):
					return fmt.Sprintf("headers %v", r.Headers)
				case c.policy.Name == erp.Policy.Name && (r.Headers[erp.HeaderRequestID] != ev.RequestContext.RequestID || r.Headers["Idempotency-Key"] != key):
					return fmt.Sprintf("ERP headers %v, want request id %s and key %s", r.Headers, ev.RequestContext.RequestID, key)
				case i > 0 && c.policy.Name == commerce.Policy.Name && r.Headers[commerce.HeaderIdempotentReplay] != "true":
					return fmt.Sprintf("commerce replay headers %v", r.Headers)
				case i > 0 && c.policy.Name != erp.Policy.Name && c.policy.Name != commerce.Policy.Name && r.Headers[idem.HeaderOpenWOPReplay] != "true":
					return fmt.Sprintf("replay headers %v", r.Headers)
				}
				return ""
			}
			answers := make([][]reuseAnswer, workers)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for i := range replays + 1 {
						r, _ := h(context.Background(), event(w, i))
						if msg := check(w, i, r); msg != "" {
							t.Errorf("worker %d request %d: %s", w, i, msg)
							return
						}
						answers[w] = append(answers[w], keepAnswer(r))
					}
				}()
			}
			close(start)
			wg.Wait()
			for w, as := range answers {
				for i, a := range as {
					if a.got.Body != a.body || !maps.Equal(a.got.Headers, a.hdr) || !slices.Equal(a.got.Cookies, a.ck) {
						t.Errorf("worker %d request %d: the answer changed after it was returned: %q %v, was %q %v", w, i, a.got.Body, a.got.Headers, a.body, a.hdr)
					}
					if msg := check(w, i, a.got); msg != "" {
						t.Errorf("worker %d request %d, after every request: %s", w, i, msg)
					}
				}
			}
			if out := logs.String(); !strings.Contains(out, `"outcome":"replay"`) {
				t.Fatalf("no replay was logged: the test proves nothing\n%.2000s", out)
			}
		})
	}
}

// TestDerivedKeyHeaderReaderOutlivesReuse: Route.DeriveKey is handed a
// header reader, which it may keep (a log line built later, a value read
// once the key is known). A derived-key replay's request is one Do may
// reuse for a later request: the reader it handed out must still read
// that replay's own headers afterwards, never another request's (another
// tenant's), and never nothing.
func TestDerivedKeyHeaderReaderOutlivesReuse(t *testing.T) {
	var kept []func(string) []string
	g, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.AuthorizerKey("tenantId"), Policy: derivedPolicy(),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Routes: map[string]idem.Route{"POST /runs": {DeriveKey: func(_ []byte, header func(string) []string) (string, error) {
			kept = append(kept, header)
			return header("X-Order-Id")[0], nil
		}}}})
	if err != nil {
		t.Fatal(err)
	}
	h := g.HTTPAPI(echoKeyHandler)
	ev := func(order, tenant string) events.APIGatewayV2HTTPRequest {
		e := v2event("POST", "POST /runs", "", `{"x":1}`)
		e.Headers["x-order-id"] = order
		e.RequestContext.Authorizer.Lambda["tenantId"] = tenant
		return e
	}
	ctx := context.Background()
	a := ev("order-of-tenant-a", "tenant-a")
	h(ctx, a)
	h(ctx, a) // a straight replay: its request may be reused
	reader := kept[len(kept)-1]
	b := ev("order-of-tenant-b", "tenant-b")
	h(ctx, b)
	for range 50 {
		h(ctx, b) // replays of another tenant's order, in the reused request
	}
	if got := reader("X-Order-Id"); !slices.Equal(got, []string{"order-of-tenant-a"}) {
		t.Fatalf("the header reader a replay's DeriveKey kept reads %q after later requests; want its own request's [order-of-tenant-a]", got)
	}
}
