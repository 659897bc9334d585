package idemlambdaurl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-lambda-go/lambdaurl"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/idemlambdaurl"
	"github.com/idemkit/idemkit/idem/memstore"
	"github.com/idemkit/idemkit/internal/shared"
)

const testKey = "0b7c3f6e-5a1d-4c2e-9f8a-1d2e3f4a5b6c"

// streamedAnswer is what a function URL in response streaming mode sends
// its caller: the status, the headers and the whole streamed body.
type streamedAnswer struct {
	status  int
	headers map[string]string
	body    []byte
}

// invoke runs serve as the Lambda runtime runs a function URL's handler:
// in an invocation's context, with the function URL's event, reading the
// streamed body to its end.
func invoke(t *testing.T, serve func(context.Context, *events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error), n int) streamedAnswer {
	t.Helper()
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "inv-" + strings.Repeat("0", n)})
	req := &events.LambdaFunctionURLRequest{
		RawPath: "/exports",
		Headers: map[string]string{"idempotency-key": testKey, "content-type": "application/json"},
		Body:    `{}`,
	}
	req.RequestContext.DomainName = "abc.lambda-url.eu-west-1.on.aws"
	req.RequestContext.HTTP.Method = "POST"
	out, err := serve(ctx, req)
	if err != nil {
		t.Fatalf("invocation: %v", err)
	}
	body, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatalf("reading the streamed body: %v", err)
	}
	return streamedAnswer{status: out.StatusCode, headers: out.Headers, body: body}
}

// TestStreamedAnswerOverTheBufferedBoundIsKept: behind a function URL in
// response streaming mode, an answer between Lambda's buffered payload
// bound and idem.MaxResponseBytes (5 MB of binary body, 6.7 MB
// base64-encoded; exactly 6 MB) reaches its caller whole. Served through
// Wrap it is kept and replayed byte for byte to the key's retries, the
// handler run once; served through lambdaurl.Wrap directly the Guard
// cannot tell it was streamed and records it as not kept (every retry 410
// idemkit.response_not_kept, as before); a body over MaxResponseBytes is
// not kept either way. Before, Wrap's answers were measured against the
// buffered bound too: the 5 MB and 6 MB answers' retries were 410.
func TestStreamedAnswerOverTheBufferedBoundIsKept(t *testing.T) {
	binary := func(n int) []byte { return bytes.Repeat([]byte{0xff, 0x00, 0x7f, 0x80}, n/4) }
	for _, c := range []struct {
		name string
		body []byte
		wrap func(http.Handler) func(context.Context, *events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error)
		kept bool
	}{
		{"5 MB binary, Wrap", binary(5 << 20), idemlambdaurl.Wrap, true},
		{"6 MB binary, Wrap", binary(idem.MaxResponseBytes), idemlambdaurl.Wrap, true},
		{"over 6 MB, Wrap", append(binary(idem.MaxResponseBytes), 1), idemlambdaurl.Wrap, false},
		{"5 MB binary, lambdaurl.Wrap", binary(5 << 20), lambdaurl.Wrap, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			guard, err := idem.New(idem.Config{
				Store:  memstore.New(),
				Tenant: idem.SingleTenant("t"),
				Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
			})
			if err != nil {
				t.Fatal(err)
			}
			runs := 0
			serve := c.wrap(guard.Handle("POST /exports", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs++
				w.Header().Set("Content-Type", "application/octet-stream")
				_, _ = w.Write(c.body)
			})))
			first := invoke(t, serve, 1)
			if first.status != 200 || !bytes.Equal(first.body, c.body) {
				t.Fatalf("first: %d, %d bytes; want 200 and the handler's %d bytes", first.status, len(first.body), len(c.body))
			}
			for i := range 2 {
				a := invoke(t, serve, i+2)
				if c.kept {
					if a.status != 200 || !bytes.Equal(a.body, c.body) || a.headers[idem.HeaderOpenWOPReplay] != "true" {
						t.Fatalf("retry %d: %d, %d bytes, replay header %q; want the 200 replayed byte for byte", i+1, a.status, len(a.body), a.headers[idem.HeaderOpenWOPReplay])
					}
					continue
				}
				var env struct {
					Code    string `json:"error"`
					Details struct {
						Status int `json:"status"`
						Size   int `json:"size"`
					} `json:"details"`
				}
				if err := json.Unmarshal(a.body, &env); err != nil || a.status != 410 || env.Code != idem.CodeResponseNotKept || a.headers[idem.HeaderRetryAfter] != "" || env.Details.Status != 200 || env.Details.Size != len(c.body) {
					t.Fatalf("retry %d: %d %.200s; want 410 idemkit.response_not_kept, status 200, size %d", i+1, a.status, a.body, len(c.body))
				}
			}
			if runs != 1 {
				t.Fatalf("handler ran %d times, want once", runs)
			}
		})
	}
}

// TestIdemDoesNotLinkTheLambdaRuntime: package idem reads the streamed
// mark through an internal package, so a program that uses idem without
// this package links neither lambdaurl nor the lambda package it imports
// (with net/rpc and html/template).
func TestIdemDoesNotLinkTheLambdaRuntime(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./idem")
	cmd.Dir = shared.ModuleRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./idem: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		switch dep {
		case "github.com/aws/aws-lambda-go/lambda", "github.com/aws/aws-lambda-go/lambdaurl", "net/rpc", "html/template",
			"github.com/idemkit/idemkit/idem/idemlambdaurl":
			t.Errorf("package idem links %s", dep)
		}
	}
}
