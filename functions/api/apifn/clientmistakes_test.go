package apifn

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/wireschema"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// TestClientMistakesAnswerTheContract sends the client mistakes of HTTP
// to every route, under every idempotency policy: malformed, non-object,
// duplicate-member, non-UTF-8, over-deep and oversized JSON, every kind of
// Content-Type and Content-Encoding, invalid Idempotency-Keys, unknown and
// malformed query parameters, every method, malformed path ids, and
// headers (conditional, version, stream, dedup, ...) holding empty,
// control, non-UTF-8, huge and ill-formed values. Whatever arrives, the
// answer is never a 5xx nor an error of Handle; every answer carries
// OpenWOP-Version; a HEAD answer has no content (RFC 9110 §9.3.2); every
// other 4xx is application/json and validates against
// error-envelope.schema.json (under the ERP policy once its documented
// request_id member is set aside), with a registered code at the status
// the registry gives it, or a vendor code; a 405 carries Allow and a 401
// WWW-Authenticate.
func TestClientMistakesAnswerTheContract(t *testing.T) {
	o := wireschema.Load(t)
	envelope, err := o.Schema("error-envelope.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]int{}
	for _, r := range registry(t).Rows {
		status[r.Code] = r.HTTPStatus
	}
	// The registry's vendorCodePattern without its lookahead (RE2 has
	// none): a vendor code never begins "openwop.".
	vendor := regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*\.[a-z][a-z0-9_]*$`)
	for _, name := range idem.PolicyNames() {
		t.Run(name, func(t *testing.T) {
			pol, err := idem.PolicyNamed(name)
			if err != nil {
				t.Fatal(err)
			}
			f := hostOf(t, runs.NewMemRuns(), idem.Config{Policy: pol}, func(f *fixture, c *Config) {
				c.Test = TestConfig{Clock: ledgertest.ClockFuncs{SleepFunc: func(context.Context, time.Duration) error { return nil }}}
			})
			check := func(what string, e events.APIGatewayV2HTTPRequest) {
				t.Helper()
				r, err := f.h.Handle(context.Background(), e)
				what = fmt.Sprintf("%s %.60s %.200s", e.RequestContext.HTTP.Method, e.RawPath, what)
				if err != nil {
					t.Fatalf("%s: Handle returned an error: %v", what, err)
				}
				if r.StatusCode >= 500 {
					t.Errorf("%s: %d %.300s", what, r.StatusCode, r.Body)
				}
				if r.Headers["OpenWOP-Version"] == "" {
					t.Errorf("%s: %d without OpenWOP-Version", what, r.StatusCode)
				}
				if e.RequestContext.HTTP.Method == http.MethodHead {
					if r.Body != "" {
						t.Errorf("%s: HEAD %d with content %.100q", what, r.StatusCode, r.Body)
					}
					return
				}
				if r.StatusCode < 400 {
					return
				}
				var m map[string]any
				if json.Unmarshal([]byte(r.Body), &m) != nil || r.Headers["Content-Type"] != "application/json" {
					t.Errorf("%s: %d %q is no JSON envelope: %.300s", what, r.StatusCode, r.Headers["Content-Type"], r.Body)
					return
				}
				if name == "erp" {
					delete(m, "request_id") // the ERP policy's documented member
				}
				b, _ := json.Marshal(m)
				if err := wireschema.Validate(envelope, b); err != nil {
					t.Errorf("%s: %d %s: %v", what, r.StatusCode, b, err)
				}
				code, _ := m["error"].(string)
				if s, registered := status[code]; registered && s != r.StatusCode || !registered && !vendor.MatchString(code) {
					t.Errorf("%s: %d with code %q (registry status %d)", what, r.StatusCode, code, s)
				}
				if r.StatusCode == http.StatusMethodNotAllowed && r.Headers["Allow"] == "" {
					t.Errorf("%s: 405 without Allow", what)
				}
				if r.StatusCode == http.StatusUnauthorized && r.Headers["WWW-Authenticate"] == "" {
					t.Errorf("%s: 401 without WWW-Authenticate: %v %.200s", what, r.Headers, r.Body)
				}
			}
			request := func(method, path, query, body string, hdr map[string]string) events.APIGatewayV2HTTPRequest {
				e := ev(method, path, "acme", "", body)
				delete(e.Headers, "content-type")
				e.RawQueryString = query
				for k, v := range hdr {
					e.Headers[k] = v
				}
				return e
			}
			n := 0
			key := func() string { n++; return fmt.Sprintf("k-mistake-%015d", n) }

			failed := sourceRun(t, f, "acme", runs.StatusFailed)
			live := sourceRun(t, f, "acme", runs.StatusRunning)
			fp, lp := "/runs/"+runs.ProjectID(failed.ID), "/runs/"+runs.ProjectID(live.ID)
			noop := `{"workflowId":"conformance-noop"}`
			bodies := []string{"{", `{"workflowId":`, noop + " x", "null", "[]", `"s"`, "1", `{"workflowId":1}`,
				`{"workflowId":"nope"}`, `{"workflowId":"conformance-noop","inputs":null}`, "\xff\xfe", `{"a":1,"a":2}`,
				`{"workflowId":"conformance-noop","inputs":{"n":1e400}}`, "\ufeff" + noop,
				`{"x":` + strings.Repeat("[", 12000) + strings.Repeat("]", 12000) + `}`,
				`{"workflowId":"conformance-noop","inputs":{"x":"` + strings.Repeat("a", MaxBodyBytes) + `"}}`, ""}
			posts := []string{"/runs", lp + "/cancel", fp + ":fork", fp + "/retry", "/inbox/x/discard", TestWorkOrderPath, LiveWorkOrderPath}
			for _, p := range posts {
				for _, b := range bodies {
					check("body "+b, request("POST", p, "", b, map[string]string{"content-type": "application/json", "idempotency-key": key()}))
					check("body "+b, request("POST", p, "", b, nil))
				}
				for _, ct := range []string{"text/plain", "application/json; charset=latin1", ";;;", "multipart/form-data; boundary=x", "application/json, text/plain"} {
					check("content-type "+ct, request("POST", p, "", noop, map[string]string{"content-type": ct, "idempotency-key": key()}))
				}
				check("gzip", request("POST", p, "", noop, map[string]string{"content-type": "application/json", "content-encoding": "gzip", "idempotency-key": key()}))
				for _, k := range []string{"", " ", "a", strings.Repeat("k", 300), "k-with space-0123456789", "k-\u00e9\u00e9-0123456789abcd",
					"k-\x01-0123456789abcdef", "k-0123456789abcdefgh,k-0123456789abcdefgi", `"k-0123456789abcdefghijkl"`} {
					check("key "+k, request("POST", p, "", noop, map[string]string{"content-type": "application/json", "idempotency-key": k}))
				}
				check("query", request("POST", p, "foo=bar&%zz;x", noop, map[string]string{"content-type": "application/json", "idempotency-key": key()}))
			}
			reads := []string{fp, fp + "/effects", fp + "/events", lp + "/events", fp + "/events/poll", "/inbox", "/host/effect-seams", "/.well-known/openwop", "/openapi.json"}
			for _, p := range append(append([]string{}, reads...), posts...) {
				for _, m := range []string{"GET", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "FOO", "get"} {
					check("method", request(m, p, "", "", nil))
				}
			}
			for _, p := range reads {
				for _, q := range []string{"foo=bar", "%zz", "a;b", "afterSequence=-1", "afterSequence=abc", "afterSequence=1&afterSequence=2",
					"timeout=0", "timeout=999", "streamMode=bogus", "streamMode=values&streamMode=updates", "bufferMs=-1"} {
					check("query "+q, request("GET", p, q, "", nil))
				}
			}
			for _, id := range []string{"%zz", "..", "acme~2F", "acme%2F", strings.Repeat("a", 5000), "acme~2F" + strings.Repeat("z", 5000),
				"acme~2F%00", "acme~2F\u00e9\u00e9", "~2F", "acme~2Fz%2Fz", "ACME~2Fzzzzzzzzzzzzzzzzzzzz", "acme~~2Fzzzzzzzzzzzzzzzzzzzz"} {
				for _, s := range []string{"", "/effects", "/events", "/events/poll"} {
					check("id", request("GET", "/runs/"+id+s, "", "", nil))
				}
				for _, s := range []string{"/cancel", "/retry", ":fork"} {
					check("id", request("POST", "/runs/"+id+s, "", "", map[string]string{"idempotency-key": key()}))
				}
			}

			// Headers: random combinations of request headers, each with a
			// value a client may get wrong, on every route.
			targets := []struct{ method, path, body string }{
				{"POST", "/runs", `{"workflowId":"conformance-noop","scopeId":"s1"}`}, {"GET", fp, ""}, {"HEAD", fp, ""},
				{"GET", fp + "/effects", ""}, {"GET", fp + "/events", ""}, {"GET", lp + "/events", ""}, {"HEAD", lp + "/events", ""},
				{"GET", fp + "/events/poll", ""}, {"GET", "/inbox", ""}, {"POST", lp + "/cancel", `{"reason":"x"}`}, {"POST", lp + "/cancel", ""},
				{"POST", fp + "/retry", ""}, {"POST", fp + ":fork", `{"mode":"replay"}`}, {"GET", "/host/effect-seams", ""},
				{"GET", "/.well-known/openwop", ""}, {"HEAD", "/openapi.json", ""}, {"POST", TestWorkOrderPath, "{}"}, {"POST", LiveWorkOrderPath, "{}"},
			}
			names := []string{"if-none-match", "if-match", "last-event-id", "openwop-version", "openwop-dedup", "openwop-force-engine-version",
				"idempotency-decided-version", "content-encoding", "content-type", "accept", "x-request-id", "idempotency-key", "range", "expect"}
			values := []string{"", " ", "\x00", "\xff\xfe", strings.Repeat("9", 5000), ",", "*", `W/"1"`, `"1"`, `"1", "2"`, "-1", "1e3",
				"99999999999999999999", "enforce", "2", "2.21", "3", "gzip", "application/json", "text/plain", "k-0123456789abcdefghijkl", "\t", "a\r\nb"}
			rng := rand.New(rand.NewSource(1))
			for i := 0; i < 1500; i++ {
				tg := targets[rng.Intn(len(targets))]
				hdr := map[string]string{}
				if tg.body != "" {
					hdr["content-type"] = "application/json"
				}
				if rng.Intn(3) == 0 {
					hdr["idempotency-key"] = key()
				}
				var set []string
				for j := 0; j <= rng.Intn(3); j++ {
					k, v := names[rng.Intn(len(names))], values[rng.Intn(len(values))]
					hdr[k] = v
					set = append(set, fmt.Sprintf("%s: %.20q", k, v))
				}
				check(strings.Join(set, "; "), request(tg.method, tg.path, "", tg.body, hdr))
			}
		})
	}
}
