package idem_test

import (
	"context"
	"github.com/idemkit/idemkit/internal/testutil"
	"github.com/idemkit/idemkit/ledger/ledgertest"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemtest"
	"github.com/idemkit/idemkit/idem/memstore"
)

// clock is an injected, manually advanced clock.
type clock = ledgertest.Clock

func newClock() *clock { return ledgertest.NewClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)) }

// syncBuffer is a goroutine-safe log sink.
type syncBuffer = testutil.SyncBuffer

type env struct {
	t     *testing.T
	store *memstore.Store
	clock *clock
	logs  *syncBuffer
	guard *idem.Guard
}

func newEnv(t *testing.T, mod func(*idem.Config)) *env {
	t.Helper()
	e := &env{t: t, store: memstore.New(), clock: newClock(), logs: &syncBuffer{}}
	cfg := idem.Config{
		Store:  e.store,
		Tenant: idem.AuthorizerKey("tenantId"),
		Test:   idem.TestConfig{Clock: idemtest.ClockFuncs{NowFunc: e.clock.Now}},
		Logger: slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Wait:   -1,
	}
	if mod != nil {
		mod(&cfg)
	}
	g, err := idem.New(cfg)
	if err != nil {
		t.Fatalf("idem.New: %v", err)
	}
	e.guard = g
	return e
}

const (
	testKey    = "k_0123456789abcdefghijkl" // 24 chars, OpenWOP grammar
	testTenant = "tenant-a"
)

func v2event(method, route, key, body string) events.APIGatewayV2HTTPRequest {
	ev := events.APIGatewayV2HTTPRequest{
		RouteKey: route,
		RawPath:  "/runs/raw-path-not-used",
		Headers:  map[string]string{"content-type": "application/json"},
		Body:     body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RequestID: "req-" + randID(),
			HTTP:      events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				// The ERP policy's credential parts ride along (the other
				// policies read the tenant only).
				Lambda: map[string]any{"tenantId": testTenant, "clientId": "client-a", "companyId": "company-a", "organizationId": "org-a"},
			},
		},
	}
	if key != "" {
		ev.Headers["idempotency-key"] = key
	}
	return ev
}

// commerceEvent is v2event with the commerce policy's credential values
// (namespace, worker) in the authorizer context.
func commerceEvent(method, route, key, body string) events.APIGatewayV2HTTPRequest {
	ev := v2event(method, route, key, body)
	ev.RequestContext.Authorizer.Lambda["namespace"] = "ns-1"
	ev.RequestContext.Authorizer.Lambda["worker"] = "checkout"
	return ev
}

var idMu sync.Mutex
var idN int

func randID() string {
	idMu.Lock()
	defer idMu.Unlock()
	idN++
	return time.Now().Format("150405.000000") + "-" + string(rune('a'+idN%26)) + itoa(idN)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for n > 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}

// counting handler
type handler struct {
	mu     sync.Mutex
	calls  int
	status int
	body   string
	hdrs   map[string]string
	err    error
	panic  bool
	block  chan struct{} // if set, wait for it
	before func(ctx context.Context)
}

func (h *handler) Calls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

func (h *handler) v2(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	h.mu.Lock()
	h.calls++
	n := h.calls
	h.mu.Unlock()
	if h.before != nil {
		h.before(ctx)
	}
	if h.block != nil {
		<-h.block
	}
	if h.panic {
		panic("boom")
	}
	if h.err != nil {
		return events.APIGatewayV2HTTPResponse{}, h.err
	}
	status := h.status
	if status == 0 {
		status = 201
	}
	body := h.body
	if body == "" {
		body = `{"run":"` + itoa(n) + `"}`
	}
	hd := map[string]string{"Content-Type": "application/json"}
	for k, v := range h.hdrs {
		hd[k] = v
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: status, Headers: hd, Body: body}, nil
}

func (e *env) call(h *handler, ev events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	e.t.Helper()
	resp, err := e.guard.HTTPAPI(h.v2)(context.Background(), ev)
	if err != nil {
		e.t.Fatalf("adapter returned error: %v", err)
	}
	return resp
}
