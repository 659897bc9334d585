package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/dynamotest"
)

// TestDevBadBodiesCreateNothing speaks raw HTTP/1.1 to `idemkit dev` (the
// deployed stack's Guard configuration, on DynamoDB Local and moto) with
// createRun bodies a careless or hostile caller sends, with and without
// Content-Type and Idempotency-Key: JSON that is not I-JSON (bytes that
// are not UTF-8, which the gateway passes base64-encoded as API Gateway
// does, a member twice, a lone surrogate) is 400 validation_error, a body
// naming another tenant 403 forbidden, an eval-suite request 422
// capability_required; each in the envelope, and the runs table holds no
// run afterwards.
func TestDevBadBodiesCreateNothing(t *testing.T) {
	dynamotest.ForEachWith(t, dynamotest.Streams, func(t *testing.T, e *dynamotest.Emulator) {
		d := &rawDev{e: e, policy: "openwop", apiKey: "idk_badinput_test_0123456789",
			prefix: fmt.Sprintf("badinput-%d-", time.Now().UnixNano())}
		_, url := startDevInProcess(t, "--dynamodb-endpoint", e.Endpoint, "--table-prefix", d.prefix, "--api-key", d.apiKey+"=acme")
		d.addr = strings.TrimPrefix(url, "http://")
		cases := []struct {
			name, body string
			status     int
			code       string
		}{
			{"invalid UTF-8", "{\"workflowId\":\"conformance-noop\",\"inputs\":{\"s\":\"a\xffb\"}}", http.StatusBadRequest, "validation_error"},
			{"workflowId twice", `{"workflowId":"webhook","workflowId":"conformance-noop"}`, http.StatusBadRequest, "validation_error"},
			{"lone surrogate", `{"workflowId":"conformance-noop","inputs":{"s":"\udfff"}}`, http.StatusBadRequest, "validation_error"},
			{"another tenant", `{"workflowId":"conformance-noop","tenantId":"globex"}`, http.StatusForbidden, "forbidden"},
			{"eval mode", `{"workflowId":"conformance-noop","mode":"eval"}`, http.StatusUnprocessableEntity, "capability_required"},
		}
		for _, c := range cases {
			for _, ct := range []string{"application/json", ""} {
				for _, keyed := range []bool{true, false} {
					h := "POST /runs HTTP/1.1\r\nHost: dev\r\nAuthorization: Bearer " + d.apiKey + "\r\n"
					if ct != "" {
						h += "Content-Type: " + ct + "\r\n"
					}
					if keyed {
						h += "Idempotency-Key: " + uniqueKey("badinput") + "\r\n"
					}
					wire := h + fmt.Sprintf("Content-Length: %d\r\n\r\n", len(c.body)) + c.body
					what := fmt.Sprintf("%s (Content-Type %q, key %v)", c.name, ct, keyed)
					d.wantEnvelope(t, what, d.exchange(t, wire, 1)[0], c.status, c.code)
				}
			}
		}
		if n := d.runCount(t); n != 0 {
			t.Fatalf("%d runs in the runs table, want none", n)
		}
	})
}
