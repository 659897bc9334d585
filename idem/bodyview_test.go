package idem_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
)

// The Guard reads an API Gateway text body in place, without copying the
// event's string; the functions a route gives it (Contract.Decode,
// Route.DeriveKey) may write to the body they are handed, so they get a
// copy. Writing to the string's own bytes would change the event and, for
// a constant string (read-only memory), crash the process; these bodies
// are constants.
func TestUserFunctionsGetAWritableCopyOfTheBody(t *testing.T) {
	const body = `{"orderId":"ord-1","sku":"ab-1","qty":2}`
	scribble := func(b []byte) {
		for i := range b {
			b[i] = 'x'
		}
	}
	t.Run("Contract.Decode", func(t *testing.T) {
		contract := &idem.Contract{Version: "v1", Decode: func(_ string, b []byte) (any, error) {
			var v map[string]any
			err := json.Unmarshal(b, &v)
			scribble(b)
			return v, err
		}}
		e := newEnv(t, func(c *idem.Config) {
			c.Routes = map[string]idem.Route{"POST /orders": {Contract: contract}}
		})
		firstThenReplay(t, e, v2event("POST", "POST /orders", testKey, body), body)
	})
	t.Run("Route.DeriveKey", func(t *testing.T) {
		e := derivedEnv(t, func(b []byte, hdr func(string) []string) (string, error) {
			key, err := orderIDKey(b, hdr)
			scribble(b)
			return key, err
		})
		firstThenReplay(t, e, v2event(http.MethodPost, derivedRoute, "", body), body)
	})
}

// firstThenReplay sends ev twice: the first runs the handler, the second
// is its replay, and the event's body is still body afterwards.
func firstThenReplay(t *testing.T, e *env, ev events.APIGatewayV2HTTPRequest, body string) {
	t.Helper()
	h := &handler{}
	first := e.call(h, ev)
	retry := e.call(h, ev)
	if first.StatusCode != 201 || retry.StatusCode != 201 || retry.Headers["Openwop-Idempotent-Replay"] != "true" || h.Calls() != 1 {
		t.Fatalf("first %d, retry %d %v, %d runs", first.StatusCode, retry.StatusCode, retry.Headers, h.Calls())
	}
	if ev.Body != body {
		t.Fatalf("the event's body changed: %q", ev.Body)
	}
}

// TestReplayBodyStringsAreTheirOwn: a replayed body leaves the API Gateway
// adapters as a string over the bytes of the record the store returned,
// not a copy; each replay has its own record, so its body stays what it
// was when later replays are answered, byte for byte as the first answer
// (a 64 KB text body, through HTTPAPI and REST).
func TestReplayBodyStringsAreTheirOwn(t *testing.T) {
	big := make([]byte, 64<<10)
	for i := range big {
		big[i] = 'a' + byte(i%26)
	}
	body := `{"blob":"` + string(big) + `"}`
	e := newEnv(t, nil)
	h := &handler{body: body}
	ev := v2event("POST", "POST /runs", testKey, `{"a":1}`)
	var answers []string
	for range 3 {
		r := e.call(h, ev)
		if r.StatusCode != 201 || r.Body != body {
			t.Fatalf("HTTPAPI: %d, body of %d bytes", r.StatusCode, len(r.Body))
		}
		answers = append(answers, r.Body)
	}
	rest := e.guard.REST(func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		return events.APIGatewayProxyResponse{StatusCode: 201, Headers: map[string]string{"Content-Type": "application/json"}, Body: body}, nil
	})
	rev := events.APIGatewayProxyRequest{
		HTTPMethod: "POST", Resource: "/orders", Path: "/orders",
		Headers:        map[string]string{"Idempotency-Key": testKey, "Content-Type": "application/json"},
		Body:           `{"a":1}`,
		RequestContext: events.APIGatewayProxyRequestContext{RequestID: "r1", Authorizer: map[string]any{"tenantId": testTenant}},
	}
	for i := range 3 {
		r, _ := rest(context.Background(), rev)
		if r.StatusCode != 201 || r.Body != body || (i > 0) != (r.Headers["Openwop-Idempotent-Replay"] == "true") {
			t.Fatalf("REST %d: %d, body of %d bytes, %v", i, r.StatusCode, len(r.Body), r.Headers)
		}
		answers = append(answers, r.Body)
	}
	for i, a := range answers {
		if a != body {
			t.Fatalf("answer %d changed after later replays", i)
		}
	}
	if h.Calls() != 1 {
		t.Fatalf("handler ran %d times", h.Calls())
	}
}
