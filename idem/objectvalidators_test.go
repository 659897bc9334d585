package idem_test

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/idem/policy/commerce"
)

// TestObjectReplayCarriesTheObjectsValidatorsNotTheFirstBodys: under the
// commerce policy a settled Action's replay is the first answer's status
// and headers around the Action's current body; the validators of the
// first body (its ETag, Content-Digest, Repr-Digest, Digest, Content-MD5,
// Content-Length) describe other bytes and are not carried over: the
// replay has the loaded object's own ETag, or none, and no digest of the
// first body. Before the fix the first answer's strong ETag replaced the
// object's, so a client's If-Match named a version the body was not.
func TestObjectReplayCarriesTheObjectsValidatorsNotTheFirstBodys(t *testing.T) {
	digests := []string{"Content-Digest", "Repr-Digest", "Digest", "Content-Md5"}
	for _, objectETag := range []string{`"v2"`, ""} {
		t.Run("objectETag="+objectETag, func(t *testing.T) {
			e := commerceGuard(t, -1)
			load := func(context.Context, idem.ClaimInfo, *idem.Response) (idem.ObjectState, error) {
				h := map[string][]string{"Content-Type": {"application/json"}}
				if objectETag != "" {
					h["Etag"] = []string{objectETag}
				}
				return idem.ObjectState{Response: &idem.Response{Status: 200, Headers: h, Body: []byte(`{"actionId":"a-1","status":"completed"}`)},
					Settled: true}, nil
			}
			runs := 0
			do := func() events.APIGatewayV2HTTPResponse {
				ev := commerceEvent("POST", "POST /actions", "cart-42", `{"sku":"font-1"}`)
				r, err := e.guard.Do(context.Background(), idem.Request{Event: ev, Object: load}, func(context.Context) (events.APIGatewayV2HTTPResponse, error) {
					runs++
					hs := map[string]string{"Content-Type": "application/json", "Location": "/actions/a-1", "ETag": `"v1"`, "Content-Length": "37"}
					for _, d := range digests {
						hs[d] = "sha-256=:AAAA:"
					}
					return events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: hs, Body: `{"actionId":"a-1","status":"pending"}`}, nil
				})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			if r := do(); r.StatusCode != 201 || r.Headers["Etag"] != `"v1"` {
				t.Fatalf("first: %d %v", r.StatusCode, r.Headers)
			}
			r := do()
			if r.StatusCode != 201 || r.Headers[commerce.HeaderIdempotentReplay] != "true" || r.Headers["Location"] != "/actions/a-1" || runs != 1 ||
				r.Body != `{"actionId":"a-1","status":"completed"}` {
				t.Fatalf("replay: %d %v %s (runs %d)", r.StatusCode, r.Headers, r.Body, runs)
			}
			if got := r.Headers["Etag"]; got != objectETag {
				t.Errorf("replay ETag %q, want the object's %q", got, objectETag)
			}
			for _, d := range append(digests, "Content-Length") {
				if v, ok := r.Headers[d]; ok {
					t.Errorf("replay %s %q: a validator of the first body", d, v)
				}
			}
		})
	}
}
