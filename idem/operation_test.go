package idem_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
)

// TestDoNamesTheOperation: a router behind the catch-all route names the
// operation of each call explicitly (Request.Operation). The operation scopes the record (one key on two
// operations runs twice), the raw path is not fingerprinted (two spellings
// of one resource replay), and the event reaches the handler unchanged.
func TestDoNamesTheOperation(t *testing.T) {
	e := newEnv(t, nil)
	var calls atomic.Int32
	var seen []string
	call := func(op, path string) events.APIGatewayV2HTTPResponse {
		t.Helper()
		ev := v2event("POST", "$default", testKey, `{}`)
		ev.RawPath = path
		r, err := e.guard.Do(context.Background(), idem.Request{Event: ev, Operation: op}, func(context.Context) (events.APIGatewayV2HTTPResponse, error) {
			calls.Add(1)
			seen = append(seen, ev.RouteKey)
			return events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: `{"ok":true}`}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := call("POST /runs/a~2F1/cancel", "/runs/a~2F1/cancel"); r.StatusCode != 200 || r.Headers["Openwop-Idempotent-Replay"] == "true" {
		t.Fatalf("first: %d %v", r.StatusCode, r.Headers)
	}
	if r := call("POST /runs/a~2F1/cancel", "/runs/a%2F1/cancel"); r.StatusCode != 200 || calls.Load() != 1 {
		t.Fatalf("same operation, other spelling of the path: %d, %d calls (want a replay)", r.StatusCode, calls.Load())
	}
	if r := call("POST /runs/a~2F2/cancel", "/runs/a~2F2/cancel"); r.StatusCode != 200 || calls.Load() != 2 {
		t.Fatalf("another operation: %d, %d calls (want a second execution)", r.StatusCode, calls.Load())
	}
	// No operation named: the routeKey ($default) and the path scope it.
	if r := call("", "/elsewhere"); r.StatusCode != 200 || calls.Load() != 3 {
		t.Fatalf("fallback to the routeKey: %d, %d calls", r.StatusCode, calls.Load())
	}
	for _, rk := range seen {
		if rk != "$default" {
			t.Fatalf("the handler saw routeKey %q: the event was rewritten", rk)
		}
	}
}
