package idem_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
)

// proxyAnswer is the HTTP API answer aws-lambda-go-api-proxy builds from
// a net/http response: a body that is valid UTF-8 as text, any other
// base64-encoded, repeated headers joined with commas.
func proxyAnswer(w *httptest.ResponseRecorder) events.APIGatewayV2HTTPResponse {
	out := events.APIGatewayV2HTTPResponse{StatusCode: w.Code, Headers: map[string]string{}}
	if b := w.Body.Bytes(); utf8.Valid(b) {
		out.Body = string(b)
	} else {
		out.Body, out.IsBase64Encoded = base64.StdEncoding.EncodeToString(b), true
	}
	for k, vs := range w.Header() {
		out.Headers[k] = strings.Join(vs, ",")
	}
	return out
}

// TestLambdaPayloadOverTheLimitIsNotKeptBehindNetHTTP: the net/http
// adapters inside a Lambda invocation (behind aws-lambda-go-api-proxy,
// whose request carries the invocation's context, as README and
// GUARANTEES document for the router adapters) bound an answer's payload
// as the API Gateway adapters do: a body within MaxResponseBytes whose
// payload Lambda cannot return (5 MB of binary, 6.7 MB base64-encoded; 3.9
// MB of JSON, 6.5 MB escaped) is answered once and recorded as not kept,
// every duplicate 410 idemkit.response_not_kept. Before, it was kept and
// replayed into the same failed invocation (API Gateway's 502) on every
// retry while the record was kept. One within the limit is replayed, and
// outside Lambda nothing changes.
func TestLambdaPayloadOverTheLimitIsNotKeptBehindNetHTTP(t *testing.T) {
	const limit = 6 << 20
	binOver := bytes.Repeat([]byte{0xff, 0x00, 0x7f}, (5<<20)/3)
	binUnder := bytes.Repeat([]byte{0xff, 0x00, 0x7f}, (4<<20)/3)
	textOver := []byte("[" + strings.Repeat(`"",`, 1_300_000) + `""]`)
	textUnder := []byte("[" + strings.Repeat(`"",`, 1_000_000) + `""]`)
	for _, c := range []struct {
		name   string
		body   []byte
		lambda bool
		kept   bool
	}{
		{"binary over", binOver, true, false},
		{"binary under", binUnder, true, true},
		{"text over", textOver, true, false},
		{"text under", textUnder, true, true},
		{"binary over, outside Lambda", binOver, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, func(cfg *idem.Config) { cfg.Tenant = idem.SingleTenant("t") })
			runs := 0
			h := e.guard.Handle("POST /exports", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs++
				w.Header().Set("Content-Type", "application/octet-stream")
				_, _ = w.Write(c.body)
			}))
			call := func() *httptest.ResponseRecorder {
				req := httptest.NewRequest("POST", "/exports", strings.NewReader(`{}`))
				if c.lambda {
					req = req.WithContext(invocation())
				}
				req.Header.Set("Idempotency-Key", testKey)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				return w
			}
			first := call()
			if first.Code != 200 || !bytes.Equal(first.Body.Bytes(), c.body) {
				t.Fatalf("first: %d, %d bytes; want 200 and the handler's body", first.Code, first.Body.Len())
			}
			if over := lambdaPayload(t, proxyAnswer(first)) > limit; c.lambda && over == c.kept {
				t.Fatalf("test data: payload %d bytes, over the limit %v", lambdaPayload(t, proxyAnswer(first)), over)
			}
			for i := range 2 {
				w := call()
				if c.kept {
					if w.Code != 200 || !bytes.Equal(w.Body.Bytes(), c.body) || w.Header().Get(idem.HeaderOpenWOPReplay) != "true" {
						t.Fatalf("duplicate %d: %d, %d bytes; want the replay", i+1, w.Code, w.Body.Len())
					}
					continue
				}
				wantNotKept(t, w.Code, w.Header(), w.Body.Bytes(), 200, len(c.body))
			}
			if runs != 1 {
				t.Fatalf("handler ran %d times, want once", runs)
			}
		})
	}
}
