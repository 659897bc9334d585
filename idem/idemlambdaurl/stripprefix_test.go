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

// TestTwoAppsUnderStrippedPrefixesBehindAFunctionURL: the case of
// idem's TestTwoAppsUnderStrippedPrefixesNeverShareAnAnswer behind a
// function URL. One Guard serves two applications mounted under /a/ and
// /b/ with http.StripPrefix outside the middleware; the same key and body
// sent to /b/orders after /a/orders is 409 idempotency_key_mismatch, b
// not run, and the retry to /a/orders is a's replay. Before (RED_TEAM
// 565), lambdaurl builds the request without Request.RequestURI, so the
// Guard could not see that the path had been rewritten, and b was
// answered a's recorded 201.
func TestTwoAppsUnderStrippedPrefixesBehindAFunctionURL(t *testing.T) {
	guard, err := idem.New(idem.Config{
		Store:  memstore.New(),
		Tenant: idem.SingleTenant("t"),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	root := http.NewServeMux()
	for _, app := range []string{"a", "b"} {
		mux := http.NewServeMux()
		mux.HandleFunc("POST /orders", func(w http.ResponseWriter, _ *http.Request) {
			runs[app]++
			w.WriteHeader(201)
			_, _ = w.Write([]byte(`{"app":"` + app + `"}`))
		})
		root.Handle("/"+app+"/", http.StripPrefix("/"+app, guard.Middleware(mux)))
	}
	serve := idemlambdaurl.Wrap(root)
	post := func(path string) (int, string) {
		t.Helper()
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "inv-" + path})
		req := &events.LambdaFunctionURLRequest{
			RawPath: path,
			Headers: map[string]string{"idempotency-key": testKey, "content-type": "application/json"},
			Body:    `{"qty":1}`,
		}
		req.RequestContext.DomainName = "abc.lambda-url.eu-west-1.on.aws"
		req.RequestContext.HTTP.Method = "POST"
		out, err := serve(ctx, req)
		if err != nil {
			t.Fatalf("invocation: %v", err)
		}
		body, err := io.ReadAll(out.Body)
		if err != nil {
			t.Fatal(err)
		}
		return out.StatusCode, string(body)
	}
	for range 2 {
		if code, body := post("/a/orders"); code != 201 || body != `{"app":"a"}` || runs["a"] != 1 {
			t.Fatalf("a: %d %s (runs %v), want a's answer, one run", code, body, runs)
		}
	}
	if code, body := post("/b/orders"); code != http.StatusConflict || !strings.Contains(body, "idempotency_key_mismatch") || runs["b"] != 0 {
		t.Fatalf("b under a's key: %d %s (runs %v), want 409 idempotency_key_mismatch and b not run", code, body, runs)
	}
}
