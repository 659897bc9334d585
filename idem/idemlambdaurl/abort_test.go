package idemlambdaurl_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemlambdaurl"
	"github.com/idemkit/idemkit/idem/memstore"
)

// abortChild names the environment variable under which the test binary,
// run again by TestAbortedHandlerFailsTheInvocation, runs one invocation
// whose handler aborts its response: a panic that escapes the function
// URL's handler ends the process, so it is watched from outside.
const abortChild = "IDEMLAMBDAURL_ABORT_CHILD"

// TestAbortedHandlerFailsTheInvocation: behind a function URL, a guarded
// handler that aborts its response (panic(http.ErrAbortHandler), as
// httputil.ReverseProxy does when its upstream's body breaks off) has its
// record released, and its invocation fails (the function URL answers
// 502), the process serving on; the retry of the key runs the handler
// again. Before, the Guard's abort went on up lambdaurl's goroutine, which
// recovers nothing: it ended the process, after lambdaurl's deferred
// write had already handed the runtime a 200 with an empty body, an
// answer its caller could take for the request's success.
func TestAbortedHandlerFailsTheInvocation(t *testing.T) {
	if os.Getenv(abortChild) == "1" {
		abortedInvocations(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAbortedHandlerFailsTheInvocation$", "-test.count=1")
	cmd.Env = append(os.Environ(), abortChild+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the invocation whose handler aborted ended the process: %v\n%s", err, out)
	}
}

func abortedInvocations(t *testing.T) {
	guard, err := idem.New(idem.Config{Store: memstore.New(), Tenant: idem.SingleTenant("shop"),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("POST /exports", func(w http.ResponseWriter, _ *http.Request) {
		if runs.Add(1) == 1 {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"part":`))
			panic(http.ErrAbortHandler)
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"export":"e1"}`))
	})
	serve := idemlambdaurl.Wrap(guard.Middleware(mux))
	call := func() (*events.LambdaFunctionURLStreamingResponse, string, error) {
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "inv"})
		req := &events.LambdaFunctionURLRequest{
			RawPath: "/exports",
			Headers: map[string]string{"idempotency-key": testKey, "content-type": "application/json"},
			Body:    `{}`,
		}
		req.RequestContext.DomainName = "abc.lambda-url.eu-west-1.on.aws"
		req.RequestContext.HTTP.Method = "POST"
		out, err := serve(ctx, req)
		if err != nil || out == nil {
			return out, "", err
		}
		body, _ := io.ReadAll(out.Body)
		return out, string(body), nil
	}
	out, body, err := call()
	if err == nil {
		t.Fatalf("the aborted answer went out as %d %q, not as a failed invocation", out.StatusCode, body)
	}
	if !strings.Contains(err.Error(), "abort") {
		t.Errorf("the invocation's error does not say the handler aborted: %v", err)
	}
	out, body, err = call()
	if err != nil || out.StatusCode != http.StatusCreated || body != `{"export":"e1"}` {
		t.Fatalf("retry: %v %v %q, want the handler's 201 run again", err, out, body)
	}
	if n := runs.Load(); n != 2 {
		t.Fatalf("handler ran %d times, want 2 (the aborted run released its record)", n)
	}
}
