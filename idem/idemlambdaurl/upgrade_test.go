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
	"github.com/aws/aws-lambda-go/lambdaurl"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemlambdaurl"
	"github.com/idemkit/idemkit/idem/memstore"
)

// TestStrippedPrefixAcrossTheUpgradeBehindAFunctionURL holds what
// docs/GUARANTEES.md's note on a rewritten path's change of fingerprint
// says for RED_TEAM 565 (585): the release before 565 served a function
// URL's request without Request.RequestURI, as lambdaurl.Wrap builds it,
// so its record of a request whose path http.StripPrefix rewrote has no
// sent path in its fingerprint. Its retry through this release's Wrap is
// 409 idempotency_key_mismatch, never run again, and so is the other way
// (a rollback); a request whose path nothing rewrote keeps its
// fingerprint either way and is replayed.
func TestStrippedPrefixAcrossTheUpgradeBehindAFunctionURL(t *testing.T) {
	guard, err := idem.New(idem.Config{
		Store:  memstore.New(),
		Tenant: idem.SingleTenant("t"),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, _ *http.Request) {
		runs++
		w.WriteHeader(201)
		_, _ = w.Write([]byte(`{"order":1}`))
	})
	root := http.NewServeMux()
	root.Handle("/a/", http.StripPrefix("/a", guard.Middleware(mux)))
	root.Handle("/orders", guard.Middleware(mux))
	earlier, today := lambdaurl.Wrap(root), idemlambdaurl.Wrap(root)
	type handler = func(context.Context, *events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error)
	post := func(serve handler, path, key string) (int, string) {
		t.Helper()
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "inv-" + path + key})
		req := &events.LambdaFunctionURLRequest{
			RawPath: path,
			Headers: map[string]string{"idempotency-key": key, "content-type": "application/json"},
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
	for _, c := range []struct {
		name          string
		first, second handler
	}{{"Upgrade", earlier, today}, {"Rollback", today, earlier}} {
		t.Run(c.name, func(t *testing.T) {
			rewritten, kept := testKey[:len(testKey)-len(c.name)]+c.name, "k2-"+c.name+"-0123456789abcdef"
			runs = 0
			if code, _ := post(c.first, "/a/orders", rewritten); code != 201 || runs != 1 {
				t.Fatalf("first try: %d (runs %d)", code, runs)
			}
			if code, body := post(c.second, "/a/orders", rewritten); code != http.StatusConflict || !strings.Contains(body, "idempotency_key_mismatch") || runs != 1 {
				t.Fatalf("its retry across the deploy: %d %s (runs %d), want 409 idempotency_key_mismatch, not run again", code, body, runs)
			}
			if code, _ := post(c.first, "/orders", kept); code != 201 || runs != 2 {
				t.Fatalf("first try of an unrewritten path: %d (runs %d)", code, runs)
			}
			if code, body := post(c.second, "/orders", kept); code != 201 || body != `{"order":1}` || runs != 2 {
				t.Fatalf("its retry across the deploy: %d %s (runs %d), want the replay", code, body, runs)
			}
		})
	}
}
