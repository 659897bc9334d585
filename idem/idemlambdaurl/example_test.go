package idemlambdaurl_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemlambdaurl"
	"github.com/idemkit/idemkit/idem/memstore"
)

// A function URL in response streaming mode serving a guarded ServeMux: a
// 5 MB export, over what a buffered Lambda answer carries, is kept and
// replayed to the retry byte for byte. In main:
// idemlambdaurl.Start(guard.Middleware(mux)).
func ExampleWrap() {
	guard, err := idem.New(idem.Config{
		Store:  memstore.New(), // dynamostore.New(...) in production
		Tenant: idem.SingleTenant("exports-service"),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		panic(err)
	}
	export := bytes.Repeat([]byte{0xff, 0x00}, 5<<19) // 5 MB, not UTF-8
	runs := 0
	mux := http.NewServeMux()
	mux.HandleFunc("POST /exports", func(w http.ResponseWriter, r *http.Request) {
		runs++
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(export)
	})
	serve := idemlambdaurl.Wrap(guard.Middleware(mux))

	// What the Lambda runtime does for each request to the function URL.
	invoke := func(invocation string) {
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: invocation})
		req := &events.LambdaFunctionURLRequest{
			RawPath: "/exports",
			Headers: map[string]string{"idempotency-key": "0b7c3f6e-5a1d-4c2e-9f8a-1d2e3f4a5b6c"},
		}
		req.RequestContext.HTTP.Method = "POST"
		resp, err := serve(ctx, req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.StatusCode, len(body), "bytes, same:", bytes.Equal(body, export), "replay:", resp.Headers["Openwop-Idempotent-Replay"] == "true")
	}
	invoke("invocation-1")
	invoke("invocation-2") // the retry: replayed, the handler does not run again
	fmt.Println("runs:", runs)
	// Output:
	// 200 5242880 bytes, same: true replay: false
	// 200 5242880 bytes, same: true replay: true
	// runs: 1
}
