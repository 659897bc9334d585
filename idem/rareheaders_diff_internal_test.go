package idem

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// TestV2FastPathFingerprintDiffers compares, for HTTP API events whose
// headers are written every way a client or a gateway may write them,
// what the fast path of an HTTP API request (v2Headers' absent bits, the
// exact "application/json" Content-Type) gives with what the full path
// gives for the same request (absent bits unknown, the Content-Type read
// through bodyMediaType): the fingerprint under every route shape
// (declared override headers or none, media in the fingerprint or not)
// and the decision on a coded body must be the same.
func TestV2FastPathFingerprintDiffers(t *testing.T) {
	tenant := &TenantSource{}
	contentTypes := []string{
		"application/json", "application/json; charset=utf-8", "Application/JSON", " application/json",
		"application/json ", "application/json;", "application/json ;", "application/json,application/json",
		"application/json, text/plain", "APPLICATION/JSON", "application/merge-patch+json", "text/plain",
		"application/x-www-form-urlencoded", "text/plain; charset=UTF-8", "application/json\t", "",
	}
	overrideNames := []string{
		"X-Http-Method", "x-http-method", "X-HTTP-METHOD", "X-Http-Method-Override", "x-http-method-override",
		"X-Method-Override", "x-method-override", "X-METHOD-OVERRIDE", "x-http-method-overri\u212Ae",
		"\u212A-http-method", "x-http-method-override\u017F", "x-method-override ", "x-http-methods",
		"X-Http-Method\u017F", "x-method-overrid\u212Ae",
	}
	encodingNames := []string{"Content-Encoding", "content-encoding", "CONTENT-ENCODING", "content-encoding ", "content-encodin\u212A", "\u017Fontent-encoding"}
	encodingValues := []string{"gzip", "identity", "", "Identity", "IDENTITY", "gzip, identity", "identity, gzip", "br", " identity "}
	methods := []string{"POST", "DELETE", "PUT"}
	overrideValues := []string{"DELETE", "post", "POST", "delete, put", "", "PUT"}
	declared := [][]string{nil, {"X-Http-Method"}, {"X-Http-Method-Override", "X-Method-Override"}}
	r := rand.New(rand.NewPCG(3, 4))
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	var skipped [4]int
	for i := range 30000 {
		h := map[string]string{"idempotency-key": "k", "accept": "*/*", "user-agent": "curl"}
		if ct := pick(contentTypes); ct != "" || r.IntN(2) == 0 {
			name := "content-type"
			if r.IntN(3) == 0 {
				name = "Content-Type"
			}
			h[name] = ct
		}
		for range r.IntN(3) {
			// One name per header in any case: two names of one header
			// in one map give its values in map order (a gateway that
			// lower-cases names joins them into one).
			name := pick(overrideNames)
			dup := false
			for k := range h {
				dup = dup || strings.EqualFold(k, name)
			}
			if !dup {
				h[name] = pick(overrideValues)
			}
		}
		if r.IntN(3) == 0 {
			h[pick(encodingNames)] = pick(encodingValues)
		}
		body := `{"a":1}`
		if r.IntN(5) == 0 {
			body = ""
		}
		req := Request{Event: events.APIGatewayV2HTTPRequest{
			RouteKey: "POST /x", Headers: h, Body: body,
			RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: pick(methods)}},
		}}
		fast := new(request)
		fromV2(fast, &req, tenant)
		full := new(request)
		fromV2(full, &req, tenant)
		full.v2Absent = 0 // unknown: every check makes its own pass
		skipped[fast.v2Absent]++
		digest := []byte("digest")
		for _, media := range []bool{false, true} {
			for _, d := range declared {
				a := fingerprintSum(fast, "op", digest, media, d)
				b := fingerprintSum(full, "op", digest, media, d)
				// The full path's media type as bodyMediaType parses it.
				if a != b {
					t.Fatalf("case %d: headers %q method %s media %v declared %v: fast fingerprint differs from the full path's", i, h, fast.method, media, d)
				}
			}
		}
		// The media type appended as bodyMediaType parses it.
		var want []byte
		if mt := bodyMediaType(fast); mt != "" {
			want = binary.BigEndian.AppendUint64([]byte{'m'}, uint64(len(mt)))
			want = append(want, mt...)
		}
		if got := appendBodyMediaType(nil, fast); !bytes.Equal(got, want) {
			t.Fatalf("case %d: Content-Type %q: appended %q, bodyMediaType gives %q", i, fast.contentType, got, want)
		}
		ea, eb := codedBody(fast), codedBody(full)
		if (ea == nil) != (eb == nil) || ea != nil && (ea.Status != eb.Status || ea.Code != eb.Code) {
			t.Fatalf("case %d: headers %q: codedBody fast %v, full %v", i, h, ea, eb)
		}
	}
	for bits, n := range skipped {
		if n == 0 {
			t.Fatalf("no case with absent bits %b: the fast path is not compared in every shape", bits)
		}
	}
}
