package idem_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
)

// A handler that routes by itself behind the catch-all route and names
// the operation it matched (Request.Operation) without its parameters
// (Request.Params): the raw path still determines the resource, so it
// stays in the fingerprint. Order 2's refund sent with order 1's key is
// 409 idempotency_key_mismatch, never order 1's refund replayed; the same
// path again is a replay. With Params given, the parameters stand for the
// path, as before.
func TestOperationWithoutParamsKeepsThePath(t *testing.T) {
	e := newEnv(t, nil)
	var runs atomic.Int32
	call := func(path string, params map[string]string) events.APIGatewayV2HTTPResponse {
		ev := v2event(http.MethodPost, "$default", testKey, `{"amount":5}`)
		ev.RawPath, ev.RequestContext.HTTP.Path = path, path
		out, err := e.guard.Do(context.Background(), idem.Request{Event: ev, Operation: "POST /orders/{id}/refund", Params: params},
			func(ctx context.Context) (events.APIGatewayV2HTTPResponse, error) {
				runs.Add(1)
				return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusCreated, Body: `{"refunded":"` + path + `"}`}, nil
			})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if a := call("/orders/1/refund", nil); a.StatusCode != http.StatusCreated {
		t.Fatalf("first: %d %s", a.StatusCode, a.Body)
	}
	if b := call("/orders/2/refund", nil); b.StatusCode != http.StatusConflict || !strings.Contains(b.Body, "idempotency_key_mismatch") {
		t.Fatalf("another order's refund under the same key: %d %s (handler ran %d times); want 409 idempotency_key_mismatch", b.StatusCode, b.Body, runs.Load())
	}
	if again := call("/orders/1/refund", nil); again.StatusCode != http.StatusCreated || again.Headers["Openwop-Idempotent-Replay"] != "true" {
		t.Fatalf("the same refund again: %d %v %s; want the replay", again.StatusCode, again.Headers, again.Body)
	}
	if runs.Load() != 1 {
		t.Fatalf("handler ran %d times, want 1", runs.Load())
	}
}
