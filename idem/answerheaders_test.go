package idem_test

import (
	"context"
	"maps"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// TestAnswerHeadersAreTheCallers: the answer HTTPAPI (and Do) returns is
// its caller's. A handler may return one header map from every request
// (a package-level map of fixed headers), and a caller may add a header
// to the answer it gets (a wrapper adding CORS or version headers, as
// the reference host adds OpenWOP-Version): that addition reaches
// neither the handler's map nor another request's answer, record or
// replay.
func TestAnswerHeadersAreTheCallers(t *testing.T) {
	e := newEnv(t, nil)
	shared := map[string]string{"Content-Type": "application/json"}
	want := maps.Clone(shared)
	calls := 0
	h := func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		calls++
		return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: shared, Body: `{"id":"run_1"}`}, nil
	}
	w := e.guard.HTTPAPI(h)
	call := func(key string) events.APIGatewayV2HTTPResponse {
		t.Helper()
		r, err := w(context.Background(), v2event("POST", "POST /runs", key, `{"a":1}`))
		if err != nil || r.StatusCode != 201 {
			t.Fatalf("%s: %d, %v", key, r.StatusCode, err)
		}
		return r
	}
	for i, key := range []string{testKey, "k_another0123456789abcdef"} {
		r := call(key)
		if r.Headers["X-Added-By-Caller"] != "" {
			t.Fatalf("request %d: the answer carries a header a caller added to an earlier answer: %v", i+1, r.Headers)
		}
		r.Headers["X-Added-By-Caller"] = "1"
		if !maps.Equal(shared, want) {
			t.Fatalf("request %d: a header added to the answer changed the handler's map: %v", i+1, shared)
		}
	}
	if r := call("k_another0123456789abcdef"); r.Headers["X-Added-By-Caller"] != "" {
		t.Fatalf("the replay carries a header a caller added to the first answer: %v", r.Headers)
	}
	if calls != 2 {
		t.Fatalf("handler ran %d times, want 2", calls)
	}
}
