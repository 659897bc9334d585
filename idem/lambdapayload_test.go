package idem_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/idemkit/idemkit/idem"
)

// invocation is the context of a Lambda invocation (the adapters bound an
// answer's payload only there).
func invocation() context.Context {
	return lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "inv-" + randID()})
}

// lambdaPayload is the size of the payload Lambda returns for out, as
// aws-lambda-go encodes it (no HTML escaping, a trailing newline).
func lambdaPayload(t *testing.T, out any) int {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		t.Fatal(err)
	}
	return b.Len()
}

// A response whose body is within MaxResponseBytes but whose Lambda
// payload is not (a binary body base64-encoded, a text body JSON-escaped)
// cannot be returned by Lambda at all: the invocation fails and API
// Gateway answers 502. Kept, it was replayed the same way to every
// retry, so each retry failed again, forever. The API Gateway adapters
// record it as not kept instead: the handler ran once, its duplicates
// are answered 410 idemkit.response_not_kept. A payload well inside the
// limit is kept and replayed as before, and so is every response outside
// a Lambda invocation (a context without a lambdacontext), where no such
// limit applies.
func TestLambdaPayloadOverTheLimitIsNotKept(t *testing.T) {
	const limit = 6 << 20                                         // Lambda's synchronous response payload
	binOver := bytes.Repeat([]byte{0xff, 0x00, 0x7f}, (5<<20)/3)  // 5 MB: 6.7 MB base64
	binUnder := bytes.Repeat([]byte{0xff, 0x00, 0x7f}, (4<<20)/3) // 4 MB: 5.3 MB base64
	textOver := "[" + strings.Repeat(`"",`, 1_300_000) + `""]`    // 3.9 MB, 6.5 MB escaped
	textUnder := "[" + strings.Repeat(`"",`, 1_000_000) + `""]`   // 3 MB, 5 MB escaped
	for _, c := range []struct {
		name string
		b64  bool
		body string
		size int // the body's size in bytes
		kept bool
	}{
		{"v2 binary over", true, base64.StdEncoding.EncodeToString(binOver), len(binOver), false},
		{"v2 binary under", true, base64.StdEncoding.EncodeToString(binUnder), len(binUnder), true},
		{"v2 text over", false, textOver, len(textOver), false},
		{"v2 text under", false, textUnder, len(textUnder), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, nil)
			runs := 0
			h := e.guard.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				runs++
				return events.APIGatewayV2HTTPResponse{StatusCode: 200, Headers: map[string]string{"Content-Type": "application/octet-stream"},
					Body: c.body, IsBase64Encoded: c.b64}, nil
			})
			first, _ := h(invocation(), v2event("POST", "POST /exports", testKey, `{}`))
			if first.StatusCode != 200 || first.Body != c.body {
				t.Fatalf("first: %d, %d bytes; want 200 and the handler's body", first.StatusCode, len(first.Body))
			}
			if over := lambdaPayload(t, first) > limit; over == c.kept {
				t.Fatalf("test data: payload %d bytes, over the limit %v", lambdaPayload(t, first), over)
			}
			for i := range 2 {
				r, _ := h(invocation(), v2event("POST", "POST /exports", testKey, `{}`))
				if c.kept {
					if r.StatusCode != 200 || r.Body != c.body || r.Headers[idem.HeaderOpenWOPReplay] != "true" {
						t.Fatalf("duplicate %d: %d, %d bytes; want the replay", i+1, r.StatusCode, len(r.Body))
					}
					continue
				}
				hdr := http.Header{}
				for k, v := range r.Headers {
					hdr.Set(k, v)
				}
				wantNotKept(t, r.StatusCode, hdr, []byte(r.Body), 200, c.size)
			}
			if runs != 1 {
				t.Fatalf("handler ran %d times, want once", runs)
			}
		})
	}
	t.Run("v2 binary over, outside Lambda", func(t *testing.T) {
		e := newEnv(t, nil)
		runs := 0
		body := base64.StdEncoding.EncodeToString(binOver)
		h := e.guard.HTTPAPI(func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			runs++
			return events.APIGatewayV2HTTPResponse{StatusCode: 200, Body: body, IsBase64Encoded: true}, nil
		})
		for i := range 2 {
			r, _ := h(context.Background(), v2event("POST", "POST /exports", testKey, `{}`))
			if r.StatusCode != 200 || r.Body != body || (i == 1) != (r.Headers[idem.HeaderOpenWOPReplay] == "true") {
				t.Fatalf("call %d: %d, %d bytes; want the answer, then its replay", i+1, r.StatusCode, len(r.Body))
			}
		}
		if runs != 1 {
			t.Fatalf("handler ran %d times, want once", runs)
		}
	})
	t.Run("v1 binary over", func(t *testing.T) {
		e := newEnv(t, nil)
		runs := 0
		body := base64.StdEncoding.EncodeToString(binOver)
		h := e.guard.REST(func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
			runs++
			return events.APIGatewayProxyResponse{StatusCode: 201, Body: body, IsBase64Encoded: true}, nil
		})
		ev := v1ev(testKey)
		first, _ := h(invocation(), ev)
		if first.StatusCode != 201 || first.Body != body {
			t.Fatalf("first: %d", first.StatusCode)
		}
		r, _ := h(invocation(), v1ev(testKey))
		hdr := http.Header{}
		for k, v := range r.Headers {
			hdr.Set(k, v)
		}
		wantNotKept(t, r.StatusCode, hdr, []byte(r.Body), 201, len(binOver))
		if runs != 1 {
			t.Fatalf("handler ran %d times, want once", runs)
		}
	})
}

func v1ev(key string) events.APIGatewayProxyRequest {
	return events.APIGatewayProxyRequest{
		Resource: "/exports", Path: "/exports", HTTPMethod: "POST",
		Headers: map[string]string{"Content-Type": "application/json", "Idempotency-Key": key},
		Body:    `{}`,
		RequestContext: events.APIGatewayProxyRequestContext{RequestID: "r-" + randID(),
			Authorizer: map[string]any{"tenantId": testTenant}},
	}
}
