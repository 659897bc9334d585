package idemlambdaurl_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemlambdaurl"
	"github.com/idemkit/idemkit/idem/memstore"
)

// TestFailedInvocationLeavesNoGoroutine: an invocation failed because its
// handler panicked before its answer began (RED_TEAM 525) leaves nothing
// running once it has returned. lambdaurl serves the handler on a
// goroutine of its own, whose deferred empty write waits for the answer's
// body to be read or closed; the body of a failed invocation is handed to
// no one, so unless it is closed that goroutine (and the request it holds)
// stays for the life of the process, one per failed invocation.
func TestFailedInvocationLeavesNoGoroutine(t *testing.T) {
	guard, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("shop"),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /exports", func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })
	mux.HandleFunc("POST /plain", func(http.ResponseWriter, *http.Request) { panic("a bug") })
	serve := idemlambdaurl.Wrap(guard.Middleware(mux))
	invoke := func(path, key string) error {
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "inv"})
		req := &events.LambdaFunctionURLRequest{
			RawPath: path,
			Headers: map[string]string{"content-type": "application/json"},
			Body:    `{}`,
		}
		if key != "" {
			req.Headers["idempotency-key"] = key
		}
		req.RequestContext.DomainName = "abc.lambda-url.eu-west-1.on.aws"
		req.RequestContext.HTTP.Method = "POST"
		_, err := serve(ctx, req)
		return err
	}
	before := runtime.NumGoroutine()
	const n = 20
	for i := range n {
		// A guarded handler's abort, and a panic of a request the Guard
		// passes through (no key), which reaches Wrap as it is.
		if err := invoke("/exports", fmt.Sprintf("%s-%02d", testKey, i)); err == nil {
			t.Fatal("an aborted answer did not fail its invocation")
		}
		if err := invoke("/plain", ""); err == nil {
			t.Fatal("a panicked handler did not fail its invocation")
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if after := runtime.NumGoroutine(); after > before+2 {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines before %d failed invocations, %d after:\n%s", before, 2*n, after, buf[:runtime.Stack(buf, true)])
	}
}
