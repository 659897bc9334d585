package apifn

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit/functions/host/kit"
	"github.com/idemkit/idemkit/functions/host/runs"
	"github.com/idemkit/idemkit/idem"
	"github.com/idemkit/idemkit/internal/wireschema"
	"github.com/idemkit/idemkit/ledger/ledgertest"
)

// lockedBuffer is a log sink safe for the concurrent writes of a bulk
// cancel's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// badInputMarker is in every Idempotency-Key and every body the matrix
// sends: no log line may carry it.
const badInputMarker = "zq7SECRETzq7"

// noHeader, as a header's value in the matrix, sends the request without
// the header ("" sends it empty).
const noHeader = "\x00no header"

// TestBadInputMatrixOnEveryRoute mutates a valid request of every route of
// the table (Routes; bulk cancel, pause, resume and the inbox's resubmit
// and discard included) every way a client gets input wrong: each body
// truncated at every byte; each member of each body, and each member one
// level down, replaced by every JSON type, a lone surrogate, a number
// outside I-JSON, an over-long string; an unknown member; each member
// twice; invalid UTF-8; empty and blank bodies; every kind of
// Content-Type; Content-Encoding gzip with corrupt data; the body
// base64-encoded (isBase64Encoded) correctly and not; path ids with %2F,
// .., unicode and overlong; event cursors forged, truncated and of another
// tenant; Idempotency-Keys at and past their length bounds and outside
// their charset; If-Match and Idempotency-Decided-Version malformed; every
// method. It runs under the Guard the api function is deployed with
// (BodyTenantField, kit.Layer1Routes) for every idempotency policy, and
// under the OpenWOP policy also with a plain Guard, with keys required and
// with Layer 1 off (the body mutations). Whatever arrives: never an error of Handle nor a
// 5xx; every answer carries OpenWOP-Version; a HEAD answer has no content;
// under the OpenWOP policy every other JSON answer, 2xx included,
// validates against the closed schema the OpenAPI document names for its
// route and status (the error envelope for a status it does not list, and
// for every error of a route outside it), with a registered code at the
// registry's status; a refused request creates no run; a refusal (400,
// 413, 415, ...) is never its key's answer: the valid request then sent
// under the key is not answered idempotency_key_mismatch nor the refusal
// again; and no log line carries a key or a byte of a body.
func TestBadInputMatrixOnEveryRoute(t *testing.T) {
	o := wireschema.Load(t)
	envelope, err := o.Schema("error-envelope.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]int{}
	for _, r := range registry(t).Rows {
		status[r.Code] = r.HTTPStatus
	}
	vendor := regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*\.[a-z][a-z0-9_]*$`)
	guards := map[string]func(*idem.Config){
		"plain": func(*idem.Config) {},
		"deployed": func(c *idem.Config) {
			c.BodyTenantField, c.Routes = "tenantId", kit.Layer1Routes()
		},
		"off": func(c *idem.Config) {
			c.BodyTenantField, c.Routes, c.Disabled = "tenantId", kit.Layer1Routes(), true
		},
		"required": func(c *idem.Config) {
			c.BodyTenantField, c.Routes, c.Required = "tenantId", kit.Layer1Routes(), true
		},
	}
	for _, name := range idem.PolicyNames() {
		for gname, guard := range guards {
			if name != idem.PolicyOpenWOP.Name && gname != "deployed" {
				continue // the policies' own answers: under the deployed Guard
			}
			t.Run(name+"/"+gname, func(t *testing.T) {
				pol, err := idem.PolicyNamed(name)
				if err != nil {
					t.Fatal(err)
				}
				logs := &lockedBuffer{}
				logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
				gc := idem.Config{Policy: pol, Logger: logger}
				guard(&gc)
				f := hostOf(t, runs.NewMemRuns(), gc, func(f *fixture, c *Config) {
					c.Logger = logger
					c.Test = TestConfig{Clock: ledgertest.ClockFuncs{SleepFunc: func(context.Context, time.Duration) error { return nil }}}
				})
				n := 0
				key := func() string { n++; return fmt.Sprintf("k-%s-%012d", badInputMarker, n) }
				fails := 0
				// Every mutation under the deployed Guard of the OpenWOP
				// policy; a sample of them under the others.
				step := 1
				if name != idem.PolicyOpenWOP.Name || gname != "deployed" {
					step = 3
				}
				validated := map[string]bool{}
				check := func(what string, e events.APIGatewayV2HTTPRequest) (r events.APIGatewayV2HTTPResponse) {
					t.Helper()
					if fails > 40 {
						return
					}
					before := f.runs.Len()
					r, err := f.h.Handle(context.Background(), e)
					method := e.RequestContext.HTTP.Method
					what = fmt.Sprintf("%s %.80s?%.40s %.160q", method, e.RawPath, e.RawQueryString, what)
					fail := func(format string, args ...any) {
						t.Helper()
						fails++
						t.Errorf(what+": "+format, args...)
					}
					if err != nil {
						fail("Handle returned an error: %v", err)
						return
					}
					if r.StatusCode >= 500 {
						fail("%d %.300s", r.StatusCode, r.Body)
					}
					if r.Headers["OpenWOP-Version"] == "" {
						fail("%d without OpenWOP-Version", r.StatusCode)
					}
					if r.StatusCode >= 400 && f.runs.Len() != before {
						fail("%d %.200s, and %d runs created", r.StatusCode, r.Body, f.runs.Len()-before)
					}
					if method == http.MethodHead {
						if r.Body != "" {
							fail("HEAD %d with content %.100q", r.StatusCode, r.Body)
						}
						return
					}
					if r.StatusCode == http.StatusMethodNotAllowed && r.Headers["Allow"] == "" {
						fail("405 without Allow")
					}
					if r.StatusCode == http.StatusUnauthorized && r.Headers["WWW-Authenticate"] == "" {
						fail("401 without WWW-Authenticate")
					}
					ct := r.Headers["Content-Type"]
					if r.StatusCode < 400 && !strings.HasPrefix(ct, "application/json") {
						return // the event stream, a work order's XML
					}
					var m map[string]any
					if json.Unmarshal([]byte(r.Body), &m) != nil || !strings.HasPrefix(ct, "application/json") {
						fail("%d %q is no JSON object: %.300s", r.StatusCode, ct, r.Body)
						return
					}
					body := []byte(r.Body)
					if name == "erp" && r.StatusCode >= 400 {
						delete(m, "request_id") // the ERP policy's documented member
						body, _ = json.Marshal(m)
					}
					sch := envelope
					if mt, _, _, ok := MatchRoute(method, e.RawPath); ok && mt.Route.Op != "" {
						if s, _, err := o.Response(method, mt.Route.Pattern, r.StatusCode); err == nil {
							sch = s
						} else if r.StatusCode < 400 && !strings.Contains(err.Error(), "has no path") {
							fail("%d: %v", r.StatusCode, err)
							return
						} else if r.StatusCode < 400 {
							sch = nil // a host route outside the contract
						}
					}
					if sch != nil && name == "openwop" && !validated[fmt.Sprint(sch, r.StatusCode)+string(body)] {
						validated[fmt.Sprint(sch, r.StatusCode)+string(body)] = true
						if err := wireschema.Validate(sch, body); err != nil {
							fail("%d %.300s: %v", r.StatusCode, body, err)
						}
					}
					if r.StatusCode >= 400 && name == "openwop" {
						code, _ := m["error"].(string)
						if s, registered := status[code]; registered && s != r.StatusCode || !registered && !vendor.MatchString(code) {
							fail("%d with code %q (registry status %d)", r.StatusCode, code, s)
						}
					}
					return r
				}
				req := func(method, path, query, body string, hdr map[string]string) events.APIGatewayV2HTTPRequest {
					e := ev(method, path, "acme", "", body)
					delete(e.Headers, "content-type")
					e.RawQueryString = query
					e.RequestContext.Authorizer.Lambda["namespace"] = "shop"
					e.RequestContext.Authorizer.Lambda["worker"] = "checkout"
					for _, k := range []string{"clientId", "companyId", "organizationId"} {
						e.RequestContext.Authorizer.Lambda[k] = "c-1"
					}
					for k, v := range hdr {
						e.Headers[k] = v
					}
					return e
				}

				completed := sourceRun(t, f, "acme", runs.StatusCompleted)
				failed := sourceRun(t, f, "acme", runs.StatusFailed)
				other := sourceRun(t, f, "globex", runs.StatusRunning)
				live := func() runs.Run { return sourceRun(t, f, "acme", runs.StatusRunning) }
				paused := func() runs.Run {
					r := live()
					if _, err := f.runs.Pause(context.Background(), r.ID, runs.Pause{Drain: runs.DrainImmediate, By: "t"}, time.Now()); err != nil {
						t.Fatal(err)
					}
					return r
				}
				pp := func(r runs.Run) string { return "/runs/" + runs.ProjectID(r.ID) }
				entries := map[string]string{}
				entry := func(verb string) string {
					if id, ok := entries[verb]; ok {
						return id
					}
					r := live()
					resp, m := f.do(t, req("POST", pp(r)+"/cancel", "", "", map[string]string{"idempotency-key": key(), "idempotency-decided-version": "1"}))
					d, _ := m["details"].(map[string]any)
					id, _ := d["inboxId"].(string)
					if resp.StatusCode != 409 || id == "" {
						t.Logf("no inbox entry under %s: %d %s", name, resp.StatusCode, resp.Body)
						return "zzzzzzzzzzzzzzzzzzzzzzzzzz"
					}
					entries[verb] = id
					return id
				}

				// Bodies: a valid one per JSON route, mutated.
				type target struct {
					path  func() string
					body  string
					jsonB bool // the route's body is JSON
				}
				wo := `{"work_order_number":"WO-1","projects":[{"code":"P-1","name":"Pump","quantity":2}]}`
				targets := []target{
					{func() string { return "/runs" }, `{"workflowId":"conformance-noop","inputs":{"a":[1,"x",{"b":null}]},"scopeId":"s-` + badInputMarker + `"}`, true},
					{func() string { return pp(live()) + "/cancel" }, `{"reason":"r-` + badInputMarker + `"}`, true},
					{func() string { return "/runs:bulk-cancel" }, `{"runIds":["` + live().ID + `","` + other.ID + `"],"reason":"r-` + badInputMarker + `"}`, true},
					{func() string { return pp(failed) + "/retry" }, ``, false},
					{func() string { return pp(completed) + ":fork" }, `{"mode":"branch","fromSeq":1,"runOptionsOverlay":{}}`, true},
					{func() string { return pp(live()) + ":pause" }, `{"reason":"r-` + badInputMarker + `","drainPolicy":"immediate"}`, true},
					{func() string { return pp(paused()) + ":resume" }, `{"reason":"r-` + badInputMarker + `"}`, true},
					{func() string { return "/inbox/" + entry("resubmit") + "/resubmit" }, ``, false},
					{func() string { return "/inbox/" + entry("discard") + "/discard" }, ``, false},
					{func() string { return TestWorkOrderPath }, wo, true},
					{func() string { return LiveWorkOrderPath }, wo, true},
				}
				values := []string{`null`, `true`, `0`, `-1`, `1.5`, `1e400`, `-1e400`, `9007199254740993`, `""`, `"x"`, `"\ud800"`, `"\udc00x"`,
					`[]`, `{}`, `[null]`, `{"` + badInputMarker + `":1}`, `"` + strings.Repeat("y", 2000) + `"`, `"` + badInputMarker + `\u0000"`}
				for _, tg := range targets {
					post := func(what, body string, hdr map[string]string) events.APIGatewayV2HTTPResponse {
						h := map[string]string{"idempotency-key": key()}
						if tg.jsonB || body != "" {
							h["content-type"] = "application/json"
						}
						for k, v := range hdr {
							if v == noHeader {
								delete(h, k)
							} else {
								h[k] = v
							}
						}
						path := tg.path()
						r := check(what, req("POST", path, "", body, h))
						if _, own := hdr["idempotency-key"]; own || r.StatusCode < 400 || r.StatusCode == http.StatusConflict || r.StatusCode == http.StatusNotFound ||
							path == LiveWorkOrderPath && gname == "plain" {
							// (The work-order route refuses a body under its
							// contract, which the plain Guard lacks: the
							// deployed Guard has it.)
							return r
						}
						// A refusal is never the key's answer: the key
						// then runs the valid request.
						h2 := map[string]string{"idempotency-key": h["idempotency-key"]}
						if tg.jsonB {
							h2["content-type"] = "application/json"
						}
						if r2 := check(what+" (then valid)", req("POST", path, "", tg.body, h2)); r2.StatusCode == http.StatusConflict &&
							strings.Contains(strings.ToLower(r2.Body), "mismatch") || r2.StatusCode == r.StatusCode && r2.Body == r.Body {
							t.Errorf("%s %s %.100q: %d %.200s; the valid request under its key then: %d %.300s", name, path, what, r.StatusCode, r.Body, r2.StatusCode, r2.Body)
						}
						return r
					}
					if r := post("valid", tg.body, nil); r.StatusCode >= 300 {
						t.Errorf("the valid request to %s: %d %s", tg.path(), r.StatusCode, r.Body)
					}
					post("valid, no key", tg.body, map[string]string{"idempotency-key": noHeader})
					for i := 0; i < len(tg.body); i += step {
						post("truncated", tg.body[:i], nil)
					}
					var m map[string]json.RawMessage
					if tg.body != "" {
						if err := json.Unmarshal([]byte(tg.body), &m); err != nil {
							t.Fatal(err)
						}
					}
					names := make([]string, 0, len(m))
					for k := range m {
						names = append(names, k)
					}
					sort.Strings(names)
					with := func(k, v string) string {
						var parts []string
						for _, k2 := range names {
							if k2 == k {
								parts = append(parts, fmt.Sprintf("%q:%s", k2, v))
							} else {
								parts = append(parts, fmt.Sprintf("%q:%s", k2, m[k2]))
							}
						}
						return "{" + strings.Join(parts, ",") + "}"
					}
					for _, k := range names {
						for _, v := range values[:len(values)/step] {
							post("member "+k+"="+v, with(k, v), nil)
						}
						post("member twice "+k, strings.TrimSuffix(tg.body, "}")+fmt.Sprintf(",%q:%s}", k, m[k]), nil)
						// Inner members, one level down.
						var inner map[string]json.RawMessage
						if json.Unmarshal(m[k], &inner) == nil {
							for ik := range inner {
								for _, v := range values[:len(values)/step] {
									post("inner "+k+"."+ik+"="+v, strings.Replace(tg.body, fmt.Sprintf("%q:%s", ik, inner[ik]), fmt.Sprintf("%q:%s", ik, v), 1), nil)
								}
							}
						}
					}
					unknown := `{"` + badInputMarker + `":1}`
					if tg.body != "" && tg.body != "{}" {
						unknown = strings.TrimSuffix(tg.body, "}") + `,"zz` + badInputMarker + `":1}`
					}
					for _, b := range []string{unknown, "", " ", "\n", "null", "[]", "1", `"s"`, "{}", "\xff" + badInputMarker, "\ufeff" + tg.body,
						tg.body + tg.body, tg.body + " x", strings.Repeat("[", 100000), "{\"a\":\"" + badInputMarker + "\xc3\x28\"}", `{"a":"\ud83d` + badInputMarker + `"}`} {
						post("body", b, nil)
					}
					post("big", `{"x":"`+strings.Repeat(badInputMarker, MaxBodyBytes/len(badInputMarker))+`"}`, nil)
					for _, ct := range []string{"text/plain", "application/json; charset=utf-16", "application/json;charset=\"UTF-8\"", "application/problem+json",
						"application/x-www-form-urlencoded", "APPLICATION/JSON", "application/json; boundary", "\x00", "application/json\r\nx: y", "application/jsonx"} {
						post("content-type "+ct, tg.body, map[string]string{"content-type": ct})
					}
					for _, ce := range []string{"gzip", "GZIP", "identity", "identity, gzip", "x-unknown", " "} {
						post("content-encoding "+ce, "\x1f\x8b\x08\x00corrupt"+badInputMarker, map[string]string{"content-encoding": ce})
						post("content-encoding "+ce, tg.body, map[string]string{"content-encoding": ce})
					}
					b64 := func(what, body string) {
						e := req("POST", tg.path(), "", body, map[string]string{"idempotency-key": key(), "content-type": "application/json"})
						e.IsBase64Encoded = true
						check(what, e)
					}
					b64("base64", base64.StdEncoding.EncodeToString([]byte(tg.body)))
					b64("base64 url", base64.URLEncoding.EncodeToString([]byte(tg.body+"\xff\xfe")))
					b64("base64 unpadded", base64.RawStdEncoding.EncodeToString([]byte(tg.body)))
					b64("base64 invalid", "!!"+badInputMarker+"!!")
					b64("base64 of invalid UTF-8", base64.StdEncoding.EncodeToString([]byte("\xff"+badInputMarker)))
					if enc := base64.StdEncoding.EncodeToString([]byte(tg.body)); enc != "" {
						b64("base64 with a newline", enc[:4]+"\n"+enc[4:])
					}
					for _, k := range []string{"", " ", strings.Repeat("k", 21), strings.Repeat("k", 22), strings.Repeat("k", 128), strings.Repeat("k", 129),
						strings.Repeat("k", 255), strings.Repeat("k", 256), strings.Repeat(badInputMarker, 1000), "k-" + badInputMarker + "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9",
						"k-" + badInputMarker + "\x00abcdefgh", "k-" + badInputMarker + "\xffabcdefgh", "k-" + badInputMarker + "-aaaa,k-" + badInputMarker + "-bbbb",
						"k-" + badInputMarker + "-with space", "\"k-" + badInputMarker + "-quoted\"", "k-" + badInputMarker + "/../../etc"} {
						post("key "+k, tg.body, map[string]string{"idempotency-key": k})
					}
					for _, im := range []string{"", "*", "\"1\"", "W/\"1\"", "1", "\"-1\"", "\"99999999999999999999\"", "\"1\", \"2\"", "\"", "\"\x00\"", "\"" + badInputMarker + "\""} {
						post("if-match "+im, tg.body, map[string]string{"if-match": im})
						post("decided "+im, tg.body, map[string]string{"idempotency-decided-version": im})
					}
				}

				// Reads, paths and methods: what Layer 1 does not read, under
				// the deployed Guard only.
				reads := func() {
					// Reads: queries and headers.
					r := live()
					reads := []string{pp(completed), pp(completed) + "/effects", pp(completed) + "/events", pp(r) + "/events", pp(completed) + "/events/poll",
						pp(r) + "/events/poll", "/inbox", "/host/effect-seams", "/.well-known/openwop", "/openapi.json"}
					queries := []string{"", "afterSequence=0", "afterSequence=", "afterSequence=-1", "afterSequence=1.0", "afterSequence=%2B1", "afterSequence=1e3",
						"afterSequence=99999999999999999999999999", "afterSequence=" + strings.Repeat("9", 5000), "afterSequence=abc", "afterSequence=1&afterSequence=1",
						"afterSequence=" + other.ID, "afterSequence=" + badInputMarker, "timeout=0", "timeout=-1", "timeout=1", "timeout=99999999999999999999",
						"timeout=abc", "limit=0", "limit=-1", "limit=99999999999", "limit=abc", "cursor=" + badInputMarker, "cursor=",
						"streamMode=", "streamMode=values", "streamMode=%00", "streamMode=values&streamMode=values", "bufferMs=-1", "bufferMs=0",
						"bufferMs=99999999999999", "%zz", "a=%", "&&&", "=", "afterSequence", "\xff=\xff", strings.Repeat("a=b&", 2000)}
					for _, p := range reads {
						for _, q := range queries {
							check("query", req("GET", p, q, "", nil))
							check("query", req("HEAD", p, q, "", nil))
						}
						for _, lid := range []string{"", "0", "-1", "abc", "1.5", strings.Repeat("9", 5000), other.ID, badInputMarker, "\x00", "1,2"} {
							check("last-event-id "+lid, req("GET", p, "", "", map[string]string{"last-event-id": lid}))
						}
						for _, inm := range []string{"*", "\"x\"", "W/\"x\"", "\"", strings.Repeat("\"a\",", 2000), "\x00"} {
							check("if-none-match "+inm, req("GET", p, "", "", map[string]string{"if-none-match": inm}))
						}
					}
					// Paths.
					for _, id := range []string{"acme%2F" + strings.Repeat("z", 20), "acme%2f" + strings.Repeat("z", 20), "..", "%2e%2e", "acme~2F..", "acme/..",
						"acme~2F" + strings.Repeat("z", 129), "acme~2F" + strings.Repeat("z", 128), strings.Repeat("a", 129) + "~2F" + strings.Repeat("z", 20),
						"acme~2F\u00e9" + strings.Repeat("z", 20), "acme~2F%C3%A9" + strings.Repeat("z", 20), "acme~2F%FF" + strings.Repeat("z", 20),
						"acme~2F~" + strings.Repeat("z", 20), "acme~2f" + strings.Repeat("z", 20), "acme~2F" + strings.Repeat("z", 15), "%00", "acme%00~2Fzzzzzzzzzzzzzzzzzzzz",
						"anon:x~2F" + strings.Repeat("z", 20), "anon~3Ax~2F" + strings.Repeat("z", 20), "globex~2F" + strings.Repeat("z", 20), "acme~2F" + badInputMarker + "zzzz"} {
						for _, s := range []string{"", "/effects", "/events", "/events/poll"} {
							check("id", req("GET", "/runs/"+id+s, "", "", nil))
						}
						for _, s := range []string{"/cancel", "/retry", ":fork", ":pause", ":resume"} {
							check("id", req("POST", "/runs/"+id+s, "", "", map[string]string{"idempotency-key": key()}))
						}
					}
					for _, id := range []string{"..", "%2e%2e", "a%2Fb", strings.Repeat("z", 5000), "\u00e9", "%C3%A9", badInputMarker, "", "x/y"} {
						for _, s := range []string{"/resubmit", "/discard"} {
							check("entry", req("POST", "/inbox/"+id+s, "", "", map[string]string{"idempotency-key": key()}))
						}
					}
					for _, p := range []string{"/", "", "//runs", "/runs/", "/runs//cancel", "/RUNS", "/runs:BULK-CANCEL", "/runs:bulk-cancel/", "/inbox/", "/.well-known/openwop/",
						"/runs/%2e%2e/%2e%2e/openapi.json", "/runs/" + pp(completed)[len("/runs/"):] + ":Fork", pp(completed) + ":", pp(completed) + "::fork"} {
						for _, m := range []string{"GET", "POST", "OPTIONS", "HEAD", "DELETE"} {
							check("path", req(m, p, "", "", map[string]string{"idempotency-key": key()}))
						}
					}
					for _, p := range append(reads, "/runs", "/runs:bulk-cancel", pp(r)+"/cancel", pp(r)+":pause", pp(r)+":resume", pp(failed)+"/retry",
						pp(completed)+":fork", "/inbox/x/discard", TestWorkOrderPath, LiveWorkOrderPath) {
						for _, m := range []string{"GET", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT", "Get", "", "G ET"} {
							check("method", req(m, p, "", "", nil))
						}
					}
				}
				if gname == "deployed" {
					reads()
				}

				if strings.Contains(logs.String(), badInputMarker) {
					i := strings.Index(logs.String(), badInputMarker)
					lo := strings.LastIndexByte(logs.String()[:i], '\n')
					t.Errorf("a log line carries a key or a body: %.600s", logs.String()[lo+1:])
				}
			})
		}
	}
}
