package apifn

import (
	"encoding/json"
	"maps"
	"net/http"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/erp"
	"github.com/idemkit/idemkit/internal/apierr"
)

// policyHandler is a Handler whose Guard runs under policy p.
func policyHandler(t *testing.T, p idem.Policy) *Handler {
	t.Helper()
	return hostOf(t, runs.NewMemRuns(), idem.Config{Policy: p}, nil).h
}

// TestERPHostStampMarksEveryHostAnswer: under the ERP policy an answer
// the host produced outside Layer 1 (a 404 envelope) gets X-Request-ID and
// its envelope request_id, equal to the current request's id; a success
// body without the member keeps its bytes and gains the header; under the
// OpenWOP default the answer is returned as it was.
func TestERPHostStampMarksEveryHostAnswer(t *testing.T) {
	h := policyHandler(t, erp.Policy)
	got := h.stamp(notFound(), "req-9")
	var m map[string]any
	if err := json.Unmarshal([]byte(got.Body), &m); err != nil || m["request_id"] != "req-9" || got.Headers[erp.HeaderRequestID] != "req-9" {
		t.Fatalf("404 under ERP: %v %s", got.Headers, got.Body)
	}
	ok := events.APIGatewayV2HTTPResponse{StatusCode: 200, Headers: map[string]string{"Content-Type": "application/json"}, Body: `{"a":1}`}
	if got := h.stamp(ok, "req-9"); got.Body != `{"a":1}` || got.Headers[erp.HeaderRequestID] != "req-9" {
		t.Fatalf("200 under ERP: %v %s", got.Headers, got.Body)
	}
	nf := notFound()
	if got := policyHandler(t, idem.PolicyOpenWOP).stamp(nf, "req-9"); !reflect.DeepEqual(got, nf) {
		t.Fatalf("the OpenWOP default stamped %v %s", got.Headers, got.Body)
	}
}

// TestHostStampChangesOnlyTheMarks: the host marks its own answer on the
// Lambda response itself: the policy's header (canonicalised, beside every
// other header, in a new map: the answer it was given is not changed) and
// its member (set in a JSON body that has it, added to an error envelope,
// every other byte kept); a body that is not JSON, a base64-encoded body
// and a success body without the member keep their bytes; no request id
// leaves the answer as it was.
func TestHostStampChangesOnlyTheMarks(t *testing.T) {
	p := idem.PolicyOpenWOP
	p.Name = "traced"
	p.RequestIDHeader = "x-trace-id"
	p.RequestIDMember = "trace_id"
	h := policyHandler(t, p)
	jsonH := map[string]string{"Content-Type": "application/json", "Allow": "GET"}
	for _, c := range []struct {
		name     string
		in       events.APIGatewayV2HTTPResponse
		id       string
		wantBody string
		header   bool
	}{
		{"envelope gains the member", errResp(apierr.New(http.StatusNotFound, apierr.CodeNotFound, "no")), "r1",
			`{"error":"not_found","message":"no","trace_id":"r1"}`, true},
		{"member set in place", events.APIGatewayV2HTTPResponse{StatusCode: 200, Headers: jsonH, Body: `{"trace_id": "old", "x":[1, 2]}`}, "r2",
			`{"trace_id": "r2", "x":[1, 2]}`, true},
		{"member already equal", events.APIGatewayV2HTTPResponse{StatusCode: 200, Headers: jsonH, Body: `{"trace_id":"r3"}`}, "r3",
			`{"trace_id":"r3"}`, true},
		{"success body without the member", events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: jsonH, Body: `{"x":1}`}, "r4",
			`{"x":1}`, true},
		{"not JSON", events.APIGatewayV2HTTPResponse{StatusCode: 400, Headers: map[string]string{"Content-Type": "text/plain"}, Body: `{"error":"x"}`}, "r5",
			`{"error":"x"}`, true},
		{"base64 body", events.APIGatewayV2HTTPResponse{StatusCode: 400, Headers: jsonH, Body: "eyJlcnJvciI6IngifQ==", IsBase64Encoded: true}, "r6",
			"eyJlcnJvciI6IngifQ==", true},
		{"no headers", events.APIGatewayV2HTTPResponse{StatusCode: 204}, "r7", "", true},
		{"no request id", events.APIGatewayV2HTTPResponse{StatusCode: 404, Headers: jsonH, Body: `{"error":"not_found"}`}, "",
			`{"error":"not_found"}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := maps.Clone(c.in.Headers)
			got := h.stamp(c.in, c.id)
			if !maps.Equal(c.in.Headers, before) {
				t.Fatalf("the given answer's headers changed: %v, were %v", c.in.Headers, before)
			}
			if got.Body != c.wantBody || got.StatusCode != c.in.StatusCode || got.IsBase64Encoded != c.in.IsBase64Encoded {
				t.Fatalf("got %d %q (base64 %v), want %d %q", got.StatusCode, got.Body, got.IsBase64Encoded, c.in.StatusCode, c.wantBody)
			}
			want := maps.Clone(c.in.Headers)
			if c.header {
				if want == nil {
					want = map[string]string{}
				}
				want["X-Trace-Id"] = c.id
			}
			if !maps.Equal(got.Headers, want) {
				t.Fatalf("headers %v, want %v", got.Headers, want)
			}
		})
	}
}
