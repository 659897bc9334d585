package idemlambdaurl_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemlambdaurl"
	"github.com/idemkit/idemkit/idem/memstore"
)

// A function URL puts the request's cookies in the event's cookies list,
// not among its headers (as an HTTP API's payload 2.0 does). Served
// through Wrap, the handler reads them from the request's Cookie header,
// and a route that declares Cookie among its fingerprint headers (a
// session selecting the cart) fingerprints them: the same key sent with
// another session is 409 idempotency_key_mismatch, never the first
// session's answer replayed. The event itself is left as it came.
// Before (RED_TEAM 449), lambdaurl dropped the cookies list: the handler
// saw no cookie, and the second session got the first one's answer.
func TestFunctionURLCookiesReachTheHandlerAndTheFingerprint(t *testing.T) {
	guard, err := idem.New(idem.Config{
		Store:  memstore.New(),
		Tenant: idem.SingleTenant("t"),
		Routes: map[string]idem.Route{"POST /carts": {Headers: []string{"Cookie"}}},
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	serve := idemlambdaurl.Wrap(guard.Handle("POST /carts", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		c, err := r.Cookie("session")
		if err != nil {
			http.Error(w, "no session", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(201)
		_, _ = io.WriteString(w, "cart of "+c.Value)
	})))
	call := func(n int, cookies ...string) (int, string, *events.LambdaFunctionURLRequest) {
		t.Helper()
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "inv-" + strings.Repeat("1", n)})
		req := &events.LambdaFunctionURLRequest{
			RawPath: "/carts",
			Headers: map[string]string{"idempotency-key": testKey, "content-type": "application/json"},
			Cookies: cookies,
			Body:    `{}`,
		}
		req.RequestContext.DomainName = "abc.lambda-url.eu-west-1.on.aws"
		req.RequestContext.HTTP.Method = "POST"
		out, err := serve(ctx, req)
		if err != nil {
			t.Fatalf("invocation: %v", err)
		}
		body, _ := io.ReadAll(out.Body)
		return out.StatusCode, string(body), req
	}
	status, body, req := call(1, "session=alice", "theme=dark")
	if status != 201 || body != "cart of alice" {
		t.Fatalf("first: %d %q; want 201 and alice's cart (the handler reads the event's cookies)", status, body)
	}
	if _, ok := req.Headers["cookie"]; ok || len(req.Headers) != 2 {
		t.Fatalf("the event's headers were changed: %v", req.Headers)
	}
	if status, body, _ = call(2, "session=alice", "theme=dark"); status != 201 || body != "cart of alice" {
		t.Fatalf("retry: %d %q; want alice's 201 replayed", status, body)
	}
	if status, body, _ = call(3, "session=mallory", "theme=dark"); status != 409 || !strings.Contains(body, "idempotency_key_mismatch") {
		t.Fatalf("same key, another session: %d %q; want 409 idempotency_key_mismatch", status, body)
	}
	if runs != 1 {
		t.Fatalf("handler ran %d times, want once", runs)
	}
}
