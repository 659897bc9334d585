package apifn

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
)

// TestNewPathParameterIsOneRouteRow: a route with a path parameter no
// other route has ({widgetId}) is one row in Routes. Its value reaches the
// serve method as c.params["widgetId"] with no edit in dispatch or
// pathParams, and, on an idempotent route, is in the Layer-1 request
// fingerprint (the record is scoped by the route): one key replays on the
// same widget and is 409 idempotency_key_mismatch on another.
func TestNewPathParameterIsOneRouteRow(t *testing.T) {
	var runsCount atomic.Int32
	saved := Routes
	Routes = append(Routes[:len(Routes):len(Routes)], Route{
		Method: http.MethodPost, Pattern: "/widgets/{widgetId}/polish", Op: "polishWidget", Idempotent: true,
		serve: func(_ *Handler, ctx context.Context, c call) (events.APIGatewayV2HTTPResponse, error) {
			runsCount.Add(1)
			if _, claimed := idem.FromContext(ctx); !claimed {
				t.Error("an idempotent route's serve runs outside a Layer-1 claim")
			}
			return jsonResp(http.StatusOK, map[string]any{"widget": c.params["widgetId"], "tenant": c.tenant})
		},
	})
	defer func() { Routes = saved }()

	f := newFixture(t)
	const key = "polish-key-0123456789abcdef"
	r, body := f.do(t, ev("POST", "/widgets/w-1/polish", "acme", key, `{}`))
	if r.StatusCode != http.StatusOK || body["widget"] != "w-1" || body["tenant"] != "acme" {
		t.Fatalf("first: %d %v", r.StatusCode, body)
	}
	if r, _ := f.do(t, ev("POST", "/widgets/w-1/polish", "acme", key, `{}`)); r.StatusCode != http.StatusOK ||
		r.Headers["Openwop-Idempotent-Replay"] != "true" || runsCount.Load() != 1 {
		t.Fatalf("same key, same widget: %d %v, %d runs (want a replay)", r.StatusCode, r.Headers, runsCount.Load())
	}
	if r, body := f.do(t, ev("POST", "/widgets/w-2/polish", "acme", key, `{}`)); r.StatusCode != http.StatusConflict ||
		body["error"] != "idempotency_key_mismatch" || runsCount.Load() != 1 {
		t.Fatalf("same key, another widget: %d %v, %d runs (want 409 idempotency_key_mismatch)", r.StatusCode, body, runsCount.Load())
	}
	if r, body := f.do(t, ev("POST", "/widgets/w-2/polish", "acme", key+"-2", `{}`)); r.StatusCode != http.StatusOK ||
		body["widget"] != "w-2" || runsCount.Load() != 2 {
		t.Fatalf("another key, another widget: %d %v, %d runs (want a second execution)", r.StatusCode, body, runsCount.Load())
	}
	if r, _ := f.do(t, ev("POST", "/widgets/w-1/polish", "", key, `{}`)); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no credential: %d, want 401", r.StatusCode)
	}
}
